-- pgsql_broker 0.2.0 -> 0.3.0: the upgrade manifest.
-- `make` builds extension/pgsql_broker--0.2.0--0.3.0.sql from it with sql/upgrades/build.awk
-- (directives: sql/upgrades/README.md). Each function file of 0.3.0 is included whole
-- (\i-functions-of), and so is each policy file (\i-under); what cannot be replaced is written
-- out here, in four places: (1) tables and types, (2) functions whose signature changed,
-- (3) data the new rules need, (4) nothing for policies and grants, which are redone whole.
-- tests_py/install/test_upgrades_match_a_fresh_install.py and
-- tests_py/install/test_upgrade_from_0_2_0_keeps_jobs_running.py check that a database upgraded
-- this way has the catalog of a fresh 0.3.0 install and keeps its jobs.

-- First: nothing planted in schema broker is carried on, and the upgrading role's default
-- privileges give nobody what the upgrade creates (sql/guards/).
\i sql/guards/objects_are_the_brokers.sql
\i sql/guards/installer_default_privileges.sql

-- ---------------------------------------------------------------------------
-- (1) Tables and types first: SQL-language functions below are checked against them.
-- ---------------------------------------------------------------------------

-- Flow control (issue 33): concurrency keys and parked jobs (dated later, or over a key's
-- limit), the claim index by tenant (fair share), the limits and the weights.
ALTER TABLE broker.broker_jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN parked smallint NOT NULL DEFAULT 0,
    ADD CONSTRAINT broker_jobs_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200),
    ADD CONSTRAINT broker_jobs_parked_check CHECK (parked OPERATOR(pg_catalog.=) ANY ('{0,1,2,3}'::pg_catalog.int2[]));
COMMENT ON COLUMN broker.broker_jobs.concurrency_key IS 'Key whose limits (broker_set_limit: running at once, starts per second) the job counts against; NULL: none.';
COMMENT ON COLUMN broker.broker_jobs.parked IS 'Why a pending job is out of the claim index: 0 not parked, 1 until its run_after (later), 2 its key at its cap (cap), 3 its key out of tokens (rate). See broker._parked.';
ALTER TABLE broker.broker_schedule
    ADD COLUMN concurrency_key text,
    ADD CONSTRAINT broker_schedule_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200);
COMMENT ON COLUMN broker.broker_schedule.concurrency_key IS 'Concurrency key of the jobs it enqueues (broker_jobs.concurrency_key; NULL: none).';
ALTER TYPE broker._job_fields ADD ATTRIBUTE concurrency_key text;

-- Tasks (issue 37): a task is a row of broker_jobs in its name's queue (negative), its arguments
-- JSON; the CHECKs with as few operators as say the same (each is prepared again at every statement
-- that writes a row: sql/tables/broker_jobs.sql).
ALTER TABLE broker.broker_jobs
    DROP CONSTRAINT broker_jobs_job_queue_check,
    ADD CONSTRAINT broker_jobs_job_queue_check
        CHECK (job_queue OPERATOR(pg_catalog.<@) '[1,1000]'::pg_catalog.int4range OR job_language OPERATOR(pg_catalog.=) 'task'),
    DROP CONSTRAINT broker_jobs_job_language_check,
    ADD CONSTRAINT broker_jobs_job_language_check
        CHECK (CASE WHEN job_language OPERATOR(pg_catalog.=) 'task'
                    THEN job_queue OPERATOR(pg_catalog.<) 0 AND execute_str::pg_catalog.jsonb IS NOT NULL
                    ELSE job_language OPERATOR(pg_catalog.=) ANY ('{sql,plpgsql}'::pg_catalog.text[]) END),
    DROP CONSTRAINT broker_jobs_complete_status_check,
    ADD CONSTRAINT broker_jobs_complete_status_check CHECK (complete_status OPERATOR(pg_catalog.=) ANY ('{0,1,2,3,4}'::pg_catalog.int2[]));
COMMENT ON COLUMN broker.broker_jobs.job_queue IS 'Queue number (1 to 1000); each runner worker serves one queue. A task: its name''s queue (negative, broker_task_queue).';
COMMENT ON COLUMN broker.broker_jobs.execute_str IS 'The SQL to execute (for plpgsql: the body of an anonymous DO block; for a task: its arguments, a JSON value).';
COMMENT ON COLUMN broker.broker_jobs.job_language IS 'sql or plpgsql, run by the runner; task: run by application code (its job_name is the task name).';
COMMENT ON COLUMN broker.broker_job_attempts.output IS 'Completed attempt: the value the job passed to broker_set_output, or a task''s p_output of broker_complete_task as JSON text (at most 2,000 characters).';

