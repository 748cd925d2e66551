"""Autonomous jobs: one statement run outside a transaction block (VACUUM, ANALYZE, CREATE INDEX / REINDEX /
REFRESH MATERIALIZED VIEW CONCURRENTLY, a CALL of a procedure that commits), at least once.

The claim has committed when the worker gets here. broker_autonomous_begin (its own transaction) checks the
enqueuer's rights and the role's arrangement; the text is parsed with pglast (autonomous_sql.check); the job runs
on a connection of its own, opened for it and closed after it, so that nothing else ever runs there:
  * via 'set_role' (maintenance statements only): the runner's login, then SET ROLE run_as;
  * via 'login' (CALL too): a login as run_as with the credentials the operator configured
    (databases[].autonomous_logins), never SET ROLE.
Meanwhile the worker's connection keeps the job's lease alive (no transaction holds its row, so the lease is what
says it is executing); a runner that dies stops renewing it and lease recovery retries the job (the attempt
counts). The outcome is recorded in a transaction of its own (broker_autonomous_end), through the functions every
job's outcome goes through. docs/security.md, "Autonomous jobs", says why this keeps the security model.
"""
from __future__ import annotations

import asyncio
import logging
import time

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ..observe.logs import cap_text
from ..states import JobState
from . import queries, stopping
from .autonomous_sql import Refused, check
from .queries import Claimed, Outcome

log = logging.getLogger("pgsql_broker")
# a backend whose client is gone (the runner killed) notices within this many ms and ends the job's statement
CLIENT_CHECK_MS = 1000
# the runner's own bound on a job's timeout, past its statement_timeout (which the job's own code could change)
TIMEOUT_GRACE_SEC = 5.0


class _Lost(Exception):
    """The job's lease was lost while it ran (it was recovered elsewhere): its statement was cancelled."""


class _Hurried(Exception):
    """A second signal: the job's statement was cancelled, the job is recorded as interrupted."""


def _params(row: Claimed) -> dict:
    return {"job": row.job_id, "token": row.lease_token}


async def _open(runner, via: str, run_as: str) -> psycopg.AsyncConnection:
    """A connection for one job: the runner's login (set_role) or a login as run_as with its configured credentials."""
    options = {"application_name": f"{runner.settings.name}:autonomous", "autocommit": True,
               "options": f"-c client_connection_check_interval={CLIENT_CHECK_MS}"}
    if via == "set_role":
        return await psycopg.AsyncConnection.connect(runner.db.dsn(), **options)
    login = dict(runner.db.autonomous_logins).get(run_as)
    if login is None:
        raise Refused("42501", f"refused: the runner has no login for role {run_as} (databases[].autonomous_logins "
                               f"in its configuration): a CALL runs on a connection that logs in as its role")
    dsn = make_conninfo(runner.db.dsn(user=run_as, password=dict(login).get("password")),
                        **{k: v for k, v in login if k != "password"})
    return await psycopg.AsyncConnection.connect(dsn, **options)


