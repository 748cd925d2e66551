-- pgsql_broker 0.1.0 -> 0.2.0: the upgrade manifest.
-- `make` builds extension/pgsql_broker--0.1.0--0.2.0.sql from it with sql/upgrades/build.awk
-- (directives: sql/upgrades/README.md): \i includes a file, \i-functions-of every function
-- file of the install manifest (outside sql/guards/, sql/tables/, sql/security/), in its
-- order; CREATE FUNCTION / CREATE TRIGGER of an object that 0.1.0 already had become
-- CREATE OR REPLACE, so each function file of the release is included whole and nothing is
-- copied by hand. Policies are dropped and their files included again. What cannot be
-- replaced (table columns, indexes, triggers whose kind changed, dropped or re-signatured
-- functions) is written out here. tests_py/install/test_install_paths.py checks that a database upgraded
-- this way has the catalog of a fresh 0.2.0 install.

-- First: nothing planted in schema broker is carried on (sql/guards/).
\i sql/guards/objects_are_the_brokers.sql

-- ---------------------------------------------------------------------------
-- Tables first: SQL-language functions below are checked against them.
-- ---------------------------------------------------------------------------
ALTER TABLE broker.broker_schedule
    ADD COLUMN created_by      name        NOT NULL DEFAULT CURRENT_USER,
    ADD COLUMN job_timeout     interval,
    ADD COLUMN job_search_path text        NOT NULL DEFAULT '',
    ADD COLUMN catch_up        text        NOT NULL DEFAULT 'one',
    ADD COLUMN catch_up_max    integer     NOT NULL DEFAULT 100,
    ADD COLUMN overlap         text        NOT NULL DEFAULT 'skip',
    ADD COLUMN last_job_id     bigint,
    ADD COLUMN skipped_fires   bigint      NOT NULL DEFAULT 0,
    ADD COLUMN last_error      text,
    ADD COLUMN skipped_fires_capped boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT broker_schedule_job_timeout_check CHECK (job_timeout OPERATOR(pg_catalog.>) interval '0'),
    ADD CONSTRAINT broker_schedule_catch_up_check CHECK (catch_up OPERATOR(pg_catalog.=) ANY (ARRAY['none', 'one', 'all'])),
    ADD CONSTRAINT broker_schedule_catch_up_max_check CHECK (catch_up_max OPERATOR(pg_catalog.>=) 1),
    ADD CONSTRAINT broker_schedule_overlap_check CHECK (overlap OPERATOR(pg_catalog.=) ANY (ARRAY['skip', 'allow'])),
    ADD CONSTRAINT broker_schedule_cron_expr_check CHECK (pg_catalog.length(cron_expr) OPERATOR(pg_catalog.<=) 256);
-- Schedule rows from 0.1.0 (which had no schedule functions) were never
-- checked for run_as: they stay disabled until their run_as role (their
-- owner from now on), or a member of it, reviews and enables them.
UPDATE broker.broker_schedule
   SET created_by = run_as, enabled = false, next_fire_at = NULL,
       last_error = 'created before 0.2.0: review it, then broker_enable_schedule()';
-- The tick: enabled schedules by next fire time.
CREATE INDEX broker_schedule_due_idx ON broker.broker_schedule (next_fire_at) WHERE enabled;

COMMENT ON COLUMN broker.broker_schedule.created_by IS 'Owner: the role that created it; members of it may alter or remove it, and its jobs are enqueued in its name.';
COMMENT ON COLUMN broker.broker_schedule.job_timeout IS 'statement_timeout of the jobs it enqueues (NULL: none).';
COMMENT ON COLUMN broker.broker_schedule.job_search_path IS 'search_path the jobs run with (the creator''s, by default).';
COMMENT ON COLUMN broker.broker_schedule.catch_up IS 'Missed fires after downtime: none (skip them), one (one job for them all, the default) or all (one job each, at most catch_up_max).';
COMMENT ON COLUMN broker.broker_schedule.catch_up_max IS 'With catch_up = all: at most this many jobs for the missed fires (the latest ones).';
COMMENT ON COLUMN broker.broker_schedule.overlap IS 'skip (default): no job while an earlier job of this schedule is pending or running; allow: always enqueue.';
COMMENT ON COLUMN broker.broker_schedule.last_job_id IS 'The last job it enqueued.';
COMMENT ON COLUMN broker.broker_schedule.skipped_fires IS 'Due fires that enqueued no job (dropped by the catch-up policy, skipped for overlap, or their key still taken): exact, except that one tick adds at most 1,000 (see skipped_fires_capped).';
COMMENT ON COLUMN broker.broker_schedule.skipped_fires_capped IS 'true once a tick skipped more fires than it counts (1,000): skipped_fires is then a lower bound.';
COMMENT ON COLUMN broker.broker_schedule.last_error IS 'Why the tick disabled the schedule (say its owner lost the right to run as run_as), else NULL.';
COMMENT ON INDEX broker.broker_schedule_due_idx IS 'The tick: enabled schedules by next fire time.';

