"""The pgsql-broker command line. Exit codes: 0 ok, 1 runtime failure, 2 usage or config error."""
from __future__ import annotations

import asyncio
import dataclasses
import sys

import click
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row, namedtuple_row

from . import __version__
from .broker import Broker
from .config import DSN_FALLBACK, ConfigError, libpq_default
from .install import InstallError, apply_roles, install, verify
from .install.credentials import ADMIN_PASSWORD, ADMIN_USER, ROLE_PASSWORDS
from .install.role_setup import check_roles, missing_roles, sharing_notice
from .observe import flow, job_queries, logs
from .observe.logs import safe_text
from .run import queries
from .run.connect_errors import PermanentError, connect_message
from .tasks.in_runner import TasksFailed
from .run.login import LoginRefused
from .run.server_share import ShareRefused
from .settings import BrokerSettings
from .settings import load as load_settings


def _describe(dsn: str) -> str:
    """A connection target for messages: never the password (libpq's defaults where the DSN names nothing)."""
    params = conninfo_to_dict(dsn)
    return (f"{params.get('dbname') or libpq_default('dbname') or libpq_default('user') or '(default database)'} on "
            f"{params.get('host') or libpq_default('host') or '(default socket)'}")


def _targets(dsns: tuple[str, ...], config_path: str | None) -> list[tuple[str, str]]:
    """(label, dsn) of every database that `start` would serve with these --dsn and --config (settings.load:
    the file checked as start checks it; without either, PGBROKER_DSN, else libpq's environment)."""
    try:
        databases = load_settings(config_path, dsns=list(dsns)).databases
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    return [(_describe(db.raw_dsn) if db.raw_dsn is not None else db.name, db.dsn()) for db in databases]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgsql-broker")
def main() -> None:
    """pgsql_broker: a PostgreSQL job broker. The database does the work."""


@main.command("install")
@click.option("--dsn", "dsns", multiple=True, metavar="DSN",
              help=f"libpq connection string or URI (repeatable). {DSN_FALLBACK}")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file: every database in it.")
@click.option("--no-extension", is_flag=True, help="Install as tracked migrations even where CREATE EXTENSION works.")
@click.option("--verify-only", is_flag=True, help="Report version, pending migrations and differences; change nothing.")
@click.option("--with-roles", is_flag=True, help="Also create or update broker_admin, broker_runtime, broker_enqueue "
              "and their grants (passwords untouched unless --set-passwords).")
@click.option("--set-passwords", is_flag=True, help="With --with-roles: give the three roles LOGIN and new passwords "
              "(they are cluster-wide: every database using them is named first).")
@click.option("--retention-login", "retention_logins", multiple=True, metavar="ROLE",
              help="With --with-roles: also GRANT broker_retention (broker_purge_jobs only) to this runner login "
              "or role, so that the runner purges on its retention policy (repeatable).")
