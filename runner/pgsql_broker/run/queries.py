"""Every SQL statement the runner sends, by name, and the rows of the ones the runner reads by field name
(`row.job_id`, not `row[0]`). The decisions are all in the extension."""
from __future__ import annotations

from typing import NamedTuple

import psycopg

from ..observe import job_queries


class Claimed(NamedTuple):
    """A job broker_claim_batches claimed for this worker (CLAIM), with the transaction it may share."""
    job_id: int
    job_name: str
    job_queue: int
    tenant_id: str
    attempts: int
    max_attempts: int
    timeout_ms: int | None  # the job's statement_timeout
    lease_token: str
    autonomous: bool  # it runs outside a transaction, alone, on a connection of its own (run/autonomous.py)
    alone: bool  # it runs in a transaction of its own
    batch_no: int  # consecutive jobs with the same number may share a transaction
    traceparent: str | None  # the enqueuer's trace context, the parent of the attempt's span (observe/tracing.py)


class Outcome(NamedTuple):
    """What broker_run_batch reports of one job it took up (RUN_BATCH); status None: not run (lease lost)."""
    job_id: int
    status: int | None  # a JobState
    attempts: int | None
    error_sqlstate: str | None
    error_message: str | None
    seconds: float | None
    rows: int | None = None  # a completed job's last statement's row count


class Recovered(NamedTuple):
    """A job whose lease expired, put back to pending or failed for good (RECOVER)."""
    job_id: int
    status: int


class Tick(NamedTuple):
    """The result of broker_schedule_tick (SCHEDULE_TICK)."""
    jobs_enqueued: int
    next_fire_at: object  # datetime or None
    seconds_until_next: float | None


def rows_of(cls):
    """A psycopg row factory making `cls` rows: the result's column names are checked once per result, then
    each row is made from its values by position (as cheap as a tuple on the hot path)."""
    def factory(cursor):
        names = tuple(c.name for c in cursor.description or ())
        if names == cls._fields:
            return cls._make

        def mismatch(values):  # (a message's other results, BEGIN or the reset, are never read)
            raise psycopg.ProgrammingError(f"{cls.__name__} expects columns {cls._fields}, the result has {names}")
        return mismatch
    return factory


CLAIMED_ROW, OUTCOME_ROW, RECOVERED_ROW, TICK_ROW = rows_of(Claimed), rows_of(Outcome), rows_of(Recovered), rows_of(Tick)


CHANNEL, SCHEDULE_CHANNEL = "pgsql_broker", "pgsql_broker_schedule"  # the extension's NOTIFY channels
LISTEN = "LISTEN " + CHANNEL
MAY_RUN_JOBS = ("SELECT pg_catalog.has_function_privilege("
                "'broker.broker_run_batch(bigint[], uuid[], interval)', 'EXECUTE')")
# the server ends the session connection when the runner falls silent this long (its timers speak every second)
IDLE_SESSION_TIMEOUT = "SELECT pg_catalog.set_config('idle_session_timeout', %(ms)s::text, false)"
NO_IDLE_SESSION_TIMEOUT = "SET idle_session_timeout = 0"
LISTEN_SCHEDULES = "LISTEN " + SCHEDULE_CHANNEL
REGISTER = "SELECT broker.broker_register_instance(%(name)s, %(host)s, %(pid)s, %(queues)s, %(version)s)"
PING = "SELECT broker.broker_ping_instance(%(instance)s)"
SHUTDOWN = "SELECT broker.broker_shutdown_instance(%(instance)s)"
PARK = "SELECT broker.broker_park_instance(%(instance)s)"
RESUME = "SELECT broker.broker_resume_instance(%(instance)s)"
# A standby ends a lock holder whose instance stopped pinging (allowed for a backend of its own role).
EVICT_STALE_HOLDER = """SELECT pid, pg_catalog.pg_terminate_backend(pid, 5000)
                          FROM broker.broker_stale_instance_holder(%(stale)s::interval) AS pid WHERE pid IS NOT NULL"""
CLAIM = """SELECT job_id, job_name, job_queue, tenant_id, attempts, max_attempts,
                  (extract(epoch FROM job_timeout) * 1000)::bigint AS timeout_ms, lease_token::text, autonomous,
                  alone, batch_no, traceparent
             FROM broker.broker_claim_batches(%(queue)s, %(instance)s, %(lease)s, %(batch)s, %(budget)s::interval,
                                              %(alone)s, p_lease_token => %(token)s::uuid)"""
