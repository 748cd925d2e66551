"""`pgsql-broker worker --app module:worker`: runs a task worker (pgsql_broker.tasks.Worker) until SIGTERM or SIGINT,
then stops it gracefully (running handlers get its shutdown_seconds, then their tasks are handed back)."""
from __future__ import annotations

import asyncio
import os
import signal

import click
import psycopg

from .config import connection_strings
from .observe import logs
from .observe.logs import safe_text
from .tasks import Worker, loading


def load_worker(spec: str) -> Worker:
    """The Worker named by 'module:attribute', or a usage error naming --app."""
    try:
        return loading.load_worker(spec)
    except ValueError as exc:
        raise click.UsageError(f"--app: {exc}") from None


async def _serve(worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    await worker.run()


@click.command("worker")
@click.option("--app", "app", required=True, metavar="MODULE:ATTR", help="The Worker to run, e.g. myapp.tasks:worker.")
@click.option("--dsn", help="Database; else the Worker's own, else $PGBROKER_DSN, else libpq's environment (PGHOST, ...).")
@click.option("--tenant", help="Tenant the worker serves (else the Worker's, else broker.tenant_id or 'default').")
@click.option("--concurrency", type=click.IntRange(1, 10_000), help="Tasks run at once (else the Worker's).")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve /metrics on 127.0.0.1 at this port.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True)
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
def worker_command(app, dsn, tenant, concurrency, metrics_port, log_level, log_format) -> None:
    """Run application-code tasks (docs/tasks.md): the handlers of the Worker in --app, until SIGTERM or SIGINT."""
    worker = load_worker(app)
    if dsn is not None or worker.dsn is None:
        dsns, _source = connection_strings((dsn,) if dsn else (), os.environ)
        worker.dsn = dsns[0]
    if tenant is not None:
        worker.tenant = tenant
    if concurrency is not None:
        worker.concurrency = concurrency
    if metrics_port is not None:
        worker.metrics_port = metrics_port
    logs.configure(log_level, log_format)
    try:
        asyncio.run(_serve(worker))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    except psycopg.Error as exc:   # refused for good (a login that may not claim tasks, a tenant it may not act for)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise click.ClickException(safe_text(first) + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")) from None
