"""What an operator reads and does to jobs, queues and instances: the statements of the console
(observe/console.py) and of `pgsql-broker jobs` / `queues` (jobs_cli.py), one of each. Reads are tenant-scoped by
row-level security (the login's own tenants, unless it reads every tenant), actions go through the public
functions and their checks."""
from __future__ import annotations

SET_TENANT = "SELECT broker.broker_set_tenant(%(tenant)s)"

_JOB_COLUMNS = """j.job_id, j.tenant_id, j.job_name, j.job_group, j.job_queue, j.job_priority, j.complete_status,
       j.pending_deps, j.run_after, j.attempts, j.max_attempts, j.created_at, j.started_at, j.finished_at,
       j.last_error_sqlstate"""
# Filters (NULL: any): state, queue, tenant, name (a substring, any case), name_like (a LIKE pattern), finished_within
# (finished in the last ...), before (ids below it: the next page); newest first. `note`: why it was cancelled, else its last error.
# (length(job_group) > 0 is always true (its CHECK): with a state of an unfinished job it lets the planner read the
# index that holds those alone, broker_jobs_group_idx, whose predicate it implies (see broker_queue_stats).)
_JOBS_MATCH = """length(j.job_group) > 0
   AND (%(state)s::smallint IS NULL OR j.complete_status = %(state)s::smallint)
   AND (%(queue)s::integer IS NULL OR j.job_queue = %(queue)s::integer)
   AND (%(tenant)s::text IS NULL OR j.tenant_id = %(tenant)s::text)
   AND (%(name)s::text IS NULL OR strpos(lower(j.job_name), lower(%(name)s::text)) > 0)
   AND (%(name_like)s::text IS NULL OR j.job_name LIKE %(name_like)s::text)"""
_JOBS_FROM = "broker.broker_jobs AS j"
# finished_within: the finished jobs of the window, a state at a time through broker_jobs_finished_idx (with the three
# states in one condition, or an OR that PostgreSQL 18 makes one, the planner drops it as the index's own predicate and
# reads the whole index for the finish times): never the history before the window.
_JOBS_FROM_WINDOW = """pg_catalog.unnest('{2,3,4}'::smallint[]) AS st(state)
  JOIN broker.broker_jobs AS j
    ON j.complete_status IN (2, 3, 4) AND j.complete_status = st.state
   AND j.finished_at >= statement_timestamp() - %(finished_within)s::interval"""


def _jobs(source: str) -> str:
    return f"""SELECT {_JOB_COLUMNS}, left(j.last_error_message, 300) AS last_error_message,
       left(coalesce(j.cancel_reason, j.last_error_message), 300) AS note
  FROM {source}
 WHERE {_JOBS_MATCH}
   AND (%(before)s::bigint IS NULL OR j.job_id < %(before)s::bigint)
 ORDER BY j.job_id DESC
 LIMIT %(limit)s"""


# How many jobs the filters match, counted up to %(cap)s (a count of every job would read the whole table: the
# console says "10,000+" past the cap).
def _count(source: str) -> str:
    return f"""SELECT count(*) AS n FROM (SELECT FROM {source} WHERE {_JOBS_MATCH} LIMIT %(cap)s) AS x"""


JOBS, JOBS_COUNT = _jobs(_JOBS_FROM), _count(_JOBS_FROM)
JOBS_WINDOW, JOBS_WINDOW_COUNT = _jobs(_JOBS_FROM_WINDOW), _count(_JOBS_FROM_WINDOW)


def jobs_statements(finished_within) -> tuple[str, str]:
    """The page and the count of the job list, for filters with or without finished_within."""
    return (JOBS, JOBS_COUNT) if finished_within is None else (JOBS_WINDOW, JOBS_WINDOW_COUNT)


JOB = f"""SELECT {_JOB_COLUMNS}, j.last_error_message, j.job_language, j.run_as, j.enqueued_by, j.schedule_id,
       j.job_timeout::text AS job_timeout, j.cancel_reason, j.cancel_cause_job_id, j.interruptions, j.lease_instance_id,
       j.lease_expires_at, j.concurrency_key, broker.broker_job_waiting(j.job_id) AS waiting,
       CASE WHEN %(with_sql)s THEN left(j.execute_str, 100000) END AS execute_str,
       length(j.execute_str) > 100000 AS execute_str_cut
  FROM broker.broker_jobs AS j
 WHERE j.job_id = %(job_id)s"""
# A job's attempts, newest first (at most 100), and its dependencies both ways.
ATTEMPTS = """SELECT a.attempt, a.instance_id, a.started_at, a.finished_at, a.outcome, a.error_sqlstate, a.error_message,
       a.command_status, a.rows_affected, a.output
  FROM broker.broker_job_attempts AS a
 WHERE a.job_id = %(job_id)s
 ORDER BY a.attempt_id DESC
 LIMIT 100"""
