-- pgsql_broker: the install manifest, and the table of contents of sql/.
-- Every file of the extension, in dependency order, one folder per concern. `make` resolves
-- the \i lines into extension/pgsql_broker--<version>.sql; `psql -f sql/pgsql_broker.sql`
-- from the repository root runs the same sources directly (schema broker must exist).
-- Where each rule lives: docs/where-rules-live.md.

-- Group: guards: schema broker must be the installer's own and new (nothing planted in it), and the
-- installer's default privileges must give nobody what is created in it
\i sql/guards/fresh_schema.sql
\i sql/guards/installer_default_privileges.sql

-- Group: core: options, job states, advisory-lock keys, the NOTIFY writer (table defaults and every concern use them)
\i sql/core/settings.sql
\i sql/core/states.sql
\i sql/core/lock_keys.sql
\i sql/core/notify.sql

-- Group: tenancy: the current tenant, strict tenancy, run_as rights (table defaults call broker_current_tenant)
\i sql/tenancy/tenant.sql
\i sql/tenancy/strict.sql
\i sql/tenancy/run_as.sql
\i sql/tenancy/admin.sql
\i sql/tenancy/autonomous_roles.sql

-- Group: traces: the enqueuer's trace context (broker_jobs.traceparent's default)
\i sql/traces/traceparent.sql

-- Group: tables: the tables, their constraints and indexes, and their pg_dump registration
\i sql/tables/broker_schema_migrations.sql
\i sql/tables/broker_schedule.sql
\i sql/tables/broker_schedule_count.sql
\i sql/tables/broker_jobs.sql
\i sql/tables/broker_claim_hint.sql
\i sql/tables/broker_job_dependency.sql
\i sql/tables/broker_deferred_release.sql
\i sql/tables/broker_queueinstance.sql
\i sql/tables/broker_finished_count.sql
\i sql/tables/broker_tenancy.sql
\i sql/tables/broker_job_attempts.sql
\i sql/tables/broker_job_actions.sql
\i sql/tables/broker_queue_pause.sql
\i sql/tables/broker_key_limit.sql
\i sql/tables/broker_tenant_weight.sql
\i sql/tables/broker_autonomous_role.sql
\i sql/tables/broker_task_queue.sql
\i sql/tables/broker_task_name_tenant.sql
\i sql/tables/dump.sql

-- Group: dependencies: locks, the cycle check, pending_deps bookkeeping, release and propagation
\i sql/dependencies/locks.sql
\i sql/dependencies/cycle.sql
\i sql/dependencies/release.sql
\i sql/dependencies/propagation.sql
\i sql/dependencies/triggers.sql

-- Group: enqueue: adding jobs, one or many; the checks of a job's SQL against how it runs
\i sql/enqueue/transaction_checks.sql
\i sql/enqueue/autonomous.sql
\i sql/enqueue/rules.sql
\i sql/enqueue/add_job.sql
\i sql/enqueue/parse_jobs.sql
\i sql/enqueue/add_jobs.sql
\i sql/enqueue/add_plain_jobs.sql
\i sql/enqueue/add_jobs_arrays.sql

-- Group: run: executors, the run guard, attempts, claim (and paused queues), run, finish/fail and retries,
-- release/interrupt, autonomous jobs, cancel, operator retries, recovery
\i sql/run/executors.sql
\i sql/run/guard.sql
\i sql/run/attempts.sql
\i sql/run/finish.sql
\i sql/run/fail.sql
\i sql/run/pause.sql
\i sql/flow/weights.sql
\i sql/flow/limits.sql
\i sql/flow/keys.sql
\i sql/flow/parking.sql
\i sql/flow/stats.sql

\i sql/run/claim_hint.sql
\i sql/run/claim_lane.sql
\i sql/run/claim.sql
\i sql/run/claim_batches.sql
\i sql/run/run.sql
\i sql/run/run_batch.sql
\i sql/run/release.sql
\i sql/run/interrupt.sql
\i sql/run/autonomous.sql
\i sql/run/cancel.sql
\i sql/run/retry.sql
\i sql/run/recovery.sql

-- Group: tasks: jobs run by application code: each name's queue, enqueue, claim by name, heartbeat and end, pause, schedules of tasks
\i sql/tasks/queues.sql
\i sql/tasks/add_task.sql
\i sql/tasks/claim.sql
\i sql/tasks/finish.sql
\i sql/tasks/pause.sql
\i sql/tasks/schedule.sql

-- Group: compat: what keeps objects made by an older release working (each file names the release that drops it)
\i sql/compat/executor_fallback.sql

-- Group: schedules: cron parsing and next fire, adding and changing schedules, running one now, their triggers, the tick
\i sql/schedules/cron_parse.sql
\i sql/schedules/cron_next.sql
\i sql/schedules/schedules.sql
\i sql/schedules/manage.sql
\i sql/schedules/run_now.sql
\i sql/schedules/triggers.sql
\i sql/schedules/tick.sql

-- Group: instances: runner instances and queue statistics
\i sql/instances/instances.sql
\i sql/instances/finished_counts.sql
\i sql/instances/queue_stats.sql
\i sql/instances/runner_reads.sql

-- Group: retention: purging finished jobs
\i sql/retention/purge.sql

-- Group: security: row-level security per table, then privileges (last: they cover every object
-- above; the grants to the broker roles are in sql/roles.sql, run after install)
\i sql/security/policies/broker_jobs.sql
\i sql/security/policies/broker_claim_hint.sql
\i sql/security/policies/broker_job_dependency.sql
\i sql/security/policies/broker_schedule_count.sql
\i sql/security/policies/broker_deferred_release.sql
\i sql/security/policies/broker_finished_count.sql
\i sql/security/policies/broker_schedule.sql
\i sql/security/policies/broker_queueinstance.sql
\i sql/security/policies/broker_schema_migrations.sql
\i sql/security/policies/broker_config.sql
\i sql/security/policies/broker_tenant_roles.sql
\i sql/security/policies/broker_job_attempts.sql
\i sql/security/policies/broker_job_actions.sql
\i sql/security/policies/broker_queue_pause.sql
\i sql/security/policies/broker_key_limit.sql
\i sql/security/policies/broker_tenant_weight.sql
\i sql/security/policies/broker_autonomous_role.sql
\i sql/security/policies/broker_task_queue.sql
\i sql/security/policies/broker_task_name_tenant.sql
\i sql/security/grants.sql