# The claim as it is sent: its commit does not wait for its WAL to be flushed (SET LOCAL, in the same message: one
# implicit transaction, so the session's own setting, under which the jobs run and commit, is untouched). A claim
# lost with a server crash leaves its jobs pending as before it, and none of them ran: a job's run commits later
# and flushes the WAL before it, the claim's included. The flush was a third of a claim's round trip.
CLAIM_RELAXED = "SET LOCAL synchronous_commit = off; " + CLAIM
# a claim whose answer was lost, by the lease token the runner chose for it
RELEASE_CLAIM = "SELECT job_id FROM broker.broker_release_claim(%(token)s::uuid)"
JOB_TIMEOUT = "SELECT set_config('statement_timeout', %(ms)s, true)"
RUN_BATCH = """SELECT job_id, complete_status AS status, attempts, error_sqlstate, error_message,
                      extract(epoch FROM duration)::float8 AS seconds, rows_affected AS rows
                 FROM broker.broker_run_batch(%(jobs)s::bigint[], %(tokens)s::uuid[], %(budget)s::interval)"""
# Once broker_run_batch returned, the transaction is read-only: should anything of a job still run at COMMIT
# (broker_run_batch refuses jobs that leave code for it), it runs as this login and must not write.
READ_ONLY = "SET LOCAL transaction_read_only = on"
# One round trip for a transaction of jobs, bound client-side (several statements, simple protocol),
# COMMIT included.
RUN_TRANSACTION = "BEGIN; " + RUN_BATCH + "; " + READ_ONLY + "; COMMIT"
RUN_TRANSACTION_TIMEOUT = "BEGIN; " + JOB_TIMEOUT + "; " + RUN_BATCH + "; " + READ_ONLY + "; COMMIT"
# Several jobs under the batch budget: statement_timeout armed for broker_run_batch's statement (a statement of
# its own before it: a timeout set inside a running statement is not armed), p_budget the same value.
RUN_TRANSACTION_BUDGET = ("BEGIN; SELECT set_config('statement_timeout', %(budget_ms)s, true); " + RUN_BATCH + "; "
                          + READ_ONLY + "; COMMIT")
# Claimed jobs this worker will not run (its connection was lost before it ran them) go back to pending.
# Cancelling running jobs (cancelling.py): which of ours have a cancel request, then the worker backend's statement.
CANCEL_REQUESTS = "SELECT job_id FROM broker.broker_cancel_requests(%(jobs)s::bigint[])"
CANCEL_BACKEND = "SELECT pg_catalog.pg_cancel_backend(%(pid)s)"
RELEASE = "SELECT job_id FROM broker.broker_release_jobs(%(jobs)s::bigint[], %(tokens)s::uuid[])"
# jobs of a transaction whose session died: each runs alone from now on
RELEASE_ALONE = "SELECT job_id FROM broker.broker_release_jobs(%(jobs)s::bigint[], %(tokens)s::uuid[], true)"
# whether a backend (a lost connection's) has ended: until then its transaction holds its rows
BACKEND_GONE = "SELECT NOT EXISTS (SELECT FROM pg_catalog.pg_stat_activity WHERE pid = %(pid)s)"
# The stop (stopping.py): end the session executing jobs past the deadline, waiting for its backend to exit, then
# record in a transaction of its own that their runs were interrupted (bounded wait for their row locks).
TERMINATE = "SELECT pg_catalog.pg_terminate_backend(%(pid)s, %(ms)s)"
INTERRUPT_TRANSACTION = ("BEGIN; SELECT pg_catalog.set_config('lock_timeout', %(lock_timeout)s, true); "
                         "SELECT job_id FROM broker.broker_interrupt_jobs(%(jobs)s::bigint[], %(tokens)s::uuid[]); COMMIT")
# DISCARD ALL without DISCARD PLANS: drops every piece of session state a job can leave behind (settings,
# LISTEN, prepared statements and cursors, session advisory locks, temporary objects, sequence state) but keeps
# the broker functions' cached plans, which PostgreSQL revalidates itself (re-planning them cost ~8 ms a job).
# The reset waits for no one: a job can tie an object its role owns to one of its temporary objects (a column
# default calling a temporary sequence), so that dropping the temporary objects needs a lock that another
# session of the enqueuer holds; past RESET_LOCK_TIMEOUT the worker drops the connection instead (WorkerLost).
RESET_LOCK_TIMEOUT = "2s"
RESET_SESSION = ("CLOSE ALL; RESET ALL; SET LOCAL lock_timeout = '" + RESET_LOCK_TIMEOUT + "'; DEALLOCATE ALL; "
                 "UNLISTEN *; SELECT pg_catalog.pg_advisory_unlock_all(); DISCARD SEQUENCES; DISCARD TEMP")
