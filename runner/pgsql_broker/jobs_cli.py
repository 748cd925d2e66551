"""pgsql-broker jobs | queues | purge: operate jobs from the command line (issue 22), and enqueue them (issue 35).

Every command works on one database (--dsn, or --config with one database) through the extension's functions, as
the login given: reads are tenant-scoped by row-level security and --tenant acts for that tenant
(broker_set_tenant). Tables for people, --json for scripts. Exit codes as the other commands: 0 ok, 1 failure (one
line: the server's message and SQLSTATE), 2 usage.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime

import click
import psycopg
from psycopg import sql

from .config import DSN_FALLBACK
from .observe import job_queries as ops
from .observe import tracing
from .observe.logs import safe_text
from .states import JobState

_STATE_NAMES = [s.label for s in JobState]


def _one_database(dsns: tuple[str, ...], config_path: str | None) -> str:
    from .cli import _targets  # (cli imports this module)
    targets = _targets(dsns, config_path)
    if len(targets) != 1:
        raise click.UsageError(f"name one database (got {len(targets)}): --dsn DSN, or a --config with one database")
    return targets[0][1]


def _fail(exc: psycopg.Error) -> None:
    """One line on stderr, exit 1 (a bad argument the server refused, 22xxx, is a usage error: exit 2)."""
    text = exc.diag.message_primary or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    line = f"error: {safe_text(text)}" + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")
    if exc.diag.message_hint:
        line += f"; hint: {safe_text(exc.diag.message_hint)}"
    click.echo(line, err=True)
    sys.exit(2 if (exc.sqlstate or "").startswith("22") else 1)


def _run(dsn: str, tenant: str | None, work):
    """work(conn) in one transaction, acting for `tenant` when given; psycopg errors end the command."""
    try:
        with psycopg.connect(dsn) as conn:
            if tenant is not None:
                conn.execute(ops.SET_TENANT, {"tenant": tenant})
            result = work(conn)
            conn.commit()
            return result
    except psycopg.Error as exc:
        _fail(exc)


def _jsonable(value):
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _emit_json(data) -> None:
    click.echo(json.dumps(data, default=_jsonable, indent=2))


def _when(value) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if value else "-"


def db_options(command):
    for decorator in (
        click.option("--dsn", "dsns", multiple=True, metavar="DSN",
                     help=f"The database (libpq string or URI). {DSN_FALLBACK}"),
        click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file with one database."),
        click.option("--tenant", help="Act for this tenant (broker_set_tenant); jobs list also shows only its jobs."),
        click.option("--json", "as_json", is_flag=True, help="JSON for scripts instead of a table."),
    ):
        command = decorator(command)
    return command


@click.group("jobs")
def jobs() -> None:
    """Enqueue, list, show, cancel and retry jobs."""


@jobs.command("list")
@db_options
@click.option("--state", type=click.Choice(_STATE_NAMES, case_sensitive=False), help="Only jobs in this state.")
@click.option("--queue", type=click.IntRange(1, 1000), help="Only this queue.")
@click.option("--name", help="Only job names matching this LIKE pattern (say 'nightly%').")
@click.option("--limit", type=click.IntRange(1, 10000), default=50, show_default=True, help="At most this many, newest first.")
def jobs_list(dsns, config_path, tenant, as_json, state, queue, name, limit) -> None:
    """The newest jobs, with filters."""
    dsn = _one_database(dsns, config_path)
    params = {"state": int(JobState.parse(state)) if state else None, "queue": queue, "tenant": tenant,
              "name": None, "name_like": name, "finished_within": None, "before": None, "limit": limit}
    cur_rows = _run(dsn, tenant, lambda conn: _rows(conn, ops.JOBS, params))
    if as_json:
        _emit_json([dict(r, state=JobState(r["complete_status"]).label) for r in cur_rows])
        return
    click.echo(f"{'id':>8} {'state':9} {'queue':>5} {'tenant':16} {'att':>5} {'name':30} note")
    for r in cur_rows:
        note = safe_text(r["note"] or "")[:60]
        click.echo(f"{r['job_id']:>8} {JobState(r['complete_status']).label:9} {r['job_queue']:>5} "
                   f"{safe_text(r['tenant_id'])[:16]:16} {str(r['attempts']) + '/' + str(r['max_attempts']):>5} "
                   f"{safe_text(r['job_name'])[:30]:30} {note}")
    if not cur_rows:
        click.echo("(no jobs)")


def _rows(conn: psycopg.Connection, sql: str, params: dict) -> list[dict]:
    cur = conn.execute(sql, params)
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


@jobs.command("show")
@db_options
@click.argument("job_id", type=click.IntRange(1))
def jobs_show(dsns, config_path, tenant, as_json, job_id) -> None:
    """A job: its SQL, each attempt, the jobs it waits on and that wait on it, its output."""
    dsn = _one_database(dsns, config_path)

    def read(conn):
        job = _rows(conn, ops.JOB, {"job_id": job_id, "with_sql": True})
        if not job:
            return None
        keys = {"job_id": job_id, "job_group": job[0]["job_group"], "tenant_id": job[0]["tenant_id"]}
        return {**job[0], "state": JobState(job[0]["complete_status"]).label,
                "attempt_history": _rows(conn, ops.ATTEMPTS, keys)[::-1],  # (oldest first here)
                "waits_on": _rows(conn, ops.WAITS_ON, keys),
                "waited_on_by": _rows(conn, ops.WAITED_ON_BY, keys)}
    job = _run(dsn, tenant, read)
    if job is None:
        click.echo(f"error: job {job_id} does not exist (for this login and tenant)", err=True)
        sys.exit(1)
    if as_json:
        _emit_json(job)
        return
    is_task = job["job_language"] == "task"   # run by application code: its name is the task, its text its args
    click.echo(f"{'task' if is_task else 'job'} {job['job_id']} {safe_text(job['job_name'])!r}: {job['state']}")
    for label, key in (("group", "job_group"), ("queue", "job_queue"), ("priority", "job_priority"),
                       ("tenant", "tenant_id"), ("run as", "run_as"), ("enqueued by", "enqueued_by"),
                       ("timeout", "job_timeout"), ("language", "job_language"), ("concurrency", "concurrency_key")):
        if is_task and key in ("job_queue", "run_as"):
            continue   # (its name's queue, which no runner serves; it runs in its worker, as the worker's login)
        click.echo(f"  {label + ':':13}{safe_text(job[key]) if job[key] is not None else '-'}")
    if job["waiting"]:
        click.echo(f"  {'waiting:':13}{safe_text(job['waiting'].removeprefix('waiting: '))}")
    click.echo(f"  {'attempts:':13}{job['attempts']}/{job['max_attempts']} (interrupted {job['interruptions']})")
    click.echo(f"  {'created:':13}{_when(job['created_at'])}  run after {_when(job['run_after'])}  "
               f"started {_when(job['started_at'])}  finished {_when(job['finished_at'])}")
    if job["last_error_sqlstate"] or job["last_error_message"]:
        click.echo(f"  {'last error:':13}{job['last_error_sqlstate'] or ''} {safe_text(job['last_error_message'] or '')}")
    if job["cancel_reason"]:
        click.echo(f"  {'cancelled:':13}{safe_text(job['cancel_reason'])}")
    text = job["execute_str"] or ""
    if is_task and not job["execute_str_cut"]:
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    click.echo("  args:" if is_task else "  sql:")
    for line in text.splitlines() or [""]:
        click.echo(f"    {safe_text(line)}")
    click.echo("  waits on:" + ("" if job["waits_on"] else " nothing"))
    for d in job["waits_on"]:
        what = (f"job {d['job_id']} {safe_text(d['job_name'] or '')!r} ({JobState(d['complete_status']).label})"
                if d["job_id"] else f"group {safe_text(d['job_group'])!r}")
        click.echo(f"    {what}")
    click.echo("  waited on by:" + ("" if job["waited_on_by"] else " nothing"))
    for d in job["waited_on_by"]:
        click.echo(f"    job {d['job_id']} {safe_text(d['job_name'])!r} ({JobState(d['complete_status']).label})"
                   + (f" via group {safe_text(d['depends_on_group'])!r}" if d["depends_on_group"] else ""))
    click.echo("  attempt history:" + ("" if job["attempt_history"] else " none yet"))
    for a in job["attempt_history"]:
        detail = (f"{safe_text(a['command_status'] or '')}" + (f", output {safe_text(a['output'])!r}" if a["output"] else "")
                  if a["outcome"] == "completed"
                  else f"{a['error_sqlstate'] or ''} {safe_text(a['error_message'] or '')}".strip())
        click.echo(f"    #{a['attempt']} {a['outcome']:11} {_when(a['started_at'])} .. {_when(a['finished_at'])}"
                   f"  instance {a['instance_id'] if a['instance_id'] is not None else '-'}  {detail}")


@jobs.command("cancel")
@db_options
@click.argument("job_id", type=click.IntRange(1))
@click.option("--reason", help="Why (kept as the job's cancel_reason).")
def jobs_cancel(dsns, config_path, tenant, as_json, job_id, reason) -> None:
    """Cancel a pending job (and the jobs waiting on it), or ask the runner to stop a running one."""
    dsn = _one_database(dsns, config_path)
    n = _run(dsn, tenant, lambda conn: conn.execute(ops.CANCEL, {"job_id": job_id, "reason": reason}).fetchone()[0])
    if as_json:
        _emit_json({"job_id": job_id, "cancelled": n})
    else:
        click.echo(f"job {job_id}: cancel sent; {n} job(s) cancelled or asked to stop")


@jobs.command("retry")
@db_options
@click.argument("job_id", type=click.IntRange(1))
@click.option("--no-dependents", is_flag=True, help="Only this job, not the jobs cancelled because of it.")
@click.option("--run-after", help="Not before this time (a PostgreSQL timestamptz, say '2026-12-01 18:00+00').")
def jobs_retry(dsns, config_path, tenant, as_json, job_id, no_dependents, run_after) -> None:
    """Return a failed or cancelled job (and by default the jobs cancelled because of it) to pending."""
    dsn = _one_database(dsns, config_path)
    n = _run(dsn, tenant, lambda conn: conn.execute(ops.RETRY, {
        "job_id": job_id, "run_after": run_after, "with_dependents": not no_dependents}).fetchone()[0])
    if as_json:
        _emit_json({"job_id": job_id, "pending_again": n})
    else:
        click.echo(f"job {job_id}: retried; {n} job(s) pending again")


# jobs enqueue: each option, the parameter of broker_add_job it sets (sql/enqueue/add_job.sql) and its SQL type;
# an option not given is left out of the call, so the function's own default applies (p_search_path: the caller's)
_ENQUEUE_PARAMS = {"queue": ("p_job_queue", "integer"), "priority": ("p_job_priority", "integer"),
                   "language": ("p_job_language", "text"), "run_as": ("p_run_as", "text"),
                   "depends_on": ("p_depends_on_job_ids", "bigint[]"), "idempotency_key": ("p_idempotency_key", "text"),
                   "max_attempts": ("p_max_attempts", "integer"), "group": ("p_job_group", "text"),
                   "depends_on_group": ("p_depends_on_groups", "text[]"), "run_after": ("p_run_after", "timestamptz"),
                   "timeout": ("p_timeout", "interval"), "search_path": ("p_search_path", "text"),
                   "tenant": ("p_tenant_id", "text"), "autonomous": ("p_autonomous", "boolean"),
                   "concurrency_key": ("p_concurrency_key", "text")}


def enqueue_statement(given: dict, function: str = "broker_add_job", params: dict = _ENQUEUE_PARAMS,
                      leading: sql.Composable = sql.SQL("{}, {}").format(sql.Placeholder("name"), sql.Placeholder("sql"))
                      ) -> sql.Composed:
    """SELECT job_id, is_new FROM broker.<function>(<leading>, <the given options by name>): each option as
    `params` names its parameter and SQL type."""
    named = [sql.SQL(", {} => {}::{}").format(sql.Identifier(params[k][0]), sql.Placeholder(k), sql.SQL(params[k][1]))
             for k in given]
    return sql.SQL("SELECT job_id, is_new FROM broker.{}({}{})").format(sql.Identifier(function), leading,
                                                                         sql.SQL("").join(named))


# the trace context an enqueued job joins (observe/tracing.py): the option, $TRACEPARENT (OpenTelemetry's carrier
# for a process's environment), else the current span's when OpenTelemetry is installed
_TRACEPARENT = click.option("--traceparent", envvar="TRACEPARENT", metavar="TRACEPARENT",
                            help="W3C trace context the job joins, 00-<trace id>-<span id>-<flags> (default: "
                                 "$TRACEPARENT, else the current span's when OpenTelemetry is installed).")


def _traced(traceparent: str | None, work):
    """work(conn), after setting broker.traceparent for the transaction when there is a trace context."""
    traceparent = traceparent or tracing.current_traceparent()

    def traced(conn):
        if traceparent:
            conn.execute(tracing.SET_TRACEPARENT, {"traceparent": traceparent})
        return work(conn)
    return traced


@jobs.command("enqueue")
@db_options
@click.argument("sql_text", metavar="SQL")
@click.option("--name", required=True, help="The job's name (p_job_name).")
@click.option("--queue", type=int, help="Queue, 1 to 1000 (default 1).")
@click.option("--priority", type=int, help="Higher runs first (default 0).")
@click.option("--language", type=click.Choice(["sql", "plpgsql"], case_sensitive=False),
              help="sql (default), or plpgsql: a PL/pgSQL block body.")
@click.option("--run-as", help="Role the job runs as: you, or a role you are a member of (default: you).")
@click.option("--depends-on", type=click.IntRange(1), multiple=True, metavar="JOB_ID",
              help="Wait for this job (repeatable).")
@click.option("--depends-on-group", multiple=True, metavar="GROUP",
              help="Wait for every unfinished job of this group (repeatable).")
@click.option("--group", help="The job's group (default: its name).")
@click.option("--idempotency-key", help="An unfinished job of your tenant with this key is returned instead.")
@click.option("--max-attempts", type=int, help="Attempts before it fails for good (default 1).")
@click.option("--run-after", metavar="TIMESTAMPTZ", help="Not before this time, like '2026-12-01 18:00+00'.")
@click.option("--timeout", metavar="INTERVAL", help="statement_timeout of the job, like '10 minutes'.")
@click.option("--search-path", help="search_path the job runs with (default: the login's).")
@click.option("--autonomous", is_flag=True, default=None,
              help="Run outside a transaction block (VACUUM, ... CONCURRENTLY, a CALL that commits): at least once.")
@click.option("--concurrency-key", help="The key whose limits the job counts against (broker_set_limit).")
@_TRACEPARENT
def jobs_enqueue(dsns, config_path, tenant, as_json, sql_text, name, traceparent, **options) -> None:
    """Enqueue SQL (or '-': read it from standard input) as a job through broker_add_job, for --tenant or the
    login's tenant; prints the job's id and whether it is new (an idempotency key may return an unfinished one)."""
    dsn = _one_database(dsns, config_path)
    if sql_text == "-":
        sql_text = click.get_text_stream("stdin").read()
    given = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dict(options, tenant=tenant).items()
             if v is not None and v != ()}
    job_id, is_new = _run(dsn, None, _traced(traceparent, lambda conn: conn.execute(
        enqueue_statement(given), {"name": name, "sql": sql_text, **given}).fetchone()))
    if as_json:
        _emit_json({"job_id": job_id, "is_new": is_new})
    else:
        click.echo(f"job {job_id} enqueued" if is_new else
                   f"job {job_id}: an unfinished job with this idempotency key exists; not enqueued again")


# jobs enqueue-task: broker_add_task's options (sql/tasks/add_task.sql), as for enqueue
_TASK_PARAMS = {"priority": ("p_priority", "integer"), "depends_on": ("p_depends_on_job_ids", "bigint[]"),
                "idempotency_key": ("p_idempotency_key", "text"), "max_attempts": ("p_max_attempts", "integer"),
                "group": ("p_job_group", "text"), "depends_on_group": ("p_depends_on_groups", "text[]"),
                "run_after": ("p_run_after", "timestamptz"), "timeout": ("p_timeout", "interval"),
                "tenant": ("p_tenant_id", "text"), "concurrency_key": ("p_concurrency_key", "text")}


@jobs.command("enqueue-task")
@db_options
@click.argument("task")
@click.argument("args_json", metavar="ARGS", default="{}")
@click.option("--priority", type=int, help="Higher runs first among the tenant's tasks of this name (default 0).")
@click.option("--depends-on", type=click.IntRange(1), multiple=True, metavar="JOB_ID", help="Wait for this job (repeatable).")
@click.option("--depends-on-group", multiple=True, metavar="GROUP", help="Wait for every unfinished job of this group (repeatable).")
@click.option("--group", help="The task's group (default: its name).")
@click.option("--idempotency-key", help="An unfinished job of your tenant with this key is returned instead.")
@click.option("--max-attempts", type=int, help="Attempts before it fails for good (default 1).")
@click.option("--run-after", metavar="TIMESTAMPTZ", help="Not before this time, like '2026-12-01 18:00+00'.")
@click.option("--timeout", metavar="INTERVAL", help="How long its handler may run, like '10 minutes'.")
@click.option("--concurrency-key", help="The key whose limits the task counts against (broker_set_limit).")
@_TRACEPARENT
def jobs_enqueue_task(dsns, config_path, tenant, as_json, task, args_json, traceparent, **options) -> None:
    """Enqueue task TASK (run by application code, docs/tasks.md) with JSON arguments ARGS (default {}; '-': read
    them from standard input) through broker_add_task; prints its id and whether it is new."""
    dsn = _one_database(dsns, config_path)
    if args_json == "-":
        args_json = click.get_text_stream("stdin").read()
    try:
        json.loads(args_json)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="ARGS") from None
    given = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dict(options, tenant=tenant).items()
             if v is not None and v != ()}
    statement = enqueue_statement(given, "broker_add_task", _TASK_PARAMS,
                                  sql.SQL("{}, {}::jsonb").format(sql.Placeholder("task"), sql.Placeholder("args")))
    job_id, is_new = _run(dsn, None, _traced(traceparent, lambda conn: conn.execute(
        statement, {"task": task, "args": args_json, **given}).fetchone()))
    if as_json:
        _emit_json({"job_id": job_id, "is_new": is_new})
    else:
        click.echo(f"task {job_id} enqueued" if is_new else
                   f"task {job_id}: an unfinished job with this idempotency key exists; not enqueued again")


@click.group("queues")
def queues() -> None:
    """Pause and resume queues, and task names."""


def _pause(dsns, config_path, tenant, as_json, queue, task, paused: bool) -> None:
    if (queue is None) == (task is None):
        raise click.UsageError("give a QUEUE (1 to 1000) or --task NAME, not both")
    dsn = _one_database(dsns, config_path)
    if task is None:
        what, statement, params = f"queue {queue}", ops.PAUSE, {"queue": queue, "paused": paused}
    else:
        what, statement, params = f"task {task}", ops.PAUSE_TASK, {"task": task, "paused": paused}
    changed = _run(dsn, tenant, lambda conn: conn.execute(statement, params).fetchone()[0])
    if as_json:
        _emit_json({"queue": queue, "paused": paused, "changed": changed} if task is None
                   else {"task": task, "paused": paused, "changed": changed})
    else:
        click.echo(f"{what}: {'paused' if paused else 'resumed'}" + ("" if changed else " (no change)"))


_TASK_OPTION = click.option("--task", metavar="NAME", help="A task name instead of a queue (broker_pause_task).")


@queues.command("pause")
@db_options
@click.argument("queue", type=click.IntRange(1, 1000), required=False)
@_TASK_OPTION
def queues_pause(dsns, config_path, tenant, as_json, queue, task) -> None:
    """Claims skip QUEUE, or the tasks named by --task (running ones finish): the tenant's, or every tenant's for an
    administrator."""
    _pause(dsns, config_path, tenant, as_json, queue, task, True)


@queues.command("resume")
@db_options
@click.argument("queue", type=click.IntRange(1, 1000), required=False)
@_TASK_OPTION
def queues_resume(dsns, config_path, tenant, as_json, queue, task) -> None:
    """Lift the pause of QUEUE or of --task NAME (the tenant's own; an administrator's lifts every pause of it)."""
    _pause(dsns, config_path, tenant, as_json, queue, task, False)


@click.command("purge")
@db_options
@click.option("--older-than", required=True, help="Finished longer ago than this PostgreSQL interval ('7 days', '12h').")
@click.option("--state", type=click.Choice(["completed", "failed", "cancelled"], case_sensitive=False),
              help="Only this final state (default: every one).")
@click.option("--batch-size", type=click.IntRange(1, 100000), default=10000, show_default=True,
              help="Jobs per transaction.")
def purge(dsns, config_path, tenant, as_json, older_than, state, batch_size) -> None:
    """Delete finished jobs (with their edges, attempts and actions) older than --older-than, in batches
    (broker_purge_jobs: broker_admin or a superuser)."""
    dsn = _one_database(dsns, config_path)
    params = {"older_than": older_than, "batch": batch_size, "state": int(JobState.parse(state)) if state else None}
    total = 0
    while True:
        n = _run(dsn, tenant, lambda conn: conn.execute(ops.PURGE, params).fetchone()[0])
        total += n
        if n < batch_size:
            break
    if as_json:
        _emit_json({"purged": total})
    else:
        click.echo(f"purged {total} finished job(s)")


def register(main: click.Group) -> None:
    for command in (jobs, queues, purge):
        main.add_command(command)
