"""Finding the Worker an application names as 'module:attribute' (`pgsql-broker worker --app`, the runner's
tasks_app)."""
from __future__ import annotations

import importlib
import os
import sys

from .worker import Worker


def check_spec(spec: str) -> tuple[str, str]:
    """(module, attribute) of 'module:attribute'; ValueError naming what is wrong."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"must be module:attribute, got {spec!r}")
    return module_name, attribute


def load_worker(spec: str) -> Worker:
    """The Worker named by 'module:attribute' (the current directory is importable, as with python -m);
    ValueError when the module cannot be imported or the attribute is not a Worker."""
    module_name, attribute = check_spec(spec)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name}: {exc}") from None
    worker = getattr(module, attribute, None)
    if not isinstance(worker, Worker):
        raise ValueError(f"{spec} is not a pgsql_broker.tasks.Worker")
    return worker