# What a worker sends first after a transaction of jobs, in the same message as its next statement: the reset
# in a transaction of its own, so that the next transaction starts from the reset settings.
RESET_TRANSACTION = "BEGIN; " + RESET_SESSION + "; COMMIT; "
RECOVER = "SELECT job_id, complete_status AS status FROM broker.broker_recover_stale_jobs()"
APPLY_RELEASES = "SELECT broker.broker_apply_deferred_releases(5000)"
SCHEDULE_TICK = "SELECT jobs_enqueued, next_fire_at, seconds_until_next FROM broker.broker_schedule_tick()"
SCHEDULES = """SELECT schedule_name, cron_expr, time_zone, enabled, next_fire_at, last_fire_at, skipped_fires,
                      skipped_fires_capped, last_error
                 FROM broker.broker_schedule ORDER BY enabled DESC, next_fire_at NULLS LAST, schedule_name"""
QUEUE_STATS = "SELECT * FROM broker.broker_queue_stats()"
# The session's poll: the queue numbers with a job claimable now (wake a worker there; report those not served).
READY_QUEUES = "SELECT broker.broker_ready_queues()"
# NOTIFY payload after '<database>/': a job was parked until a time (broker._notify_due); the poll asks NEXT_DUE again
DUE_HINT = "due"
# seconds until the next parked job is claimable by time alone (a delay, a rate's next tokens); NULL: none
NEXT_DUE = "SELECT extract(epoch FROM broker.broker_next_due() - clock_timestamp())::float8"
JOB_ACTIVITY = "SELECT job_id, job_queue, tenant_id, job_name, started_at, activity FROM broker.broker_job_activity()"
# pgsql-broker status: what this login may read (schema broker, every tenant's counts, the instances).
STATUS_ACCESS = """SELECT to_regnamespace('broker') IS NOT NULL AS schema,
                          to_regnamespace('broker') IS NOT NULL AND has_schema_privilege('broker', 'USAGE') AS usage,
                          to_regprocedure('broker.broker_queue_stats()') IS NOT NULL
                            AND has_function_privilege('broker.broker_queue_stats()', 'EXECUTE') AS runtime,
                          to_regclass('broker.broker_queueinstance') IS NOT NULL
                            AND has_table_privilege('broker.broker_queueinstance', 'SELECT') AS instances"""
# An enqueue login's tenants: its mappings (row-level security shows a role its own) and the default tenant.
OWN_TENANTS = """SELECT DISTINCT tenant_id FROM broker.broker_tenant_roles
                 UNION SELECT broker.broker_current_tenant() ORDER BY 1"""
# broker_queue_stats' counts for the current tenant, read as the login (row-level security keeps it to the tenant),
# with its pauses: its own and those for every tenant (a row of their own where the tenant has no job there).
# The unfinished jobs through the index that holds them alone, broker_jobs_group_idx, which "length(job_group) > 0",
# always true, lets the planner use (see broker_queue_stats); the last hour's finishes, as broker_queue_stats counts
# them, from the finished counts (broker._finished_counts_since: whole minutes, the current one and the 60 before),
# so that what other tenants finish costs this status a few counter rows, not their jobs.
OWN_QUEUE_STATS = """WITH s AS (
                       SELECT job_queue, tenant_id,
                              count(*) FILTER (WHERE complete_status = 0 AND pending_deps = 0 AND run_after <= statement_timestamp()) AS ready,
                              count(*) FILTER (WHERE complete_status = 0 AND pending_deps > 0) AS blocked,
                              count(*) FILTER (WHERE complete_status = 0 AND pending_deps = 0 AND run_after > statement_timestamp()) AS delayed,
                              count(*) FILTER (WHERE complete_status = 1) AS running,
                              0 AS completed_last_hour, 0 AS failed_last_hour, 0 AS cancelled_last_hour
                         FROM broker.broker_jobs
                        WHERE complete_status IN (0, 1) AND length(job_group) > 0
                        GROUP BY job_queue, tenant_id
                       UNION ALL
                       SELECT c.job_queue, c.tenant_id, 0, 0, 0, 0,
                              coalesce(sum(c.jobs) FILTER (WHERE c.complete_status = 2), 0),
                              coalesce(sum(c.jobs) FILTER (WHERE c.complete_status = 3), 0),
                              coalesce(sum(c.jobs) FILTER (WHERE c.complete_status = 4), 0)
                         FROM broker._finished_counts_since(
                                  broker._finished_minute(statement_timestamp()) - interval '60 minutes') AS c
                        GROUP BY c.job_queue, c.tenant_id
                       HAVING sum(c.jobs) <> 0
                       UNION ALL
                       SELECT job_queue, coalesce(tenant_id, broker.broker_current_tenant()), 0, 0, 0, 0, 0, 0, 0
                         FROM broker.broker_queue_pause
                        WHERE tenant_id IS NULL OR tenant_id = broker.broker_current_tenant())
                     SELECT job_queue, tenant_id, sum(ready)::bigint AS ready, sum(blocked)::bigint AS blocked,
                            sum(delayed)::bigint AS delayed, sum(running)::bigint AS running,
                            sum(completed_last_hour)::bigint AS completed_last_hour,
                            sum(failed_last_hour)::bigint AS failed_last_hour,
                            sum(cancelled_last_hour)::bigint AS cancelled_last_hour,
                            EXISTS (SELECT FROM broker.broker_queue_pause AS p
                                     WHERE p.job_queue = s.job_queue AND (p.tenant_id IS NULL OR p.tenant_id = s.tenant_id)) AS paused
                       FROM s GROUP BY job_queue, tenant_id ORDER BY job_queue, tenant_id"""