-- Schedules per tenant, for the quota (filled at each tenant's next new schedule).
\i sql/tables/broker_schedule_count.sql

-- A new database-wide option: max_schedules_per_tenant.
ALTER TABLE broker.broker_config
    DROP CONSTRAINT broker_config_setting_check,
    ADD CONSTRAINT broker_config_setting_check
        CHECK (setting OPERATOR(pg_catalog.=) ANY (ARRAY['strict_tenancy', 'lease_seconds', 'retry_base_seconds', 'retry_max_seconds',
                                                           'max_schedules_per_tenant']));
COMMENT ON TABLE broker.broker_config IS
    'Database-wide broker options, written by broker_admin: strict_tenancy (on/off), lease_seconds, retry_base_seconds, retry_max_seconds, max_schedules_per_tenant.';

-- Queue numbers are 1..1000 and idempotency keys at most 512 characters (an existing row
-- outside them stops the upgrade here, naming the constraint).
ALTER TABLE broker.broker_jobs
    DROP CONSTRAINT broker_jobs_job_queue_check,
    ADD CONSTRAINT broker_jobs_job_queue_check
        CHECK (job_queue OPERATOR(pg_catalog.>=) 1 AND job_queue OPERATOR(pg_catalog.<=) 1000
               OR job_queue OPERATOR(pg_catalog.<) 0 AND job_language OPERATOR(pg_catalog.=) 'task'),
    DROP CONSTRAINT broker_jobs_job_language_check,
    ADD CONSTRAINT broker_jobs_job_language_check
        CHECK (job_language OPERATOR(pg_catalog.=) ANY (ARRAY['sql', 'plpgsql'])
               OR job_language OPERATOR(pg_catalog.=) 'task' AND job_queue OPERATOR(pg_catalog.<) 0),
    ADD CONSTRAINT broker_jobs_task_args_check
        CHECK (CASE WHEN job_language OPERATOR(pg_catalog.=) 'task' THEN execute_str::pg_catalog.jsonb IS NOT NULL ELSE true END),
    DROP CONSTRAINT broker_jobs_idempotency_key_check,
    ADD CONSTRAINT broker_jobs_idempotency_key_check
        CHECK (pg_catalog.btrim(idempotency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(idempotency_key) OPERATOR(pg_catalog.<=) 512);
ALTER TABLE broker.broker_schedule
    DROP CONSTRAINT broker_schedule_job_queue_check,
    ADD CONSTRAINT broker_schedule_job_queue_check CHECK (job_queue OPERATOR(pg_catalog.>=) 1 AND job_queue OPERATOR(pg_catalog.<=) 1000);
COMMENT ON COLUMN broker.broker_jobs.job_queue IS 'Queue number (1 to 1000); each runner worker serves one queue. A task: its name''s queue (negative, broker_task_queue).';
COMMENT ON COLUMN broker.broker_jobs.execute_str IS 'The SQL to execute (for plpgsql: the body of an anonymous DO block; for a task: its arguments, a JSON value).';
COMMENT ON COLUMN broker.broker_jobs.job_language IS 'sql or plpgsql, run by the runner; task: run by application code (its job_name is the task name).';
COMMENT ON COLUMN broker.broker_jobs.idempotency_key IS 'Enqueueing again with the same key (at most 512 characters) returns this job while it is pending or running.';
COMMENT ON COLUMN broker.broker_jobs.last_error_message IS 'Error message of the latest failed attempt (at most 2,000 characters, then a truncation marker).';
COMMENT ON COLUMN broker.broker_schedule.job_queue IS 'Queue (1 to 1000) of the jobs it enqueues.';

-- Runs ended by their runner at shutdown are counted apart from attempts (broker_interrupt_jobs).
ALTER TABLE broker.broker_jobs
    ADD COLUMN interruptions integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT broker_jobs_interruptions_check CHECK (interruptions OPERATOR(pg_catalog.>=) 0);
COMMENT ON COLUMN broker.broker_jobs.interruptions IS 'Runs ended by their runner at shutdown (broker_interrupt_jobs) or by a server restart (broker_recover_stale_jobs): the job went back to pending without counting the attempt.';

-- A job that ran past a batch's budget runs alone from then on (broker_run_batch).
ALTER TABLE broker.broker_jobs ADD COLUMN run_alone boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN broker.broker_jobs.run_alone IS 'true once a run of the job went past the budget of a transaction of several jobs (broker_run_batch), or it shared a transaction whose session died (broker_release_jobs p_run_alone): it then runs in a transaction of its own, its attempt not counted for that run.';
-- Autonomous jobs and schedules (outside a transaction block) and the roles allowed them.
ALTER TABLE broker.broker_jobs ADD COLUMN autonomous boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN broker.broker_jobs.autonomous IS 'Runs outside a transaction block, on a connection of its own, at least once (broker_add_job p_autonomous; see broker_allow_autonomous).';
ALTER TABLE broker.broker_schedule ADD COLUMN autonomous boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN broker.broker_schedule.autonomous IS 'Its jobs run outside a transaction block (autonomous jobs, see broker_allow_autonomous).';
\i sql/tables/broker_autonomous_role.sql
-- <extension-only> (see sql/dump.sql)
SELECT pg_catalog.pg_extension_config_dump('broker.broker_autonomous_role', '');
-- </extension-only>

-- Dependency releases deferred by completions with more than 1,000 dependents.
\i sql/tables/broker_deferred_release.sql
-- Operating jobs: the job that cancelled a job, attempt history, operator actions, paused queues.
ALTER TABLE broker.broker_jobs ADD COLUMN cancel_cause_job_id bigint;
CREATE INDEX broker_jobs_cancel_cause_idx ON broker.broker_jobs (cancel_cause_job_id)
    WHERE cancel_cause_job_id IS NOT NULL;
COMMENT ON COLUMN broker.broker_jobs.cancel_cause_job_id IS 'For a job cancelled because a job it waited on (directly or transitively) failed or was cancelled: that job (broker_retry_job brings them back together).';
-- Claims under a held snapshot: the transaction that made each row version ready (existing rows:
-- this one), found through its own index, and the per-queue hint claims start at.
ALTER TABLE broker.broker_jobs ADD COLUMN ready_xid xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id();
COMMENT ON COLUMN broker.broker_jobs.ready_xid IS 'Transaction that made this row version pending and unblocked (set by its default and by the trigger broker_jobs_ready_xid_trg); claims use it with broker_claim_hint.';
-- Flow control: concurrency keys and parked jobs (dated later, over a key's limit), the claim
-- index by tenant (fair share), and the limits and weights.
ALTER TABLE broker.broker_jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN parked smallint NOT NULL DEFAULT 0,
    ADD CONSTRAINT broker_jobs_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200),
    ADD CONSTRAINT broker_jobs_parked_check CHECK (parked OPERATOR(pg_catalog.>=) 0 AND parked OPERATOR(pg_catalog.<=) 3);
COMMENT ON COLUMN broker.broker_jobs.concurrency_key IS 'Key whose limits (broker_set_limit: running at once, starts per second) the job counts against; NULL: none.';
COMMENT ON COLUMN broker.broker_jobs.parked IS 'Why a pending job is out of the claim index: 0 not parked, 1 until its run_after (later), 2 its key at its cap (cap), 3 its key out of tokens (rate). See broker._parked.';
-- a schedule's jobs carry its key
ALTER TABLE broker.broker_schedule
    ADD COLUMN concurrency_key text,
    ADD CONSTRAINT broker_schedule_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200);
COMMENT ON COLUMN broker.broker_schedule.concurrency_key IS 'Concurrency key of the jobs it enqueues (broker_jobs.concurrency_key; NULL: none).';
-- pending jobs dated later are parked (the triggers that keep this are created below)
UPDATE broker.broker_jobs SET parked = 1
 WHERE complete_status OPERATOR(pg_catalog.=) 0 AND run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp();
DROP INDEX broker.broker_jobs_claim_idx;
CREATE INDEX broker_jobs_claim_idx ON broker.broker_jobs
    (job_queue, tenant_id, job_priority DESC, run_after, job_id)
    WHERE complete_status OPERATOR(pg_catalog.=) 0 AND pending_deps OPERATOR(pg_catalog.=) 0 AND parked OPERATOR(pg_catalog.=) 0;
COMMENT ON INDEX broker.broker_jobs_claim_idx IS
    'The claim: each tenant''s claimable jobs of a queue in claim order (priority, then age); parked jobs are out of it.';
CREATE INDEX broker_jobs_ready_xid_idx ON broker.broker_jobs (job_queue, ready_xid)
    WHERE complete_status OPERATOR(pg_catalog.<=) 0 AND pending_deps OPERATOR(pg_catalog.<=) 0 AND parked OPERATOR(pg_catalog.<=) 0
      AND ready_xid IS NOT NULL;
COMMENT ON INDEX broker.broker_jobs_ready_xid_idx IS
    'Ready jobs of a queue by the transaction that made them ready: what a claim that starts at its queue''s hint adds (broker_get).';
-- the group index serves queries on job_group only (not a claim's by tenant)
DROP INDEX broker.broker_jobs_group_idx;
CREATE INDEX broker_jobs_group_idx ON broker.broker_jobs (tenant_id, job_group)
    WHERE complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]) AND job_group IS NOT NULL;
