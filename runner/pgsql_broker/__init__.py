"""pgsql_broker: a PostgreSQL job broker. The extension does the work; this package installs it."""

import re as _re
from pathlib import Path as _Path


def _control_version() -> str:
    """default_version of pgsql_broker.control, the one source of the version: the package carries the file
    (a link in the tree, a copy in the sdist and the wheel), and pyproject.toml takes its version from here."""
    text = (_Path(__file__).parent / "pgsql_broker.control").read_text()
    match = _re.search(r"^default_version\s*=\s*'([^']+)'", text, _re.M)
    if not match:
        raise RuntimeError("pgsql_broker.control has no default_version")
    return match.group(1)


__version__ = _control_version()

__all__ = ["Broker", "Settings", "enqueue", "load_settings", "__version__"]


def __getattr__(name: str):  # the library API, imported lazily (the install CLI does not need it)
    if name in ("Broker", "enqueue"):
        from . import broker
        return getattr(broker, name)
    if name in ("Settings", "load_settings"):
        from . import settings
        return {"Settings": settings.Settings, "load_settings": settings.load}[name]
    raise AttributeError(name)
