"""Carry pg_cron's jobs over as broker schedules (pgsql-broker import pg-cron, issue 35; docs/from-pg-cron.md).

Reads cron.job (pg_cron 1.3 or later: jobname and active) where pg_cron lives, and in the broker's database calls
broker.broker_add_schedule once per job that can be carried over, each behind a savepoint, all in one transaction
that a dry run rolls back: the plan is what the extension itself accepted or refused. A schedule of the same name
that exists already is compared, never changed, so that a second run changes nothing.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import psycopg

READ_SOURCE = """
SELECT to_regclass('cron.job') IS NOT NULL AS has_jobs,
       to_regclass('cron.job_run_details') IS NOT NULL AS has_runs,
       current_setting('cron.timezone', true) AS time_zone,
       current_setting('port') AS port,
       current_user AS login,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser
"""
HAS_COLUMNS = """
SELECT count(*) = 2 FROM pg_attribute
 WHERE attrelid = 'cron.job'::regclass AND attname IN ('jobname', 'active') AND NOT attisdropped
"""
# pg_cron shows a login only its own jobs (a policy on username) unless it is a superuser
READ_JOBS = """
SELECT j.jobid, j.jobname::text, j.schedule, j.command, j.nodename, j.nodeport, j.database, j.username::text,
       j.active, {last_run} AS last_run
  FROM cron.job AS j
 ORDER BY j.jobid