CREATE INDEX broker_jobs_later_idx ON broker.broker_jobs (job_queue, run_after)
    WHERE complete_status OPERATOR(pg_catalog.=) 0 AND parked OPERATOR(pg_catalog.=) 1;
COMMENT ON INDEX broker.broker_jobs_later_idx IS
    'Jobs parked until their run_after, by queue and time: what a claim unparks once due (broker._unpark_due).';
CREATE INDEX broker_jobs_key_running_idx ON broker.broker_jobs (concurrency_key, tenant_id)
    WHERE complete_status OPERATOR(pg_catalog.=) 1 AND concurrency_key IS NOT NULL;
COMMENT ON INDEX broker.broker_jobs_key_running_idx IS
    'Claimed jobs by concurrency key and tenant: the running count a key''s cap is checked against.';
CREATE INDEX broker_jobs_key_pending_idx ON broker.broker_jobs
    (concurrency_key, tenant_id, job_priority DESC, run_after, job_id)
    WHERE complete_status OPERATOR(pg_catalog.=) 0 AND concurrency_key IS NOT NULL;
COMMENT ON INDEX broker.broker_jobs_key_pending_idx IS
    'Pending jobs with a concurrency key, by key and tenant in claim order: what a claim parks at the key''s limit, and a freed slot or a new token unparks.';