@click.option("--admin-user", help="Login for --with-roles (else $PGUSER, $PG_USER, prompt).")
@click.option("--admin-password", help="Its password (else $PGPASSWORD, $PG_PASS, prompt).")
@click.option("--broker-admin-password", help="Password for broker_admin (else $BROKER_ADMIN_PASSWORD, prompt).")
@click.option("--broker-runtime-password", help="Password for broker_runtime (else $BROKER_RUNTIME_PASSWORD, prompt).")
@click.option("--broker-enqueue-password", help="Password for broker_enqueue (else $BROKER_ENQUEUE_PASSWORD, prompt).")
def install_command(dsns, config_path, no_extension, verify_only, with_roles, set_passwords, retention_logins,
                    admin_user, admin_password, broker_admin_password, broker_runtime_password,
                    broker_enqueue_password) -> None:
    """Install or upgrade the broker schema: CREATE EXTENSION where possible, else tracked migrations.

    Idempotent; refuses to downgrade or to mix the two install paths on one database. Works for a
    database owner with CREATEROLE and without superuser (managed PostgreSQL; docs/install.md).
    """
    if verify_only and with_roles:
        raise click.UsageError("--verify-only cannot be combined with --with-roles")
    if set_passwords and not with_roles:
        raise click.UsageError("--set-passwords needs --with-roles")
    if retention_logins and not with_roles:
        raise click.UsageError("--retention-login needs --with-roles")
    if "broker_enqueue" in retention_logins:
        raise click.UsageError("--retention-login broker_enqueue: every enqueue login could purge every tenant's "
                               "finished jobs; name the runner's login")
    targets = _targets(dsns, config_path)

    if verify_only:
        failed = False
        for label, dsn in targets:
            try:
                report = verify(dsn)
            except psycopg.Error as exc:
                click.echo(f"{label}: error: {connect_message(exc)}", err=True)
                failed = True
                continue
            for line in report.lines():
                click.echo(f"{label}: {line}")
            failed |= not report.ok
        sys.exit(1 if failed else 0)

    passwords: dict[str, str] = {}
    if with_roles:
        # Resolve every credential before changing anything.
        user = ADMIN_USER.resolve(admin_user)
        secret = ADMIN_PASSWORD.resolve(admin_password)
        given = {"broker_admin": broker_admin_password, "broker_runtime": broker_runtime_password,
                 "broker_enqueue": broker_enqueue_password}
        if set_passwords:
            passwords = {role: ROLE_PASSWORDS[role].resolve(given[role]) for role in ROLE_PASSWORDS}
        elif any(given.values()):
            raise click.UsageError("--broker-*-password: passwords are set only with --set-passwords")
        targets = [(label, make_conninfo(dsn, user=user, password=secret)) for label, dsn in targets]

    failed = False
    for label, dsn in targets:
        def say(msg: str, label=label) -> None:
            click.echo(f"{label}: {msg}")
        try:
            then = None
            if with_roles:
                with psycopg.connect(dsn, autocommit=True) as conn:  # before anything changes
                    check_roles(conn)
                    missing = missing_roles(conn, retention_logins)
                    if missing:  # (before anything changes)
                        raise InstallError(f"--retention-login: no role {', '.join(missing)} on this server "
                                           "(create the runner's login first)")
                    for line in sharing_notice(conn, set_passwords):
                        say(line)
                then = lambda dsn=dsn, say=say: apply_roles(dsn, passwords, retention_logins, log=say)  # noqa: E731
            install(dsn, no_extension=no_extension, log=say, then=then)
        except (InstallError, psycopg.Error) as exc:
            click.echo(f"{label}: error: {connect_message(exc)}", err=True)
            failed = True
    sys.exit(1 if failed else 0)


# -- running the broker ---------------------------------------------------------
_FLAG_HELP = {
    "queue_timer_sec": "Seconds between polls of an idle queue (NOTIFY wakes it earlier).",
    "lease_seconds": "Lease of a claimed job before recovery may take it back.",
    "stale_job_recovery_sec": "How often expired leases are recovered.",
    "worker_idle_timeout_sec": "Close an idle queue worker's connection after this many seconds.",
    "queue_depth_poll_sec": "How often queue depth is read for metrics and the dashboard.",
    "shutdown_timeout_sec": "On SIGTERM/SIGINT, how long running jobs may take to finish.",
    "metrics_host": "Address of /metrics, /healthz and the dashboard (default 127.0.0.1).",
    "metrics_port": "Port of /metrics, /healthz and the dashboard (0: any free port).",
    "workers_per_queue": "Workers per queue (default 2): a long job occupies one, the others go on.",
    "queue_workers": "Per-queue overrides of --workers-per-queue, like '3=4,7=1'.",
    "one_job_per_transaction_queues": "Queues whose jobs each run in a transaction of their own, like '5,6'.",
    "batch_budget_ms": "A job waits at most this long for the commit of its transaction of jobs (default 200).",
    "max_open_conns_total": "Connections of the runner to one server, all its databases, at most (default 0: half of "
                            "what the server gives non-superusers; more than it gives is refused at start); a "
                            "quarter stays for workers, and databases beyond the rest take turns.",
    "tcp_keepalives_idle_sec": "libpq keepalives_idle of every connection whose DSN sets none (default 10).",
    "tcp_keepalives_interval_sec": "libpq keepalives_interval of every connection whose DSN sets none (default 5).",
    "tcp_keepalives_count": "libpq keepalives_count of every connection whose DSN sets none (default 3).",
    "tcp_user_timeout_ms": "libpq tcp_user_timeout of every connection whose DSN sets none (default 30000).",
    "connect_timeout_sec": "libpq connect_timeout of every connection whose DSN (or PGCONNECT_TIMEOUT) sets none "
                           "(default 10).",
    "statement_deadline_sec": "A connection whose server does not answer the runner's own statements within this "
                              "is closed and opened again (default 30; jobs have their own timeouts).",
    "refusal_retry_sec": "How long a database that served before is retried while it refuses the runner (a login "
                         "refused, broker_runtime revoked, a pg_hba.conf reject); default 0: for ever.",
    "traces_enabled": "A span per attempt of a job, exported over OTLP/HTTP (needs the extra: "
                      "pip install 'pgsql-broker[otel]'; docs/tracing.md).",
    "traces_endpoint": "OTLP/HTTP base URL of the spans, like http://collector:4318 (default: "
                       "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318).",
    "traces_service_name": "service.name of the runner's spans (default pgsql-broker).",
    "tasks_app": "Run this pgsql_broker.tasks.Worker (module:attribute, as worker --app) in the runner's process.",
    "tasks_dsn": "The in-process task worker's database login, a broker_worker member (default: the Worker's own "
                 "dsn, else the one --dsn).",
    "parked_visit_sec": "Databases taking turns (more of them than session connections): visit each about this often.",
    "allow_privileged_login": "Run even when a database login is or can become a superuser, BYPASSRLS, CREATEROLE or "
                              "REPLICATION role, broker_admin, or a member of pg_execute_server_program and the like "
                              "(unsafe: the runner refuses such a login without this flag).",
}


