"""What an operator reads and does to schedules: the statements of `pgsql-broker schedules` (schedules_cli.py), for
the console's schedules page too. Reads are tenant-scoped by row-level security (the transaction's tenant), actions
go through the public functions and their checks (the schedule's owner, or a member of that role).

Fire times are shown on the schedule's own clock: `*_local` is the wall time in the schedule's time zone and
`*_offset` its offset from UTC then, both computed by the server, whose time zone database evaluates the schedule."""
from __future__ import annotations

from datetime import datetime, timedelta

_ZONED = """{col} AT TIME ZONE s.time_zone AS {name}_local,
       ({col} AT TIME ZONE s.time_zone) - ({col} AT TIME ZONE 'UTC') AS {name}_offset"""

_SCHEDULE_COLUMNS = f"""s.schedule_id, s.tenant_id, s.schedule_name, s.cron_expr, s.time_zone, s.enabled,
       s.next_fire_at, {_ZONED.format(col='s.next_fire_at', name='next')},
       s.last_fire_at, {_ZONED.format(col='s.last_fire_at', name='last')},
       s.last_job_id, s.skipped_fires, s.skipped_fires_capped, s.last_error"""

# The transaction's tenant's schedules, by name.
SCHEDULES = f"""SELECT {_SCHEDULE_COLUMNS}
  FROM broker.broker_schedule AS s
 ORDER BY s.schedule_name
 LIMIT %(limit)s"""

# One schedule with its job template, and the state of its last job.
SCHEDULE = f"""SELECT {_SCHEDULE_COLUMNS}, s.execute_str, s.job_language, s.job_queue, s.job_priority, s.run_as,
       s.max_attempts, coalesce(s.job_group, s.schedule_name) AS job_group, s.job_timeout::text AS job_timeout,
       s.job_search_path, s.catch_up, s.catch_up_max, s.overlap, s.autonomous, s.concurrency_key, s.created_by,
       s.created_at, (SELECT j.complete_status FROM broker.broker_jobs AS j WHERE j.job_id = s.last_job_id) AS last_job_status,
       (SELECT q.task_name FROM broker.broker_task_queue AS q WHERE q.job_queue = s.job_queue) AS task
  FROM broker.broker_schedule AS s
 WHERE s.schedule_name = %(name)s"""

# A schedule's newest jobs, newest first: `fired` by the tick (its key names the fire time), else enqueued by hand
# (broker_run_schedule_now, or broker_add_job with p_schedule_id).
SCHEDULE_JOBS = """SELECT j.job_id, j.complete_status, j.created_at, j.finished_at, j.enqueued_by,
       coalesce(starts_with(j.idempotency_key, 'broker_schedule:'), false) AS fired
  FROM broker.broker_jobs AS j
 WHERE j.schedule_id = %(schedule_id)s
 ORDER BY j.job_id DESC
 LIMIT %(limit)s"""

ENABLED = "SELECT s.enabled FROM broker.broker_schedule AS s WHERE s.schedule_name = %(name)s"
ENABLE = "SELECT broker.broker_enable_schedule(%(name)s, %(enabled)s) AS next_fire_at"
RUN_NOW = "SELECT r.job_id, r.is_new FROM broker.broker_run_schedule_now(%(name)s) AS r"


def zoned(local: datetime | None, offset: timedelta | None) -> str:
    """A fire time as its wall time in the schedule's zone and the UTC offset then: 2027-03-14 03:00 +01:00."""
    if local is None:
        return "-"
    minutes = int(offset.total_seconds()) // 60 if offset is not None else 0
    sign = "-" if minutes < 0 else "+"
    return f"{local:%Y-%m-%d %H:%M} {sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