-- A schedule can fire tasks (broker_add_task_schedule): their name's queue, JSON arguments.
ALTER TABLE broker.broker_schedule
    DROP CONSTRAINT broker_schedule_job_language_check,
    ADD CONSTRAINT broker_schedule_job_language_check
        CHECK (job_language OPERATOR(pg_catalog.=) ANY (ARRAY['sql', 'plpgsql'])
               OR job_language OPERATOR(pg_catalog.=) 'task' AND job_queue OPERATOR(pg_catalog.<) 0),
    DROP CONSTRAINT broker_schedule_job_queue_check,
    ADD CONSTRAINT broker_schedule_job_queue_check
        CHECK (job_queue OPERATOR(pg_catalog.>=) 1 AND job_queue OPERATOR(pg_catalog.<=) 1000
               OR job_queue OPERATOR(pg_catalog.<) 0 AND job_language OPERATOR(pg_catalog.=) 'task'),
    ADD CONSTRAINT broker_schedule_task_args_check
        CHECK (CASE WHEN job_language OPERATOR(pg_catalog.=) 'task' THEN execute_str::pg_catalog.jsonb IS NOT NULL ELSE true END);
COMMENT ON COLUMN broker.broker_schedule.job_language IS 'Language of execute_str: sql or plpgsql; task: a schedule of tasks (broker_add_task_schedule), execute_str their arguments, job_queue their name''s queue.';

-- A task name can be paused (broker_pause_task): its queue is negative.
ALTER TABLE broker.broker_queue_pause
    DROP CONSTRAINT broker_queue_pause_job_queue_check,
    ADD CONSTRAINT broker_queue_pause_job_queue_check
        CHECK (job_queue OPERATOR(pg_catalog.>=) 1 AND job_queue OPERATOR(pg_catalog.<=) 1000 OR job_queue OPERATOR(pg_catalog.<) 0);
COMMENT ON COLUMN broker.broker_queue_pause.job_queue IS 'The paused queue: 1 to 1000, or a task name''s (negative: broker_pause_task).';

-- Faults (issue 32): what interruptions and run_alone count now.
COMMENT ON COLUMN broker.broker_jobs.interruptions IS 'Runs ended by their runner at shutdown (broker_interrupt_jobs) or by a server restart (broker_recover_stale_jobs): the job went back to pending without counting the attempt.';
COMMENT ON COLUMN broker.broker_jobs.run_alone IS 'true once a run of the job went past the budget of a transaction of several jobs (broker_run_batch), or it shared a transaction whose session died (broker_release_jobs p_run_alone): it then runs in a transaction of its own, its attempt not counted for that run.';

-- Pending jobs dated later are parked (the triggers that keep this are created below, with
-- their functions).
UPDATE broker.broker_jobs SET parked = 1
 WHERE complete_status OPERATOR(pg_catalog.=) 0 AND run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp();

-- The claim's indexes: by tenant, without parked jobs; the group and ready_xid indexes usable only
-- by the queries on their own columns.
DROP INDEX broker.broker_jobs_claim_idx;
CREATE INDEX broker_jobs_claim_idx ON broker.broker_jobs
    (job_queue, tenant_id, job_priority DESC, run_after, job_id)
    WHERE complete_status OPERATOR(pg_catalog.=) 0 AND pending_deps OPERATOR(pg_catalog.=) 0 AND parked OPERATOR(pg_catalog.=) 0;
COMMENT ON INDEX broker.broker_jobs_claim_idx IS
    'The claim: each tenant''s claimable jobs of a queue in claim order (priority, then age); parked jobs are out of it.';
DROP INDEX broker.broker_jobs_ready_xid_idx;
CREATE INDEX broker_jobs_ready_xid_idx ON broker.broker_jobs (job_queue, ready_xid)
    WHERE complete_status OPERATOR(pg_catalog.<=) 0 AND pending_deps OPERATOR(pg_catalog.<=) 0 AND parked OPERATOR(pg_catalog.<=) 0
      AND ready_xid IS NOT NULL;
COMMENT ON INDEX broker.broker_jobs_ready_xid_idx IS
    'Ready jobs of a queue by the transaction that made them ready: what a claim that starts at its queue''s hint adds (broker_get).';
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

-- The claim hint holds a position per tenant now. It is derived data (not dumped, rewritten by
-- the next claims): dropped with its policy and made again empty.
DROP TABLE broker.broker_claim_hint;
\i sql/tables/broker_claim_hint.sql