def runner_options(command):
    """Every broker setting as a flag (flags beat environment beat config file)."""
    for f in reversed(dataclasses.fields(BrokerSettings)):
        if f.name in ("metrics_enabled", "enable_debug", "dashboard_public", "console_token"):
            continue  # (a token on the command line would show in ps: file or environment only)
        if f.name == "retention_enabled":
            command = click.option("--retention/--no-retention", f.name, default=None,
                                   help="Purge finished jobs on the retention policy (default on).")(command)
            continue
        if f.type == "bool":
            command = click.option(f"--{f.name.replace('_', '-')}", f.name, is_flag=True, default=None,
                                   help=_FLAG_HELP.get(f.name, f"broker.{f.name}."))(command)
            continue
        kind = {"int": int, "float": float, "str": str}[f.type]
        command = click.option(f"--{f.name.replace('_', '-')}", f.name, type=kind, default=None,
                               help=_FLAG_HELP.get(f.name, f"broker.{f.name} (default {f.default})."))(command)
    for decorator in (
        click.option("--dsn", "dsns", multiple=True, metavar="DSN",
                     help=f"Database to serve (repeatable), besides the config file's. {DSN_FALLBACK}"),
        click.option("--config", "config_path", type=click.Path(dir_okay=False), help="YAML or JSON config file."),
        click.option("--queue-count", type=click.IntRange(1, 1000), help="Queues per --dsn database (default 4)."),
        click.option("--max-open-conns", type=int, help="databases.max_open_conns for --dsn databases (default 25)."),
        click.option("--conn-max-lifetime", help="databases.conn_max_lifetime for --dsn databases (default 5m)."),
        click.option("--conn-max-idle-time", help="databases.conn_max_idle_time for --dsn databases (default 10m)."),
        click.option("--no-metrics", is_flag=True, default=None, help="Do not serve /metrics and the dashboard."),
        click.option("--enable-debug", is_flag=True, default=None, help="Debug logging."),
        click.option("--dashboard-public", is_flag=True, default=None,
                     help="Serve /api/state and the dashboard (job names, errors) on every address, not only loopback."),
        click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), help="Log level."),
        click.option("--log-format", type=click.Choice(["json", "text"]), help="Log line format."),
    ):
        command = decorator(command)
    return command