# `pgsql-broker status`: runners standing by (their listen connection is up, they hold no active instance row)
STANDBY_COUNT = """SELECT count(*) AS standby FROM pg_stat_activity
                    WHERE datname = current_database() AND application_name LIKE '%:listen'
                      AND pid NOT IN (SELECT backend_pid FROM broker.broker_queueinstance WHERE status = 'active')"""
SCHEMA_VERSION = """SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'pgsql_broker'),
                                    (SELECT version FROM broker.broker_schema_migrations
                                     ORDER BY string_to_array(version, '.')::int[] DESC LIMIT 1))"""
ENQUEUE = "SELECT job_id FROM broker.broker_add_job(%(name)s, %(sql)s{params})"
HAS_SCHEMA = "SELECT to_regnamespace('broker') IS NOT NULL"
# current_database(): the DSN may name a pooler's alias, and the NOTIFY payloads name the database
HAS_SCHEMA_IN = "SELECT to_regnamespace('broker') IS NOT NULL, current_database()"
# run/pooling.py: does the session keep its server backend across transactions?
BACKEND_PID = "SELECT pg_catalog.pg_backend_pid()"
ROLLBACK = "ROLLBACK"

# Retention on its policy (run/retention.py) purges as `pgsql-broker purge` does; the status shows the instances
# the console shows: those statements are the operators' (observe/job_queries.py).
PURGE, INSTANCES, SET_TENANT = job_queries.PURGE, job_queries.INSTANCES, job_queries.SET_TENANT

# Autonomous jobs (autonomous.py): started, kept alive and recorded on the worker's connection, each in a transaction
# of its own; the job's SQL runs on a connection of its own.
AUTONOMOUS_BEGIN = """SELECT execute_str, run_as, via, search_path, tenant_id, refused
                        FROM broker.broker_autonomous_begin(%(job)s, %(token)s::uuid)"""
AUTONOMOUS_EXTEND = "SELECT job_id FROM broker.broker_autonomous_extend(%(jobs)s::bigint[], %(tokens)s::uuid[], %(lease)s)"
AUTONOMOUS_END = """SELECT job_id, complete_status AS status, attempts, error_sqlstate, error_message,
                             extract(epoch FROM duration)::float8 AS seconds, NULL::bigint AS rows
                      FROM broker.broker_autonomous_end(%(job)s, %(token)s::uuid, %(sqlstate)s, %(message)s,
                                                        make_interval(secs => %(seconds)s), %(final)s)"""
# what an autonomous job's own connection runs before the job: its search_path, tenant and timeout (then, via
# set_role, SET ROLE), and the check that it is who it must be. Every function schema-qualified: the search_path
# is the enqueuer's, and a function of the role found through it would run as the role before the job, where
# RESET ROLE is allowed
AUTONOMOUS_SETUP = """SELECT pg_catalog.set_config('search_path', %(path)s, false),
                             pg_catalog.set_config('broker.tenant_id', %(tenant)s, false),
                             pg_catalog.set_config('statement_timeout', %(ms)s, false)"""
AUTONOMOUS_WHO = "SELECT current_user, session_user, pg_catalog.current_database(), pg_catalog.current_setting('is_superuser')"
AUTONOMOUS_INTERRUPT = "SELECT job_id FROM broker.broker_interrupt_jobs(%(jobs)s::bigint[], %(tokens)s::uuid[])"
