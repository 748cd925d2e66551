-- pgsql_broker: the install manifest.
-- Every file of the extension, in dependency order. `make` resolves the \i lines into
-- extension/pgsql_broker--<version>.sql; `psql -f sql/pgsql_broker.sql` from the
-- repository root runs the same sources directly (schema broker must exist).

-- first: schema broker must be the installer's own and new (nothing planted in it)
\i sql/guards/fresh_schema.sql

-- settings and tenancy (table defaults call these)
\i sql/functions/settings.sql
\i sql/functions/tenant.sql

-- tables
\i sql/tables/broker_schema_migrations.sql
\i sql/tables/broker_schedule.sql
\i sql/tables/broker_schedule_count.sql
\i sql/tables/broker_jobs.sql
\i sql/tables/broker_job_dependency.sql
\i sql/tables/broker_deferred_release.sql
\i sql/tables/broker_queueinstance.sql
\i sql/tables/broker_tenancy.sql
\i sql/tables/broker_autonomous_role.sql

-- tenancy and run_as checks, job executors
\i sql/functions/security.sql
\i sql/functions/executors.sql

-- dependency locking and the cycle check
\i sql/functions/dependency_locks.sql
\i sql/functions/dependency_cycle.sql

-- job lifecycle
\i sql/functions/job_notify.sql
\i sql/functions/job_finish.sql
\i sql/functions/job_fail.sql
\i sql/functions/job_triggers.sql
\i sql/functions/autonomous_check.sql
\i sql/functions/autonomous.sql
\i sql/functions/broker_add_job.sql
\i sql/functions/add_jobs_parse.sql
\i sql/functions/broker_add_jobs.sql
\i sql/functions/add_jobs_plain.sql
\i sql/functions/broker_get.sql
\i sql/functions/run_guard.sql
\i sql/functions/broker_run.sql
\i sql/functions/broker_run_batch.sql
\i sql/functions/broker_release_jobs.sql
\i sql/functions/broker_interrupt_jobs.sql
\i sql/functions/autonomous_run.sql
\i sql/functions/broker_cancel_job.sql
\i sql/functions/broker_recover_stale_jobs.sql
\i sql/functions/broker_purge_jobs.sql

-- cron schedules
\i sql/functions/cron_parse.sql
\i sql/functions/cron_next.sql
\i sql/functions/schedules.sql
\i sql/functions/schedule_triggers.sql
\i sql/functions/schedule_tick.sql

-- runner instances and monitoring
\i sql/functions/instances.sql
\i sql/functions/broker_queue_stats.sql

-- pg_dump registration of the data tables (CREATE EXTENSION only)
\i sql/dump.sql

-- row-level security, then privileges (last: covers every object above;
-- the grants to the broker roles are in sql/roles.sql, run after install)
\i sql/policies.sql
\i sql/grants.sql