\i sql/tables/broker_key_limit.sql
\i sql/tables/broker_tenant_weight.sql
\i sql/tables/broker_claim_hint.sql
\i sql/tables/broker_job_attempts.sql
\i sql/tables/broker_job_actions.sql
\i sql/tables/broker_queue_pause.sql
\i sql/tables/broker_task_queue.sql
-- pg_dump registration of every data table: a table 0.1.0 registered keeps its entry (it is
-- replaced in place), the new ones are added.
\i sql/tables/dump.sql
COMMENT ON COLUMN broker.broker_jobs.pending_deps IS 'Dependencies still blocking the job (unfinished ones, and finished ones whose release is deferred); claimable only at 0.';

-- Finished jobs per minute, for broker_queue_stats (filled below, once its triggers exist).
\i sql/tables/broker_finished_count.sql
-- The edge trigger became statement-level (set-based, transition table new_edges).
DROP TRIGGER broker_job_dependency_after_insert_trg ON broker.broker_job_dependency;
-- The enqueue NOTIFY moved into broker._jobs_after_insert (one trigger per INSERT).
DROP TRIGGER broker_jobs_notify_insert_trg ON broker.broker_jobs;
DROP FUNCTION broker._jobs_notify_insert();
-- Retention reads finished jobs one final state at a time, and deletes edges by job_id.
DROP INDEX broker.broker_jobs_finished_idx;
CREATE INDEX broker_jobs_finished_idx ON broker.broker_jobs (complete_status, finished_at)
    WHERE complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[]);
