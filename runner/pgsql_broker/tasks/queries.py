"""The SQL a task worker sends, by name: the task protocol of docs/tasks.md, which a worker in any language follows."""
from __future__ import annotations

# the channel broker._notify_queue tells a task name's queue on, payload '<database>/<queue>'
CHANNEL = "pgsql_broker_task"
LISTEN = "LISTEN " + CHANNEL

# the tenant a connection acts for, for its whole session (broker_current_tenant reads it)
SET_TENANT = "SELECT pg_catalog.set_config('broker.tenant_id', %(tenant)s, false)"
# the database, and the tenant the session acts for (--tenant, else broker.tenant_id as the DSN sets it, else default)
SESSION = "SELECT pg_catalog.current_database(), broker.broker_current_tenant()"
# claims, heartbeats and batched completions: a commit lost in a crash costs a task a second run, never a lost task
RELAXED_COMMIT = "SET synchronous_commit = off"

CLAIM = """SELECT job_id, task, args, tenant_id, attempt, max_attempts, lease_token, lease_expires_at, timeout,
                  traceparent
             FROM broker.broker_claim_tasks(%(tasks)s, %(limit)s, %(lease)s)"""
EXTEND = "SELECT broker.broker_extend_task(%(job_id)s, %(token)s, %(lease)s)"
# the leases of claimed tasks still waiting for a slot: one statement for all of them
EXTEND_MANY = """SELECT u.job_id, broker.broker_extend_task(u.job_id, u.token, %(lease)s) AS state
                   FROM ROWS FROM (pg_catalog.unnest(%(job_ids)s::bigint[]), pg_catalog.unnest(%(tokens)s::uuid[]))
                        AS u(job_id, token)"""
COMPLETE = "SELECT broker.broker_complete_task(%(job_id)s, %(token)s, %(output)s)"
# handlers that wrote nothing: their completions together, one statement
COMPLETE_MANY = """SELECT job_id, outcome
                     FROM broker.broker_complete_tasks(%(job_ids)s::bigint[], %(tokens)s::uuid[], %(outputs)s::jsonb[])"""
FAIL = "SELECT broker.broker_fail_task(%(job_id)s, %(token)s, %(error)s, %(retry)s)"
RELEASE = "SELECT broker.broker_release_task(%(job_id)s, %(token)s)"

# broker_extend_task's answers (and broker_complete_tasks': completed, cancelled, lost)
EXTENDED, CANCELLED, LOST = "extended", "cancelled", "lost"
