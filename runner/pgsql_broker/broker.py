"""The runner as a library: Broker(settings).run() serves every configured database until
stop() or SIGTERM/SIGINT; enqueue() adds a job through broker_add_job."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys

import psycopg
from psycopg import sql

from . import __version__
from .config import DatabaseConfig
from .observe.console import ConsoleDatabase
from .observe.console_api import ConsoleAPI
from .observe import tracing
from .observe.metrics import Metrics
from .observe.web import is_loopback, serve
from .run import queries
from .run.database import DatabaseRunner
from .run.pool import RunnerBudget
from .run.rota import SessionRota, session_slots
from .run.server_share import connection_cap, group_by_server, read_limits
from .settings import Settings
from .tasks import in_runner

log = logging.getLogger("pgsql_broker")


class ListenError(OSError):
    """The HTTP server cannot listen where the settings say; the message names the settings and the address."""


class Broker:
    """One process, many databases: a DatabaseRunner per database, metrics and dashboard on one port."""

    def __init__(self, settings: Settings, tracer_provider=None):
        """tracer_provider: an OpenTelemetry TracerProvider for the spans of the attempts (the application's own,
        or the global one); without it, spans are exported over OTLP when broker.traces_enabled."""
        self.settings = settings
        self.metrics = Metrics()
        self._tracer_provider = tracer_provider
        self._stopping: asyncio.Event | None = None
        self._runners: list[DatabaseRunner] = []
        self._servers: dict[tuple[str, str], str] = {}  # a server's identity -> the name it was first read under
        self._http = None

    def state(self) -> dict:
        return {"name": self.settings.broker.name, "version": __version__, "host": socket.gethostname(),
                "pid": os.getpid(), "running": self._stopping is not None and not self._stopping.is_set(),
                "databases": [r.state() for r in self._runners]}

    def stop(self) -> None:
        """Stop claiming and hand back what is claimed and not started; running jobs may finish until
        shutdown_timeout_sec, then they are interrupted (run/stopping.py). Safe from any thread."""
        if self._stopping is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    async def run(self, handle_signals: bool = False) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        broker = self.settings.broker
        self._hurry = asyncio.Event()
        # a budget and a rota per server, sized from the server before its databases' runners start
        servers = {server: (dbs, RunnerBudget(None), SessionRota(None, broker.parked_visit_sec))
                   for server, dbs in group_by_server(self.settings.databases).items()}
        shares = {db.name: (budget, rota) for dbs, budget, rota in servers.values() for db in dbs}
        self._runners = [DatabaseRunner(db, broker, self.metrics, self._stopping, self._hurry, *shares[db.name])
                         for db in self.settings.databases]
        task_worker = in_runner.worker_for(broker.tasks_app, broker.tasks_dsn, self.settings.databases)
        if task_worker is not None and broker.metrics_enabled:
            self.metrics.registry.register(task_worker.metrics.registry)   # (its metrics on the runner's /metrics)
        tracer = tracing.from_settings(broker, self._tracer_provider)
        for runner in self._runners:
            runner.view.tracer = tracer
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(sig, self._on_signal, sig)
        if broker.metrics_enabled:
            console = ConsoleAPI([ConsoleDatabase(db.name, db.dsn(), db.console_dsn, broker.name)
                                  for db in self.settings.databases], broker.console_token)
            try:
                self._http = serve(broker.metrics_host, broker.metrics_port, self.metrics, self.state,
                                   job_details_anywhere=broker.dashboard_public, console=console)
            except OSError as exc:  # the port is taken, or the host is not an address of this machine
                raise ListenError(f"metrics_host:metrics_port (--metrics-host/--metrics-port, PGBROKER_METRICS_HOST/"
                                  f"PORT, or --no-metrics): cannot listen on {broker.metrics_host}:{broker.metrics_port}: "
                                  f"{exc.strerror or exc}") from None
            address = f"{broker.metrics_host}:{self._http.server_address[1]}"
            log.info("metrics and dashboard listening", extra={
                "address": address, "job_details": "every peer" if broker.dashboard_public else "loopback peers only",
                "console": "actions with the console token" if broker.console_token else "read-only"})
            if broker.dashboard_public and not is_loopback(broker.metrics_host):
                log.warning("dashboard_public: job names, tenants and error messages of every tenant are served "
                            "without authentication on every address of the HTTP port (and the console token "
                            "travels unencrypted: put a TLS proxy in front)", extra={"address": address})
        tasks_run = (asyncio.create_task(in_runner.run_beside(task_worker, self._stopping))
                     if task_worker is not None else None)
        tasks_failed = None
        try:
            await asyncio.gather(*(self._serve_server(server, *share) for server, share in servers.items()))
        finally:
            if tasks_run is not None:
                self._stopping.set()
                await asyncio.wait([tasks_run])
                tasks_failed = tasks_run.exception()
            if self._http is not None:
                self._http.shutdown()
                self._http.server_close()
            if tracer is not None:
                tracer.shutdown()  # (the spans still buffered are exported)
            log.info("stopped")
        if tasks_failed is not None:
            raise tasks_failed

    async def _serve_server(self, server: str, databases: list[DatabaseConfig], budget: RunnerBudget,
                            rota: SessionRota) -> None:
        """Size the runner's share of one server's connections (run/server_share.py), then serve its databases."""
        broker = self.settings.broker
        limits = await read_limits(databases[0], broker, f"{broker.name}:limits", self._stopping,
                                   broker.notify_retry_seconds)
        if limits is None:
            return
        other = self._servers.setdefault(limits.identity, server)
        if other != server:
            log.warning("two names of one server: each has a connection budget of its own, together more than the "
                        "share of one server; name the server the same way in every database's settings",
                        extra={"server": server, "also_named": other})
        total = connection_cap(server, limits, broker.max_open_conns_total)
        sessions = session_slots(total, len(databases))
        budget.cap = total - sessions
        rota.slots = sessions if sessions < len(databases) else None
        log.info("connection budget", extra={
            "server": server, "databases": len(databases), "connections": total, "sessions": sessions,
            "usable_on_server": limits.usable,
            "share": "max_open_conns_total" if broker.max_open_conns_total else "half of the usable"})
        if rota.takes_turns:
            log.warning("more databases than session connections: they take turns (a parked database runs its jobs "
                        "at its next visit, not at its NOTIFY)", extra={
                            "server": server, "databases": len(databases), "sessions": sessions,
                            "worker_connections": total - sessions, "visit_every_sec": broker.parked_visit_sec})
        names = {db.name for db in databases}
        await asyncio.gather(*(r.run() for r in self._runners if r.db.name in names))

    @property
    def http_port(self) -> int | None:
        return self._http.server_address[1] if self._http else None

    def _on_signal(self, sig: signal.Signals) -> None:
        running = sum(len(r.view.running) for r in self._runners)
        if self._stopping.is_set():
            if not self._hurry.is_set():
                self._say(logging.WARNING, f"second signal: interrupting {_jobs(running)} now (back to pending, "
                          "attempt not counted)", {"signal": sig.name, "running_jobs": running})
            self._hurry.set()
            return
        timeout = self.settings.broker.shutdown_timeout_sec
        if running:
            they, are, them = ("it", "is", "it") if running == 1 else ("they", "are", "them")
            text = (f"stopping: {_jobs(running)} running may finish for {timeout:g} s from now, then {they} {are} "
                    f"interrupted (back to pending, attempt not counted); a second Ctrl-C or SIGTERM interrupts "
                    f"{them} now")
        else:
            text = "stopping: no job running"
        self._say(logging.WARNING if running else logging.INFO, "signal received, " + text + "; claimed jobs not "
                  "started go back to pending now", {"signal": sig.name, "running_jobs": running,
                                                     "shutdown_timeout_sec": timeout})
        self._stopping.set()

    @staticmethod
    def _say(level: int, text: str, fields: dict) -> None:
        """Log a stop's line, and print it plainly too when a person watches stderr (the log may be JSON)."""
        log.log(level, text, extra=fields)
        if sys.stderr.isatty():
            print(f"pgsql_broker: {text}", file=sys.stderr, flush=True)