# Operators' actions on a job (cancel requests of a running job, retries), newest first (at most 100).
JOB_ACTIONS = """SELECT a.requested_at, a.action, a.requested_by, a.reason
  FROM broker.broker_job_actions AS a
 WHERE a.job_id = %(job_id)s
 ORDER BY a.action_id DESC
 LIMIT 100"""
WAITS_ON = """SELECT d.depends_on_job_id AS job_id, d.depends_on_group AS job_group, t.job_name, t.complete_status
  FROM broker.broker_job_dependency AS d
  LEFT JOIN broker.broker_jobs AS t ON t.job_id = d.depends_on_job_id
 WHERE d.job_id = %(job_id)s
 ORDER BY d.dependency_id
 LIMIT 100"""
WAITED_ON_BY = """SELECT j.job_id, j.job_name, j.complete_status, d.depends_on_group
  FROM broker.broker_job_dependency AS d
  JOIN broker.broker_jobs AS j ON j.job_id = d.job_id
 WHERE d.depends_on_job_id = %(job_id)s
    OR (d.depends_on_group = %(job_group)s AND d.tenant_id = %(tenant_id)s AND d.job_id <> %(job_id)s)
 ORDER BY j.job_id
 LIMIT 100"""
QUEUES = "SELECT * FROM broker.broker_queue_stats() LIMIT 1000"
# the charts: jobs finished per minute, queue, tenant and state over the last three hours (every tenant's)
FINISHED_PER_MINUTE = """SELECT finished_minute, job_queue, tenant_id, complete_status, jobs
                           FROM broker.broker_finished_per_minute(interval '3 hours') LIMIT 20000"""
NOW_MINUTE = "SELECT date_bin('1 minute', statement_timestamp(), '2000-01-01 00:00:00+00') AS m"   # (the charts' right edge)
# each tenant's part of its queues and each key's limit and use (observe/flow.py), as the runner's login reads them
TENANT_STATS = """SELECT job_queue, tenant_id, weight, ready, running, served, share_served
                    FROM broker.broker_tenant_stats(interval '1 minute') LIMIT 1000"""
KEY_STATS = """SELECT concurrency_key, tenant_id, running, max_running, per_second, burst, waiting
                 FROM broker.broker_key_stats() LIMIT 1000"""
INSTANCES = """SELECT instance_id, instance_name, hostname, os_pid, status, started_at, last_ping_at, queue_count
  FROM broker.broker_queueinstance ORDER BY instance_id DESC LIMIT 10"""
CANCEL = "SELECT broker.broker_cancel_job(%(job_id)s, %(reason)s) AS result"
RETRY = "SELECT broker.broker_retry_job(%(job_id)s, %(run_after)s::timestamptz, %(with_dependents)s) AS result"
# A retry with its reason (what broker_retry_job writes, and a reason its history shows): the row the policies
# check and the trigger broker._job_action performs, with the jobs cancelled because of it.
JOB_ACTION_RETRY = """INSERT INTO broker.broker_job_actions (job_id, action, reason, with_dependents)
                      VALUES (%(job_id)s, 'retry', %(reason)s, true)"""
RETRY_COUNT = "SELECT pg_catalog.current_setting('broker.last_retry_count')::integer AS result"   # (after the retry)
PAUSE = "SELECT broker.broker_pause_queue(%(queue)s, %(paused)s) AS result"
PAUSE_TASK = "SELECT broker.broker_pause_task(%(task)s, %(paused)s) AS result"
PURGE = "SELECT broker.broker_purge_jobs(%(older_than)s::interval, %(batch)s, %(state)s::smallint) AS result"

# A job's workflow, a step at a time from each job (observe/console.py graph): what it waits on (a job, or a group),
# and what waits on it (by its id, or by its group). Each an index lookup; as the console login reads them.
GRAPH_NODE = """SELECT j.job_id, j.job_name, j.job_group, j.tenant_id, j.complete_status, j.pending_deps
  FROM broker.broker_jobs AS j WHERE j.job_id = %(job_id)s"""
GRAPH_UP = """SELECT d.depends_on_job_id AS job_id, d.depends_on_group AS job_group
  FROM broker.broker_job_dependency AS d WHERE d.job_id = %(job_id)s ORDER BY d.dependency_id LIMIT 40"""
GRAPH_DOWN = """(SELECT d.job_id, NULL::text AS job_group FROM broker.broker_job_dependency AS d
                  WHERE d.depends_on_job_id = %(job_id)s ORDER BY d.job_id LIMIT 40)
                UNION ALL
                (SELECT d.job_id, d.depends_on_group FROM broker.broker_job_dependency AS d
                  WHERE d.tenant_id = %(tenant_id)s AND d.depends_on_group = %(job_group)s ORDER BY d.job_id LIMIT 40)"""