"""
LAST_RUN = """(SELECT d.status || ' ' || to_char(d.start_time AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC'
                 FROM cron.job_run_details AS d WHERE d.jobid = j.jobid ORDER BY d.runid DESC LIMIT 1)"""
EXISTING = """
SELECT cron_expr, execute_str, time_zone, run_as::text, enabled
  FROM broker.broker_schedule WHERE schedule_name = %(name)s AND tenant_id = broker.broker_current_tenant()
"""
ADD = """
SELECT schedule_id FROM broker.broker_add_schedule(%(name)s, %(cron)s, %(command)s, p_time_zone => %(zone)s,
       p_run_as => %(run_as)s, p_enabled => %(enabled)s, p_catch_up => 'none', p_autonomous => %(autonomous)s)
"""
# pg_cron 1.5's interval syntax ('30 seconds'), and a fire at the server's start
_SECONDS = re.compile(r"^\s*\d+\s+seconds?\s*$", re.IGNORECASE)
_LOCAL_NODES = ("", "localhost", "127.0.0.1", "::1")
_NEVER_IN_TRANSACTION = "0A000"  # broker_add_schedule: SQL that can never run in a transaction (VACUUM, ...)


class CannotImport(Exception):
    """What stops the whole import (no cron.job, an old pg_cron): one line for the command line."""


@dataclass
class CronJob:
    jobid: int
    jobname: str | None
    schedule: str
    command: str
    nodename: str
    nodeport: int
    database: str
    username: str
    active: bool
    last_run: str | None


@dataclass
class Step:
    """One pg_cron job's fate: create (created with --apply), unchanged (imported before), skip (with why)."""
    jobid: int
    jobname: str | None
    schedule_name: str
    action: str
    reason: str
    cron_expr: str
    time_zone: str
    run_as: str
    enabled: bool
    autonomous: bool = False
    last_run: str | None = None

    def line(self) -> str:
        label = f"pg_cron job {self.jobid} " + (f"{self.jobname!r}" if self.jobname else "(unnamed)")
        what = (f"{self.cron_expr!r} in {self.time_zone}, run as {self.run_as}, "
                f"{'enabled' if self.enabled else 'disabled'}" + (", autonomous" if self.autonomous else ""))
        last = f"; last run {self.last_run}" if self.last_run else ""
        if self.action == "skip":
            return f"{label}: skip: {self.reason}{last}"
        return f"{label} -> schedule {self.schedule_name!r}: {self.action} ({what}){last}" + (
            f"; {self.reason}" if self.reason else "")

    def as_dict(self) -> dict:
        return asdict(self)


def read_cron_jobs(conn: psycopg.Connection) -> tuple[list[CronJob], dict]:
    """pg_cron's jobs as this login sees them, and facts of its server (time zone, port, login, superuser)."""
    source = conn.execute(READ_SOURCE).fetchone()
    facts = dict(zip(("has_jobs", "has_runs", "time_zone", "port", "login", "superuser"), source))
    if not facts["has_jobs"]:
        raise CannotImport(f"database {conn.info.dbname} has no table cron.job: name pg_cron's database with "
                           "--cron-dsn (its cron.database_name, usually postgres)")
    if not conn.execute(HAS_COLUMNS).fetchone()[0]:
        raise CannotImport("cron.job has no columns jobname and active: pg_cron 1.3 or later is needed "
                           "(ALTER EXTENSION pg_cron UPDATE)")
    rows = conn.execute(READ_JOBS.format(last_run=LAST_RUN if facts["has_runs"] else "NULL::text")).fetchall()
    return [CronJob(*row) for row in rows], facts


def schedule_names(jobs: list[CronJob]) -> dict[int, str]:
    """A stable schedule name per job: its jobname; pg_cron-<jobid> for an unnamed one; <jobname>@<username> when
    several logins' jobs share a jobname (pg_cron's names are unique per username, the broker's per tenant)."""
    owners: dict[str, set[str]] = {}
    for job in jobs:
        if job.jobname:
            owners.setdefault(job.jobname, set()).add(job.username)
    return {job.jobid: (f"pg_cron-{job.jobid}" if not job.jobname else
                        job.jobname if len(owners[job.jobname]) == 1 else f"{job.jobname}@{job.username}")
            for job in jobs}


def _cannot_carry(job: CronJob, database: str, port: str) -> str | None:
    """Why a job has no broker equivalent here, or None."""
    if job.database != database:
        return f"runs in database {job.database!r}, not {database!r} (import it with --dsn naming that database)"
    if not (job.nodename in _LOCAL_NODES or job.nodename.startswith("/")) or str(job.nodeport) != port:
        return f"runs on another server ({job.nodename}:{job.nodeport}): its broker must import it there"
    if _SECONDS.match(job.schedule):
        return (f"{job.schedule.strip()!r} is pg_cron's interval in seconds; a broker schedule fires at most once "
                "a minute (use '* * * * *', or a job that enqueues the next one with --run-after)")
    if job.schedule.strip().lower() == "@reboot":
        return "'@reboot' (at the server's start) has no broker equivalent"
    return None


def plan_and_apply(conn: psycopg.Connection, jobs: list[CronJob], facts: dict, time_zone: str | None,
                   apply: bool) -> list[Step]:
    """The steps of the import in the broker's database (conn, not in autocommit, its tenant already set);
    commits them with apply, else rolls every change back."""
    database = conn.execute("SELECT current_database()").fetchone()[0]
    zone = time_zone or facts["time_zone"] or "GMT"  # pg_cron without cron.timezone (before 1.5) uses GMT
    names = schedule_names(jobs)
    steps = []
    for job in jobs:
        step = Step(job.jobid, job.jobname, names[job.jobid], "create", "", job.schedule.strip(), zone, job.username,
                    job.active, last_run=job.last_run)
        steps.append(step)
        why = _cannot_carry(job, database, facts["port"])
        if why:
            step.action, step.reason = "skip", why
            continue
        existing = conn.execute(EXISTING, {"name": step.schedule_name}).fetchone()
        if existing is not None:
            if tuple(existing) == (step.cron_expr, job.command, zone, job.username, job.active):
                step.action, step.reason = "unchanged", "imported before"
            else:
                step.action, step.reason = "skip", (f"schedule {step.schedule_name!r} exists with other settings: "
                                                    "left as it is (broker_alter_schedule, or remove it and import again)")
            continue
        _add(conn, step, job.command)
    if apply:
        conn.commit()
    else:
        conn.rollback()
    return steps


def _add(conn: psycopg.Connection, step: Step, command: str) -> None:
    """broker_add_schedule behind a savepoint; SQL that can never run in a transaction is tried again as an
    autonomous schedule (pg_cron runs a VACUUM as it is)."""
    params = {"name": step.schedule_name, "cron": step.cron_expr, "command": command, "zone": step.time_zone,
              "run_as": step.run_as, "enabled": step.enabled, "autonomous": False}
    for autonomous in (False, True):
        try:
            with conn.transaction():
                conn.execute(ADD, dict(params, autonomous=autonomous))
            step.autonomous = autonomous
            return
        except psycopg.Error as exc:
            if exc.sqlstate == _NEVER_IN_TRANSACTION and not autonomous:
                continue
            step.action = "skip"
            step.reason = f"{exc.diag.message_primary or exc} (SQLSTATE {exc.sqlstate})"
            return