def _jobs(count: int) -> str:
    return "1 job" if count == 1 else f"{count} jobs"


def enqueue(conn: psycopg.Connection, name: str, sql_text: str, *, traceparent: str | None = None, **params) -> int:
    """Enqueue through broker.broker_add_job with any of its named parameters (without the p_ prefix);
    returns the job id. Every rule is the extension's. The job carries `traceparent` (a W3C trace context), else
    the current span's when OpenTelemetry is installed: set as broker.traceparent for the enqueue's transaction."""
    extra = sql.SQL("").join(sql.SQL(", {} => {}").format(sql.Identifier(f"p_{k}"), sql.Placeholder(k))
                             for k in params)
    query = sql.SQL(queries.ENQUEUE.replace("{params}", "{}")).format(extra)
    traceparent = traceparent or tracing.current_traceparent()
    if traceparent is None:
        return conn.execute(query, {"name": name, "sql": sql_text, **params}).fetchone()[0]
    # the setting lasts until the end of the caller's transaction; an autocommit connection gets one for the two
    with conn.transaction() if conn.autocommit else contextlib.nullcontext():
        conn.execute(tracing.SET_TRACEPARENT, {"traceparent": traceparent})
        return conn.execute(query, {"name": name, "sql": sql_text, **params}).fetchone()[0]