def _run(dsns, config_path, no_metrics, enable_debug, log_level, log_format, **other_flags) -> None:
    flags = dict(other_flags, level=log_level, format=log_format,
                 metrics_enabled=False if no_metrics else None, enable_debug=True if enable_debug else None)
    try:
        settings = load_settings(config_path, flags=flags, dsns=list(dsns))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    logs.configure("debug" if settings.broker.enable_debug else settings.logging.level, settings.logging.format)
    try:
        asyncio.run(Broker(settings).run(handle_signals=True))
    except (OSError, LoginRefused, PermanentError, ShareRefused, TasksFailed) as exc:  # the metrics port is taken,
        # a privileged login, a connection cap the server cannot give, a task worker refused, ...
        click.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(1)
    sys.exit(0)


@main.command("start")
@runner_options
def start_command(**options) -> None:
    """Run the broker: serve every configured database until SIGTERM/SIGINT."""
    _run(**options)


@click.command("pgbroker-runner", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pgbroker-runner")
@runner_options
def runner_main(**options) -> None:
    """Run the broker over the databases given with --dsn (or --config, PGBROKER_DSN, libpq's environment)."""
    _run(**options)


def _status_activity(conn: psycopg.Connection, queue_counts: list[int]) -> None:
    """What the claimed jobs do now (executing, or waiting: to start, or for their transaction's commit), and the
    ready jobs in queue numbers that the active instance does not serve."""
    claimed = conn.execute(queries.JOB_ACTIVITY).fetchall()
    if claimed:
        executing = sum(1 for r in claimed if r.activity == "executing")
        click.echo(f"  claimed jobs: {executing} executing, {len(claimed) - executing} waiting "
                   "(to start, or for the commit of their transaction of jobs)")
        for job_id, queue, tenant, name, started_at, activity in claimed[:STATUS_JOBS]:
            click.echo(f"    job {job_id} '{safe_text(name)}' queue {queue} tenant {safe_text(tenant)}: {activity}, "
                       f"claimed {started_at:%Y-%m-%d %H:%M:%S}")
        if len(claimed) > STATUS_JOBS:
            click.echo(f"    ... and {len(claimed) - STATUS_JOBS} more")
    ready = conn.execute(queries.READY_QUEUES).fetchone()[0] or []
    served = max(queue_counts, default=0)
    unserved = [q for q in ready if q > served]
    if unserved:
        click.echo(f"  warning: jobs ready in queue(s) {', '.join(map(str, unserved))}, which no active instance serves "
                   f"(queue_count {served}): they wait until a runner serves them")


STATUS_JOBS = 20


@main.command("status")
@click.option("--dsn", "dsns", multiple=True, metavar="DSN", help=f"Database (repeatable). {DSN_FALLBACK}")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Config file: every database in it, the file checked as start checks it.")
def status_command(dsns, config_path) -> None:
    """Print, per database, the active and standby instances, the jobs per queue and state, each tenant's share
    of its queues and each concurrency key's limit and use, and the schedules.

    A broker_runtime login sees every tenant's jobs; a broker_enqueue login the jobs and schedules of
    the tenants it may act for (its mappings in broker_tenant_roles, and the default tenant)."""
    failed = False
    for label, dsn in _targets(dsns, config_path):
        try:
            with psycopg.connect(dsn, autocommit=True, row_factory=namedtuple_row) as conn:
                _print_status(conn, label)
        except NotInstalled as exc:
            click.echo(f"database {safe_text(label)}: error: {exc}", err=True)
            failed = True
        except psycopg.Error as exc:  # enqueued text can reach an error message: escaped like the rest
            click.echo(f"database {safe_text(label)}: error: {safe_text(connect_message(exc))}", err=True)
            failed = True
    sys.exit(1 if failed else 0)


def _flow_rows(conn: psycopg.Connection) -> tuple[list[dict], list[dict]]:
    """Each tenant's part of its queues and each key's limit and use (observe/flow.py), as this login reads them."""
    cur = conn.cursor(row_factory=dict_row)
    return cur.execute(job_queries.TENANT_STATS).fetchall(), cur.execute(job_queries.KEY_STATS).fetchall()


class NotInstalled(Exception):
    """The database has no schema broker, or this login may not use it."""


def _print_status(conn: psycopg.Connection, label: str) -> None:
    access = conn.execute(queries.STATUS_ACCESS).fetchone()
    if not access.schema:
        raise NotInstalled("pgsql_broker is not installed in this database: run pgsql-broker install --dsn ...")
    if not access.usage:
        raise NotInstalled(f"login {conn.info.user} may not use schema broker: log in as a member of broker_runtime "
                           "(every tenant) or broker_enqueue (its tenants)")
    click.echo(f"database {safe_text(label)}")
    if access.instances:
        rows = conn.execute(queries.INSTANCES).fetchall()
        active = [r for r in rows if r.status == "active"]
        for r in active:
            click.echo(f"  active instance {r.instance_id}: {safe_text(r.instance_name)} on {safe_text(r.hostname)} "
                       f"pid {r.os_pid}, last ping {r.last_ping_at:%Y-%m-%d %H:%M:%S}")
        for r in rows:
            if r.status == "parked":
                click.echo(f"  parked instance {r.instance_id}: {safe_text(r.instance_name)} on {safe_text(r.hostname)} "
                           f"pid {r.os_pid}, served in turns (its runner has more databases than session "
                           f"connections), last ping {r.last_ping_at:%Y-%m-%d %H:%M:%S}")
        if not active and not any(r.status == "parked" for r in rows):
            click.echo("  no active instance")
        click.echo(f"  standby runners: {conn.execute(queries.STANDBY_COUNT).fetchone().standby}")
    else:
        click.echo("  instances: not readable by this login (broker_runtime members see them)")
    click.echo("  queue tenant               ready blocked delayed running done/1h failed/1h cancelled/1h")
    if access.runtime:  # every tenant, through the SECURITY DEFINER function
        stats, schedules = conn.execute(queries.QUEUE_STATS).fetchall(), conn.execute(queries.SCHEDULES).fetchall()
        tenants, limits = _flow_rows(conn)
    else:  # the login's own tenants, one transaction each (row-level security shows one tenant at a time)
        stats, schedules, tenants, limits = [], [], [], []
        for (tenant,) in conn.execute(queries.OWN_TENANTS).fetchall():
            with conn.transaction():
                conn.execute(queries.SET_TENANT, {"tenant": tenant})
                stats += conn.execute(queries.OWN_QUEUE_STATS).fetchall()
                schedules += conn.execute(queries.SCHEDULES).fetchall()
                own_tenants, own_limits = _flow_rows(conn)
                tenants += own_tenants
                limits += [r for r in own_limits if r not in limits]  # (the limits across tenants: once)
    for q in stats:
        click.echo(f"  {q.job_queue:5d} {safe_text(q.tenant_id):20.20s} {q.ready:5d} {q.blocked:7d} {q.delayed:7d} "
                   f"{q.running:7d} {q.completed_last_hour:7d} {q.failed_last_hour:9d} {q.cancelled_last_hour:12d}"
                   + ("  paused" if q.paused else ""))
    if not stats:
        click.echo("  (no jobs)")
    for line in flow.tenant_lines(tenants) + flow.limit_lines(limits):
        click.echo(line)
    if access.runtime and access.instances:
        _status_activity(conn, [r.queue_count for r in active])
    for name, expr, zone, enabled, next_at, last_at, skipped, capped, error in schedules:
        when = f"next {next_at:%Y-%m-%d %H:%M %Z}" if enabled and next_at else "disabled"
        last = f", last {last_at:%Y-%m-%d %H:%M %Z}" if last_at else ""
        click.echo(f"  schedule '{safe_text(name)}' '{safe_text(expr)}' ({safe_text(zone)}): {when}{last}, "
                   f"{skipped}{'+' if capped else ''} skipped" + (f"; error: {safe_text(error)}" if error else ""))


# jobs, queues and purge: operating jobs (jobs_cli.py)
from .jobs_cli import register as _register_operate  # noqa: E402  (after main exists)
_register_operate(main)


# schedules: list, show, pause, resume, run-now (schedules_cli.py)
from .schedules_cli import schedules as _schedules  # noqa: E402  (after main exists)
main.add_command(_schedules)
# import pg-cron: pg_cron's jobs as schedules (import_cli.py)
from .import_cli import importer as _importer  # noqa: E402  (after main exists)
main.add_command(_importer)
# worker: application-code tasks (worker_cli.py, tasks/)
from .worker_cli import worker_command as _worker  # noqa: E402  (after main exists)
main.add_command(_worker)