-- New tables: key limits, tenant weights, task names' queues and their tenants.
\i sql/tables/broker_key_limit.sql
\i sql/tables/broker_tenant_weight.sql
\i sql/tables/broker_task_queue.sql
\i sql/tables/broker_task_name_tenant.sql
-- pg_dump registration of every data table: a table 0.2.0 registered keeps its entry (it is
-- replaced in place), the new ones are added.
\i sql/tables/dump.sql

-- ---------------------------------------------------------------------------
-- (2) Functions whose signature changed: the 0.2.0 version is dropped here, and the 0.3.0 one
-- created plain below (\new-signature). Their grants come back from sql/security/grants.sql and
-- sql/roles.sql.
-- ---------------------------------------------------------------------------
-- The ready_xid trigger's condition called broker._claimable(status, deps); it is made again
-- below with the new condition.
DROP TRIGGER broker_jobs_ready_xid_trg ON broker.broker_jobs;
-- the claim conditions take parked (p_parked)
DROP FUNCTION broker._claimable(smallint, integer);
\new-signature _claimable
DROP FUNCTION broker._claimable_by_xid(smallint, integer);
\new-signature _claimable_by_xid
-- the hint holds a position per tenant (broker._claim_position[])
DROP FUNCTION broker._save_claim_hint(integer, pg_snapshot, integer, timestamptz, bigint);
\new-signature _save_claim_hint
-- the cycle check takes its cap on edges (p_max_edges)
DROP FUNCTION broker._dependency_cycle(bigint[], integer);
\new-signature _dependency_cycle
-- every enqueue path and the schedules take p_concurrency_key (trailing)
DROP FUNCTION broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text,
                                    text[], timestamptz, interval, text, text, boolean);
\new-signature broker_add_job
DROP FUNCTION broker._jobs_of_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[],
                                     text[], text);
\new-signature _jobs_of_arrays
DROP FUNCTION broker.broker_add_jobs_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[],
                                            interval[], text[], text, text);
\new-signature broker_add_jobs_arrays
DROP FUNCTION broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                                         text, boolean, interval, text, text, boolean);
\new-signature broker_add_schedule
DROP FUNCTION broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                                           text, interval, text, text, boolean, text);
\new-signature broker_alter_schedule
-- a claim may name its lease token (p_lease_token: a claim whose answer was lost is handed back whole)
DROP FUNCTION broker.broker_get(integer, bigint, integer, integer);
\new-signature broker_get
DROP FUNCTION broker.broker_claim_batches(integer, bigint, integer, integer, interval, boolean, integer);
\new-signature broker_claim_batches
-- a hand-back may mark the jobs to run alone (p_run_alone)
DROP FUNCTION broker.broker_release_jobs(bigint[], uuid[]);
\new-signature broker_release_jobs
-- a completed job's rows_affected is returned (traces)
DROP FUNCTION broker.broker_run_batch(bigint[], uuid[], interval);
\new-signature broker_run_batch

-- ---------------------------------------------------------------------------
-- Every function (and its triggers), as in sql/pgsql_broker.sql
-- ---------------------------------------------------------------------------
\i-functions-of sql/pgsql_broker.sql

-- Traces: the enqueuer's trace context. Its default, broker._traceparent, is created just above, so
-- the column comes after the functions (and is the table's last, as in a fresh install); a
-- non-volatile default: existing rows get NULL without a rewrite of the table.
ALTER TABLE broker.broker_jobs ADD COLUMN traceparent text DEFAULT broker._traceparent();
COMMENT ON COLUMN broker.broker_jobs.traceparent IS 'The enqueuer''s W3C trace context (its transaction''s setting broker.traceparent at enqueue, checked by broker._traceparent); NULL: none. The runner and the task worker make each attempt''s span a child of it.';

-- ---------------------------------------------------------------------------
-- (3) Data: nothing else. Existing jobs keep their queue, tenant and state; none has a key.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- (4) Row-level security and privileges, redone whole: every policy of schema broker that the
-- upgraded database has is dropped, then each policy file of the install manifest is included
-- (a policy added, renamed or given other roles needs no line here).
-- ---------------------------------------------------------------------------
DO $policies$
DECLARE r record;
BEGIN
    FOR r IN SELECT p.polname, c.relname FROM pg_catalog.pg_policy AS p
               JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) p.polrelid
              WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('broker')
                -- (broker_admin_all is sql/roles.sql's, not the extension's: it stays)
                AND p.polname OPERATOR(pg_catalog.<>) 'broker_admin_all'
    LOOP
        EXECUTE pg_catalog.format('DROP POLICY %I ON broker.%I', r.polname, r.relname);
    END LOOP;
END
$policies$;
\i-under sql/pgsql_broker.sql sql/security/policies/

-- Privileges (new functions too; the broker roles get theirs from sql/roles.sql)
\i sql/security/grants.sql
