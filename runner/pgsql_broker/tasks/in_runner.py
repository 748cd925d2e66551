"""A task worker in the runner's process (the setting tasks_app): the Worker an application names, run beside the
runner's databases and stopped with them. It logs in with a connection of its own, as a broker_worker login
(tasks_dsn), since the runner's login may run no task and a worker's may run no SQL job."""
from __future__ import annotations

import asyncio
import logging

import psycopg

from ..config import DatabaseConfig
from ..observe.logs import safe_text
from .loading import load_worker
from .worker import Worker

log = logging.getLogger("pgsql_broker")


class TasksFailed(Exception):
    """The in-process task worker could not start or ended with an error; the message is one line."""


def worker_for(spec: str, tasks_dsn: str, databases: list[DatabaseConfig]) -> Worker | None:
    """The Worker of tasks_app `spec` (None when empty), connected with `tasks_dsn`, else its own dsn, else the
    runner's one database's."""
    if not spec:
        return None
    try:
        worker = load_worker(spec)
    except ValueError as exc:
        raise TasksFailed(f"tasks_app: {exc}") from None
    if tasks_dsn:
        worker.dsn = tasks_dsn
    elif worker.dsn is None:
        if len(databases) != 1:
            raise TasksFailed(f"tasks_app: the runner serves {len(databases)} databases; name the task worker's "
                              "with tasks_dsn (--tasks-dsn, PGBROKER_TASKS_DSN) or Worker(dsn=...)")
        worker.dsn = databases[0].dsn()
    return worker


async def run_beside(worker: Worker, stopping: asyncio.Event) -> None:
    """Run `worker` until `stopping` is set, then stop it gracefully (its shutdown_seconds). When it fails, set
    `stopping` (the runner stops with it: a process that runs only half of what it was asked to is not healthy)
    and raise TasksFailed."""
    async def stop_when_asked() -> None:
        await stopping.wait()
        worker.stop()

    log.info("task worker in the runner's process", extra={"tasks": worker.task_names,
                                                           "concurrency": worker.concurrency})
    watcher = asyncio.create_task(stop_when_asked())
    try:
        await worker.run()
    except ValueError as exc:   # no handlers registered
        stopping.set()
        raise TasksFailed(f"tasks_app: {exc}") from None
    except psycopg.Error as exc:   # refused for good (a login that may not claim tasks, a tenant it may not act for)
        stopping.set()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TasksFailed("tasks_app: " + safe_text(first) + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")) \
            from None
    except Exception as exc:   # a fault of the worker itself: logged whole, and the process stops
        stopping.set()
        log.exception("the task worker failed")
        raise TasksFailed(f"tasks_app: the task worker failed: {type(exc).__name__}: {safe_text(str(exc))}") from None
    finally:
        watcher.cancel()