async def _execute(runner, via: str, run_as: str, text: str, search_path: str, tenant: str, queue: int, row: Claimed,
                   lost: asyncio.Event, database: str) -> tuple[str | None, str | None]:
    """Run the job's one statement on a connection of its own; (sqlstate, message) of its error, or (None, None).
    While it runs, the job is in runner._autonomous_running, where a cancel request finds its connection."""
    timeout_ms = row.timeout_ms
    try:
        conn = await _open(runner, via, run_as)
    except psycopg.OperationalError as exc:  # a failed attempt: retried like any other (the server may be back)
        return "08001", cap_text(f"could not connect for the job ({via} {run_as}): " + (str(exc).strip().splitlines() or [""])[0])
    run = None
    try:
        await conn.execute(queries.AUTONOMOUS_SETUP, {"path": ", ".join(p for p in (search_path, "pg_temp") if p),
                                                      "tenant": tenant, "ms": str(timeout_ms or 0)})
        if via == "set_role":
            await conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(run_as)))
        user, session_user, connected_to, superuser = await (await conn.execute(queries.AUTONOMOUS_WHO)).fetchone()
        if user != run_as or (via == "login" and session_user != run_as) or superuser == "on" \
                or connected_to != database:
            raise Refused("42501", f"refused: the job's connection is {session_user} as {user} in {connected_to}, "
                                   f"not {run_as} in {database} (check autonomous_logins)")
        # extended protocol (binary=True): the server takes exactly one statement, whatever the text holds
        runner._autonomous_running[row.job_id] = (queue, conn)
        run = asyncio.ensure_future(conn.execute(text, binary=True))
        waiters = {run, asyncio.ensure_future(lost.wait()), asyncio.ensure_future(runner.hurry.wait())}
        limit = timeout_ms / 1000 + TIMEOUT_GRACE_SEC if timeout_ms else None
        try:
            done, _ = await asyncio.wait(waiters, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters - {run}:
                waiter.cancel()
        if run not in done:
            await conn.cancel_safe(timeout=5)
            try:
                await run
            except psycopg.Error:
                pass
            if lost.is_set():
                raise _Lost()
            if runner.hurry.is_set():
                raise _Hurried()
            return "57014", "canceling statement due to the job's timeout (enforced by the runner)"
        run.result()
        return None, None
    except psycopg.Error as exc:
        if isinstance(exc, psycopg.OperationalError) and conn.broken and exc.sqlstate is None:
            return "08006", cap_text(f"the job's connection was lost: {str(exc).strip()}")
        return exc.sqlstate or "XX000", cap_text(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    except asyncio.CancelledError:
        # the stop gave up waiting (shutdown deadline): end the statement, then let the caller record it
        if run is not None:
            run.add_done_callback(lambda f: f.cancelled() or f.exception())  # (its error is the cancel's)
        await asyncio.shield(conn.cancel_safe(timeout=2))
        raise
    finally:
        runner._autonomous_running.pop(row.job_id, None)
        await conn.close()


async def _keep_lease(runner, conn: psycopg.AsyncConnection, row: Claimed, lost: asyncio.Event,
                      done: asyncio.Event) -> None:
    """Extend the job's lease every third of lease_seconds until `done`; set `lost` when it cannot (the lease was
    recovered elsewhere, or the worker's connection failed: then no one keeps it and the job must stop)."""
    every = max(0.5, runner.settings.lease_seconds / 3)
    params = stopping.arrays([row]) | {"lease": runner.settings.lease_seconds}
    while not done.is_set():
        try:
            await asyncio.wait_for(done.wait(), every)
            return
        except asyncio.TimeoutError:
            pass
        try:
            extended = await (await conn.execute(queries.AUTONOMOUS_EXTEND, params)).fetchall()
        except psycopg.Error:
            extended = []
        if not extended:
            lost.set()
            return


async def run(runner, conn: psycopg.AsyncConnection, queue: int, row: Claimed, dirty: bool) -> None:
    """Run one claimed autonomous job (`row`, as the claim returned it) and record its outcome."""
    fields = {"database": runner.db.name, "queue": queue, "job_id": row.job_id, "job_name": row.job_name}
    if dirty:
        await conn.execute(queries.RESET_TRANSACTION)
    runner.view.started(queue, [row])
    try:
        try:
            begun = await (await conn.execute(queries.AUTONOMOUS_BEGIN, _params(row))).fetchone()
        except psycopg.errors.ObjectNotInPrerequisiteState as exc:
            log.warning("job not run: %s", cap_text(str(exc).strip().splitlines()[0]), extra=fields)
            return
        text, run_as, via, search_path, tenant, refused = begun
        if refused is not None:
            runner.view.record_all(queue, [row], [Outcome(row.job_id, JobState.FAILED, row.attempts, "42501", refused, 0.0)])
            return
        started, final = time.perf_counter(), False
        lost, done = asyncio.Event(), asyncio.Event()
        keeper = asyncio.create_task(_keep_lease(runner, conn, row, lost, done))
        try:
            check(text, via)
            sqlstate, message = await _execute(runner, via, run_as, text, search_path, tenant, queue, row, lost,
                                               conn.info.dbname)
        except Refused as exc:
            sqlstate, message, final = exc.sqlstate, str(exc), True
        except _Lost:
            log.warning("job cancelled: its lease was lost while it ran (recovered elsewhere)", extra=fields)
            return
        except _Hurried:
            await _interrupted(runner, conn, row, fields, "second signal")
            return
        except asyncio.CancelledError:
            await asyncio.shield(_interrupted(runner, conn, row, fields, "shutdown deadline passed"))
            raise
        finally:
            done.set()  # (the keeper is never cancelled inside a query: the worker's connection goes on)
            await keeper
        try:
            outcome = await (await conn.cursor(row_factory=queries.OUTCOME_ROW).execute(queries.AUTONOMOUS_END, _params(row) | {
                "sqlstate": sqlstate, "message": message, "seconds": time.perf_counter() - started,
                "final": final})).fetchone()
        except psycopg.errors.ObjectNotInPrerequisiteState as exc:  # recovered meanwhile: that outcome stands
            log.warning("job outcome not recorded: %s", cap_text(str(exc).strip().splitlines()[0]), extra=fields)
            return
        runner.view.record_all(queue, [row], [outcome])
    finally:
        runner.view.ended([row])


async def _interrupted(runner, conn: psycopg.AsyncConnection, row: Claimed, fields: dict, why: str) -> None:
    """The stop ended the job (`why`): pending again, attempt not counted (broker_interrupt_jobs)."""
    try:
        ids = await (await conn.execute(queries.AUTONOMOUS_INTERRUPT, stopping.arrays([row]))).fetchall()
    except psycopg.Error:
        ids = []
    if ids:
        log.warning("job interrupted (%s): back to pending, attempt not counted", why, extra=fields)
    else:
        log.warning("could not record the interruption: its lease will recover it (the attempt counts)", extra=fields)