CREATE INDEX broker_job_dependency_job_id_idx ON broker.broker_job_dependency (job_id);
-- An instance may be parked: its runner serves the database in turns (max_open_conns_total below one
-- connection per database) and resumes the same row at its next visit.
ALTER TABLE broker.broker_queueinstance
    DROP CONSTRAINT broker_queueinstance_status_check,
    ADD CONSTRAINT broker_queueinstance_status_check CHECK (status OPERATOR(pg_catalog.=) ANY (ARRAY['active', 'parked', 'stopped', 'dead']));
DROP INDEX broker.broker_queueinstance_one_active_idx;
CREATE UNIQUE INDEX broker_queueinstance_one_active_idx
    ON broker.broker_queueinstance ((true)) WHERE status OPERATOR(pg_catalog.=) ANY (ARRAY['active', 'parked']);
COMMENT ON TABLE broker.broker_queueinstance IS
    'Runner instances; at most one current per database: active (it holds the broker session advisory lock) or parked (served in turns, between two visits).';
COMMENT ON COLUMN broker.broker_queueinstance.status IS 'active, parked (its runner serves the database in turns and will resume it; stopped_at: when it parked), stopped (clean shutdown, or parked and replaced) or dead (replaced after its session died).';
COMMENT ON COLUMN broker.broker_queueinstance.stopped_at IS 'When it stopped, parked or was found dead.';
-- broker_purge_jobs takes the final state to purge (a trailing parameter).
DROP FUNCTION broker.broker_purge_jobs(interval, integer);
\new-signature broker_purge_jobs
-- broker_get says whether a job is autonomous.
DROP FUNCTION broker.broker_get(integer, bigint, integer, integer);
\new-signature broker_get
-- _lock_dependents returns the ids it locked (was: how many).
DROP FUNCTION broker._lock_dependents(text, bigint[], text[]);
-- broker_add_job takes the tenant of the call, p_autonomous and p_concurrency_key (trailing parameters).
DROP FUNCTION broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text,
                                    text[], timestamptz, interval, text);
\new-signature broker_add_job


-- ---------------------------------------------------------------------------
-- Every function (and its triggers), as in sql/pgsql_broker.sql
-- ---------------------------------------------------------------------------
\i-functions-of sql/pgsql_broker.sql

-- The counters of the jobs that finished recently (broker_queue_stats reads the last hour only);
-- the table is locked above, so no finish is counted twice.
INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
SELECT broker._finished_minute(j.finished_at), j.job_queue, j.tenant_id, j.complete_status, pg_catalog.count(*)
  FROM broker.broker_jobs AS j
 WHERE j.complete_status OPERATOR(pg_catalog.>=) 2
   AND j.finished_at OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) interval '2 hours')
 GROUP BY 1, 2, 3, 4;

-- ---------------------------------------------------------------------------
-- Row-level security: every 0.1.0 policy is dropped and each table's policy file included
-- whole (they reference the functions above), so no policy is written twice.
-- ---------------------------------------------------------------------------
DROP POLICY broker_jobs_select ON broker.broker_jobs;
DROP POLICY broker_jobs_insert ON broker.broker_jobs;
DROP POLICY broker_jobs_update ON broker.broker_jobs;
DROP POLICY broker_jobs_delete ON broker.broker_jobs;
DROP POLICY broker_job_dependency_select ON broker.broker_job_dependency;
DROP POLICY broker_job_dependency_insert ON broker.broker_job_dependency;
DROP POLICY broker_schedule_tenant ON broker.broker_schedule;
DROP POLICY broker_queueinstance_tenant ON broker.broker_queueinstance;
DROP POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations;
DROP POLICY broker_config_tenant ON broker.broker_config;
DROP POLICY broker_tenant_roles_own ON broker.broker_tenant_roles;
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

-- Privileges (new functions too; the broker roles get theirs from sql/roles.sql)
\i sql/security/grants.sql
