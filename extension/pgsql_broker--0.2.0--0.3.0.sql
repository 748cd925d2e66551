-- pgsql_broker upgrade: generated from sql/upgrades/pgsql_broker--0.2.0--0.3.0.sql by make; do not edit.
\echo Use "ALTER EXTENSION pgsql_broker UPDATE" to load this file. \quit
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
-- source: sql/guards/objects_are_the_brokers.sql
-- sql/guards/objects_are_the_brokers.sql: upgrade guard: schema broker holds only what pgsql_broker made.
-- ---------------------------------------------------------------------------
-- Upgrade guard: schema broker holds only what pgsql_broker made. An upgrade
-- (and sql/roles.sql, which repeats this check) must not carry on over, or
-- hand to broker_admin, an object someone else put there (say an install
-- into a schema made beforehand by another role). Made by the broker means:
-- with CREATE EXTENSION, a member of the extension (pg_depend deptype 'e'),
-- in a schema owned by the extension's owner, broker_admin or a superuser;
-- with tracked migrations, a table, function or type owned by the schema's owner
-- or broker_admin, in a schema owned by a superuser, broker_admin or the
-- upgrading role. Anything else stops the upgrade (42501, naming it).
-- ---------------------------------------------------------------------------
DO $guard$
DECLARE
    v_schema oid := pg_catalog.to_regnamespace('broker');
    v_ext    oid := (SELECT e.oid FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'pgsql_broker');
    v_admin  oid := pg_catalog.to_regrole('broker_admin');
    v_owner  oid := (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.oid OPERATOR(pg_catalog.=) v_schema);
    v_found  text;
BEGIN
    -- (= ANY of an array holding NULLs is NULL, not false, when nothing matches: hence COALESCE)
    IF NOT (COALESCE(v_owner OPERATOR(pg_catalog.=) ANY (ARRAY[v_admin,
                (SELECT e.extowner FROM pg_catalog.pg_extension AS e WHERE e.oid OPERATOR(pg_catalog.=) v_ext),
                CASE WHEN v_ext IS NULL THEN (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                               WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) END]), false)
            OR (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) v_owner)) THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker is owned by %, which did not install pgsql_broker',
            v_owner::pg_catalog.regrole
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'It was made before the install by another role: move your data out and drop it.';
    END IF;
    SELECT pg_catalog.string_agg((i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity) OPERATOR(pg_catalog.||)
                                 COALESCE(' (owner ' OPERATOR(pg_catalog.||) COALESCE(c.relowner, p.proowner, t.typowner)::pg_catalog.regrole::pg_catalog.text
                                          OPERATOR(pg_catalog.||) ')', ''), ', '
                                 ORDER BY (i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity))
      INTO v_found
      FROM pg_catalog.pg_depend AS d
     CROSS JOIN LATERAL pg_catalog.pg_identify_object(d.classid, d.objid, 0) AS i
      LEFT JOIN pg_catalog.pg_class AS c
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid OPERATOR(pg_catalog.=) d.objid
      LEFT JOIN pg_catalog.pg_proc AS p
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid OPERATOR(pg_catalog.=) d.objid
      LEFT JOIN pg_catalog.pg_type AS t
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid OPERATOR(pg_catalog.=) d.objid
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) v_schema
       AND NOT (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                AND COALESCE(d.objid OPERATOR(pg_catalog.=) v_ext, false))
       AND NOT CASE WHEN v_ext IS NOT NULL
                    THEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS m
                                  WHERE m.classid OPERATOR(pg_catalog.=) d.classid AND m.objid OPERATOR(pg_catalog.=) d.objid
                                    AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                    AND m.refobjid OPERATOR(pg_catalog.=) v_ext AND m.deptype OPERATOR(pg_catalog.=) 'e')
                    ELSE COALESCE(COALESCE(c.relowner, p.proowner, t.typowner) OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_admin]), false)
               END;
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker holds objects pgsql_broker did not create: %', pg_catalog.left(v_found, 1000)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Find out who made them and why, and drop them; nothing was changed.';
    END IF;
END
$guard$;
-- source: sql/guards/installer_default_privileges.sql
-- sql/guards/installer_default_privileges.sql: install and upgrade guard: the installing role's default privileges give nobody the broker.
-- ---------------------------------------------------------------------------
-- Install and upgrade guard: what this script creates gets the default
-- privileges of the role running it, and those set for every schema (ALTER
-- DEFAULT PRIVILEGES without IN SCHEMA, as for a read-only or reporting role)
-- reach into schema broker too. sql/security/grants.sql and sql/roles.sql
-- take everything from PUBLIC, not from other roles, so a role granted
-- EXECUTE on functions and USAGE on schemas that way could call broker_get
-- (SECURITY DEFINER) and claim every tenant's jobs. So the script stops
-- (55000, nothing created) while the running role has default privileges
-- for every schema that grant to another role; defaults that only take from
-- PUBLIC, or that name another schema, are fine.
-- ---------------------------------------------------------------------------
DO $guard$
DECLARE
    v_found text;
BEGIN
    SELECT pg_catalog.string_agg(DISTINCT pg_catalog.format('%s on %s to %s', a.privilege_type,
               CASE WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'r' THEN 'tables'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'S' THEN 'sequences'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'f' THEN 'functions'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'T' THEN 'types'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'n' THEN 'schemas' ELSE 'objects' END,
               a.grantee::pg_catalog.regrole), ', ')
      INTO v_found
      FROM pg_catalog.pg_default_acl AS d, pg_catalog.aclexplode(d.defaclacl) AS a
     WHERE d.defaclrole OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                                 WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
       AND d.defaclnamespace OPERATOR(pg_catalog.=) 0
       AND a.grantee OPERATOR(pg_catalog.<>) ALL (ARRAY[0, d.defaclrole]::pg_catalog.oid[]);
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'pgsql_broker: the installing role % has default privileges for every schema that would grant what this creates in schema broker: %; nothing was changed',
            pg_catalog.quote_ident(CURRENT_USER), pg_catalog.left(v_found, 1000)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run it as a role without them, or remove them for the install (ALTER DEFAULT PRIVILEGES REVOKE ...; psql \ddp lists them) and set them again IN SCHEMA the schemas they are meant for.';
    END IF;
END
$guard$;

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
-- source: sql/tables/broker_claim_hint.sql
-- sql/tables/broker_claim_hint.sql: per queue, where each tenant's ready jobs start in claim order as of a snapshot.
-- ---------------------------------------------------------------------------
-- Type: broker._claim_position
--   Where a tenant's ready jobs of a queue start in claim order (priority,
--   then run_after, then job_id), as a claim's probe found it.
-- ---------------------------------------------------------------------------
CREATE TYPE broker._claim_position AS (
    tenant_id    text,
    job_priority integer,
    run_after    timestamptz,
    job_id       bigint
);
COMMENT ON TYPE broker._claim_position IS
    'Internal: where a tenant''s ready jobs of a queue start in claim order (broker_claim_hint).';

-- ---------------------------------------------------------------------------
-- Table: broker.broker_claim_hint
--   Per queue: where each tenant's pending, unblocked, unparked jobs start
--   in claim order, as a snapshot saw them: every such job of a tenant that
--   `snapshot` sees is at or after the tenant's position (highest priority
--   first, then earliest run_after, then lowest job_id); a tenant missing
--   from positions had none. Jobs made ready later carry a ready_xid that
--   the snapshot does not see, and are found through
--   broker_jobs_ready_xid_idx. A claim starts each tenant at its position
--   instead of at the start of the claim index, so it does not step over
--   the index entries of the jobs claimed before (which a snapshot held
--   elsewhere keeps from being removed). broker_get writes it, at most once
--   per 100 transactions of the cluster; a hint stays true however old it
--   gets, only less useful. started_at is pg_postmaster_start_time() when it
--   was written: a hint of another server (a dump restored elsewhere) is
--   never used. Derived data: not dumped, no role is granted anything on it.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_claim_hint (
    job_queue    integer     NOT NULL,
    started_at   timestamptz NOT NULL,
    snapshot     pg_snapshot NOT NULL,
    positions    broker._claim_position[] NOT NULL,
    CONSTRAINT broker_claim_hint_pkey PRIMARY KEY (job_queue)
);
COMMENT ON TABLE broker.broker_claim_hint IS
    'Per queue: where each tenant''s ready jobs start in claim order, as of a snapshot (written by broker_get; derived, not dumped).';
COMMENT ON COLUMN broker.broker_claim_hint.job_queue IS 'Queue.';
COMMENT ON COLUMN broker.broker_claim_hint.started_at IS 'pg_postmaster_start_time() of the server that wrote it (a hint of another server is ignored).';
COMMENT ON COLUMN broker.broker_claim_hint.snapshot IS 'The snapshot the positions hold for: every ready job it saw is at or after its tenant''s position.';
COMMENT ON COLUMN broker.broker_claim_hint.positions IS 'Per tenant with ready jobs then: the first of them in claim order.';

-- New tables: key limits, tenant weights, task names' queues and their tenants.
-- source: sql/tables/broker_key_limit.sql
-- ---------------------------------------------------------------------------
-- Table: broker.broker_key_limit
--   Limits on concurrency keys (broker_jobs.concurrency_key): how many of a
--   key's jobs may be claimed at once (max_running: from the claim to the
--   job's end) and how many may start per second (a token bucket of
--   per_second, holding at most burst). A row with a tenant limits that
--   tenant's jobs of the key (broker_set_limit); a row with tenant_id NULL
--   limits the key's jobs of every tenant together (administrators only).
--   tokens and tokens_at are the bucket as the last claim left it; wake_at is
--   when a job parked for want of a token may start (the claim unparks them
--   then). Written by broker_set_limit and the claim.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_key_limit (
    tenant_id       text             DEFAULT broker.broker_current_tenant(),
    concurrency_key text             NOT NULL,
    max_running     integer,
    per_second      double precision,
    burst           integer,
    tokens          double precision,
    tokens_at       timestamptz,
    wake_at         timestamptz,
    set_by          name             NOT NULL DEFAULT CURRENT_USER,
    set_at          timestamptz      NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_key_limit_key UNIQUE NULLS NOT DISTINCT (concurrency_key, tenant_id),
    CONSTRAINT broker_key_limit_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200),
    CONSTRAINT broker_key_limit_max_running_check CHECK (max_running OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_key_limit_per_second_check
        CHECK (per_second OPERATOR(pg_catalog.>) 0 AND per_second OPERATOR(pg_catalog.<=) 1000000),
    CONSTRAINT broker_key_limit_burst_check CHECK (burst OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_key_limit_some_check CHECK (max_running IS NOT NULL OR per_second IS NOT NULL),
    CONSTRAINT broker_key_limit_rate_check CHECK ((per_second IS NULL) OPERATOR(pg_catalog.=) (burst IS NULL))
);
CREATE INDEX broker_key_limit_wake_idx ON broker.broker_key_limit (wake_at) WHERE wake_at IS NOT NULL;

COMMENT ON TABLE broker.broker_key_limit IS
    'Limits on concurrency keys: jobs claimed at once and starts per second, per tenant or (tenant_id NULL) across tenants.';
COMMENT ON COLUMN broker.broker_key_limit.tenant_id IS 'The tenant whose jobs of the key are limited; NULL: every tenant''s together.';
COMMENT ON COLUMN broker.broker_key_limit.concurrency_key IS 'The key (broker_jobs.concurrency_key).';
COMMENT ON COLUMN broker.broker_key_limit.max_running IS 'At most this many of the key''s jobs claimed at once (claim to end); NULL: no cap.';
COMMENT ON COLUMN broker.broker_key_limit.per_second IS 'Starts per second (token bucket refill); NULL: no rate.';
COMMENT ON COLUMN broker.broker_key_limit.burst IS 'Tokens the bucket holds at most (default: per_second rounded up).';
COMMENT ON COLUMN broker.broker_key_limit.tokens IS 'Tokens left at tokens_at.';
COMMENT ON COLUMN broker.broker_key_limit.tokens_at IS 'When tokens was computed.';
COMMENT ON COLUMN broker.broker_key_limit.wake_at IS 'When the next token is due for jobs parked for want of one (NULL: none parked).';
COMMENT ON COLUMN broker.broker_key_limit.set_by IS 'Role that set the limit.';
COMMENT ON COLUMN broker.broker_key_limit.set_at IS 'When.';
COMMENT ON INDEX broker.broker_key_limit_wake_idx IS 'Keys whose parked jobs get a token at wake_at (the claim unparks them).';
-- source: sql/tables/broker_tenant_weight.sql
-- ---------------------------------------------------------------------------
-- Table: broker.broker_tenant_weight
--   A tenant's weight in the fair share of a queue's claims (default 1 for a
--   tenant without a row): each claim serves the tenants that have claimable
--   jobs in proportion to their weights (broker_get). Written by
--   broker_set_tenant_weight, administrators only.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_tenant_weight (
    tenant_id text        NOT NULL,
    weight    integer     NOT NULL,
    set_by    name        NOT NULL DEFAULT CURRENT_USER,
    set_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_tenant_weight_pkey PRIMARY KEY (tenant_id),
    CONSTRAINT broker_tenant_weight_weight_check
        CHECK (weight OPERATOR(pg_catalog.>=) 1 AND weight OPERATOR(pg_catalog.<=) 1000)
);
COMMENT ON TABLE broker.broker_tenant_weight IS
    'Tenants'' weights in the fair share of each queue''s claims (1 to 1000; 1 without a row).';
COMMENT ON COLUMN broker.broker_tenant_weight.tenant_id IS 'The tenant.';
COMMENT ON COLUMN broker.broker_tenant_weight.weight IS 'Its weight (1 to 1000).';
COMMENT ON COLUMN broker.broker_tenant_weight.set_by IS 'Administrator who set it.';
COMMENT ON COLUMN broker.broker_tenant_weight.set_at IS 'When.';
-- source: sql/tables/broker_task_queue.sql
-- ---------------------------------------------------------------------------
-- Table: broker.broker_task_queue
--   Each task name's own claim queue. A task (broker_jobs.job_language
--   'task', sql/tasks/) is claimed by name (broker_claim_tasks), so each name
--   is a queue of the claim machinery: its jobs sit in broker_jobs under the
--   negative job_queue given here, which no runner serves (runners claim
--   queues 1 to 1000). So a name's backlog never slows the claims of another
--   name, and fair share between tenants, key limits, parking and the claim
--   hint hold for tasks as they do for SQL jobs. Rows are made on the first
--   enqueue of a name (broker._task_queue) and never change.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_task_queue (
    task_name  text        NOT NULL,
    job_queue  integer     NOT NULL GENERATED ALWAYS AS IDENTITY (MINVALUE -2147483648 MAXVALUE -1 START WITH -1 INCREMENT BY -1),
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_task_queue_pkey PRIMARY KEY (task_name),
    CONSTRAINT broker_task_queue_job_queue_key UNIQUE (job_queue),
    CONSTRAINT broker_task_queue_task_name_check
        CHECK (pg_catalog.btrim(task_name) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(task_name) OPERATOR(pg_catalog.<=) 200)
);
-- (no planner statistics of the names: a tenant sees only the names it uses, and a histogram of them
-- would show the others' to its EXPLAIN estimates, text comparison being leakproof)
ALTER TABLE broker.broker_task_queue ALTER COLUMN task_name SET STATISTICS 0;
COMMENT ON TABLE broker.broker_task_queue IS
    'Each task name''s claim queue: its tasks sit in broker_jobs under this negative job_queue, which no runner serves.';
COMMENT ON COLUMN broker.broker_task_queue.task_name IS 'The task name (1 to 200 characters).';
COMMENT ON COLUMN broker.broker_task_queue.job_queue IS 'Its queue in broker_jobs (negative: tasks only).';
COMMENT ON COLUMN broker.broker_task_queue.created_at IS 'When the name was first enqueued.';
-- source: sql/tables/broker_task_name_tenant.sql
-- ---------------------------------------------------------------------------
-- Table: broker.broker_task_name_tenant
--   Which tenants use which task names: a row for each tenant that enqueued,
--   scheduled or paused tasks of a name (broker._task_queue writes it, with
--   the name's queue). Task names are one namespace per database (a name has
--   one queue, whichever tenants use it), but a tenant sees only the names
--   it uses itself: broker_task_queue's policy reads this table, whose own
--   policy shows a tenant its rows. So a name says nothing of another
--   tenant's work. Rows are never changed; retention leaves them (a name
--   stays the tenant's after its tasks are purged).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_task_name_tenant (
    tenant_id  text        NOT NULL,
    task_name  text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_task_name_tenant_pkey PRIMARY KEY (tenant_id, task_name),
    CONSTRAINT broker_task_name_tenant_task_name_fkey FOREIGN KEY (task_name)
        REFERENCES broker.broker_task_queue (task_name)
);
-- (no planner statistics of the names: a tenant sees only the names it uses, and a histogram of them
-- would show the others' to its EXPLAIN estimates, text comparison being leakproof)
ALTER TABLE broker.broker_task_name_tenant ALTER COLUMN task_name SET STATISTICS 0;
-- (the foreign key's own index: its checks, and the name's tenants for an administrator)
CREATE INDEX broker_task_name_tenant_task_name_idx ON broker.broker_task_name_tenant (task_name);
COMMENT ON TABLE broker.broker_task_name_tenant IS
    'The task names each tenant uses (enqueued, scheduled or paused): a tenant sees only these in broker_task_queue.';
COMMENT ON COLUMN broker.broker_task_name_tenant.tenant_id IS 'The tenant.';
COMMENT ON COLUMN broker.broker_task_name_tenant.task_name IS 'A task name it uses (broker_task_queue).';
COMMENT ON COLUMN broker.broker_task_name_tenant.created_at IS 'When the tenant first used the name.';
-- pg_dump registration of every data table: a table 0.2.0 registered keeps its entry (it is
-- replaced in place), the new ones are added.
-- source: sql/tables/dump.sql
-- sql/tables/dump.sql: pg_dump registration of the data tables (CREATE EXTENSION only).
-- ---------------------------------------------------------------------------
-- pg_dump: the rows of extension tables are not dumped unless registered as
-- configuration tables. Register every table that holds user data, and the
-- identity sequences behind them, so a dump/restore keeps jobs, schedules,
-- tenant mappings and options. pg_extension_config_dump() only exists inside
-- CREATE EXTENSION, so `pgsql-broker install --no-extension` leaves this block
-- out (there, the tables are ordinary tables and pg_dump dumps them anyway).
-- ---------------------------------------------------------------------------
-- <extension-only>
SELECT pg_catalog.pg_extension_config_dump('broker.broker_jobs', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_jobs_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_dependency', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_dependency_dependency_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_deferred_release', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_deferred_release_release_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_schedule', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_schedule_schedule_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_queueinstance', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_queueinstance_instance_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_schema_migrations', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_tenant_roles', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_config', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_attempts', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_attempts_attempt_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_actions', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_job_actions_action_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_queue_pause', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_key_limit', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_tenant_weight', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_autonomous_role', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_task_queue', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_task_queue_job_queue_seq', '');
SELECT pg_catalog.pg_extension_config_dump('broker.broker_task_name_tenant', '');
-- </extension-only>

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
-- broker._claimable: a new signature, created plain
DROP FUNCTION broker._claimable_by_xid(smallint, integer);
-- broker._claimable_by_xid: a new signature, created plain
-- the hint holds a position per tenant (broker._claim_position[])
DROP FUNCTION broker._save_claim_hint(integer, pg_snapshot, integer, timestamptz, bigint);
-- broker._save_claim_hint: a new signature, created plain
-- the cycle check takes its cap on edges (p_max_edges)
DROP FUNCTION broker._dependency_cycle(bigint[], integer);
-- broker._dependency_cycle: a new signature, created plain
-- every enqueue path and the schedules take p_concurrency_key (trailing)
DROP FUNCTION broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text,
                                    text[], timestamptz, interval, text, text, boolean);
-- broker.broker_add_job: a new signature, created plain
DROP FUNCTION broker._jobs_of_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[],
                                     text[], text);
-- broker._jobs_of_arrays: a new signature, created plain
DROP FUNCTION broker.broker_add_jobs_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[],
                                            interval[], text[], text, text);
-- broker.broker_add_jobs_arrays: a new signature, created plain
DROP FUNCTION broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                                         text, boolean, interval, text, text, boolean);
-- broker.broker_add_schedule: a new signature, created plain
DROP FUNCTION broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer,
                                           text, interval, text, text, boolean, text);
-- broker.broker_alter_schedule: a new signature, created plain
-- a claim may name its lease token (p_lease_token: a claim whose answer was lost is handed back whole)
DROP FUNCTION broker.broker_get(integer, bigint, integer, integer);
-- broker.broker_get: a new signature, created plain
DROP FUNCTION broker.broker_claim_batches(integer, bigint, integer, integer, interval, boolean, integer);
-- broker.broker_claim_batches: a new signature, created plain
-- a hand-back may mark the jobs to run alone (p_run_alone)
DROP FUNCTION broker.broker_release_jobs(bigint[], uuid[]);
-- broker.broker_release_jobs: a new signature, created plain
-- a completed job's rows_affected is returned (traces)
DROP FUNCTION broker.broker_run_batch(bigint[], uuid[], interval);
-- broker.broker_run_batch: a new signature, created plain

-- ---------------------------------------------------------------------------
-- Every function (and its triggers), as in sql/pgsql_broker.sql
-- ---------------------------------------------------------------------------
-- source: sql/core/settings.sql
-- sql/core/settings.sql: database-wide options (broker_config) and their reader.
-- ---------------------------------------------------------------------------
-- Function: broker._setting_int(p_name, p_default, p_min)
--   The integer option p_name from broker_config, or p_default when unset.
--   Calls: none
--   Tables: reads broker_config
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._setting_int(p_name text, p_default integer, p_min integer)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN GREATEST(COALESCE((SELECT c.value::integer FROM broker.broker_config AS c
                               WHERE c.setting OPERATOR(pg_catalog.=) p_name), p_default), p_min);
END;
$$;
COMMENT ON FUNCTION broker._setting_int(text, integer, integer) IS
    'Internal: integer option from broker_config, or the default when unset.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set(p_setting, p_value, p_is_local)
--   Sets a broker option and returns the value now in force.
--     application_name    the session's application_name (p_is_local: this
--                         transaction only)
--     tenant_id           same as broker_set_tenant (always transaction-local)
--     lease_seconds       default lease of broker_get (default 60)
--     retry_base_seconds  first retry delay, doubling per attempt (default 5)
--     retry_max_seconds   upper bound of the retry delay (default 3600)
--     max_schedules_per_tenant  schedules a tenant may have (default 1000)
--   The last four are database-wide options in broker_config: only roles
--   that may write it (broker_admin, superusers) can set them, and they take
--   effect when the transaction commits.
-- Errors: 22023 unknown option or invalid value; 22004 NULL value;
--   42501 no right to change database-wide options.
-- Example:
--   SELECT broker.broker_set('application_name', 'nightly-etl');
--   SELECT broker.broker_set('retry_max_seconds', '600');   -- broker_admin: database-wide
--   Calls: broker_set_tenant
--   Tables: writes broker_config
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_set(p_setting text, p_value text, p_is_local boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_setting text := pg_catalog.lower(pg_catalog.btrim(p_setting));
    v_min     integer;
    v_val     integer;
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION 'broker_set: value for % must not be NULL', p_setting
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_setting OPERATOR(pg_catalog.=) 'tenant_id' THEN
        RETURN broker.broker_set_tenant(p_value);
    ELSIF v_setting OPERATOR(pg_catalog.=) 'application_name' THEN
        RETURN pg_catalog.set_config('application_name', p_value, COALESCE(p_is_local, false));
    ELSIF v_setting OPERATOR(pg_catalog.=) ANY (ARRAY['lease_seconds', 'retry_base_seconds', 'retry_max_seconds',
                                                    'max_schedules_per_tenant']) THEN
        v_min := CASE v_setting WHEN 'retry_base_seconds' THEN 0 ELSE 1 END;
        BEGIN
            v_val := p_value::integer;
        EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
            v_val := NULL;
        END;
        IF v_val IS NULL OR v_val OPERATOR(pg_catalog.<) v_min OR v_val OPERATOR(pg_catalog.>) 999999999 THEN
            RAISE EXCEPTION 'broker_set: % must be an integer from % to 999999999, got %', v_setting, v_min,
                pg_catalog.quote_literal(p_value)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT pg_catalog.has_table_privilege('broker.broker_config', 'INSERT, UPDATE') THEN
            RAISE EXCEPTION 'broker_set: % is a database-wide option; only broker_admin may change it', v_setting
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        INSERT INTO broker.broker_config AS c (setting, value) VALUES (v_setting, v_val::text)
        ON CONFLICT (setting) DO UPDATE SET value = EXCLUDED.value;
        RETURN v_val::text;
    END IF;
    RAISE EXCEPTION 'broker_set: unknown setting %', pg_catalog.quote_literal(p_setting)
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Known settings: lease_seconds, retry_base_seconds, retry_max_seconds, max_schedules_per_tenant, application_name, tenant_id.';
END;
$$;
COMMENT ON FUNCTION broker.broker_set(text, text, boolean) IS
    'Sets application_name or tenant_id for the session/transaction, or (broker_admin) the database-wide options lease_seconds, retry_base_seconds, retry_max_seconds, max_schedules_per_tenant; returns the value in force.';
-- source: sql/core/states.sql
-- sql/core/states.sql: the job states by name, and what "claimable" means.
-- ---------------------------------------------------------------------------
-- Job states (broker_jobs.complete_status; drawn in docs/state-machine.md):
--   0 pending    waiting to be claimed (claimable once pending_deps = 0 and run_after is reached)
--   1 running    claimed, under a lease
--   2 completed  final
--   3 failed     final: its last attempt failed
--   4 cancelled  final: cancelled, or a dependency of it failed or was cancelled
-- Function bodies name states with broker._state('name'). The table's CHECK
-- constraints, index predicates and policies keep the numbers (a partial
-- index is used only when the query's predicate matches it literally).
-- Both functions are SQL without SET search_path so that the planner inlines
-- them (and folds _state of a literal to a constant): they cost nothing in
-- the claim; every operator in them is schema-qualified.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._state(p_name)
--   The complete_status of state p_name (pending, running, completed, failed,
--   cancelled); NULL for any other name.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._state(p_name text)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_name OPERATOR(pg_catalog.=) 'pending' THEN 0
                WHEN p_name OPERATOR(pg_catalog.=) 'running' THEN 1
                WHEN p_name OPERATOR(pg_catalog.=) 'completed' THEN 2
                WHEN p_name OPERATOR(pg_catalog.=) 'failed' THEN 3
                WHEN p_name OPERATOR(pg_catalog.=) 'cancelled' THEN 4 END
$$;
COMMENT ON FUNCTION broker._state(text) IS
    'Internal: the complete_status number of a job state by name (pending 0, running 1, completed 2, failed 3, cancelled 4).';

-- ---------------------------------------------------------------------------
-- Function: broker._parked(p_name)
--   The broker_jobs.parked number of a reason a pending job is kept out of
--   the claim index: none 0, later 1 (until its run_after), cap 2 (its
--   concurrency key at its cap), rate 3 (its key out of tokens).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._parked(p_name text)
RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (CASE WHEN p_name OPERATOR(pg_catalog.=) 'none' THEN 0
                 WHEN p_name OPERATOR(pg_catalog.=) 'later' THEN 1
                 WHEN p_name OPERATOR(pg_catalog.=) 'cap' THEN 2
                 WHEN p_name OPERATOR(pg_catalog.=) 'rate' THEN 3 END)::smallint
$$;
COMMENT ON FUNCTION broker._parked(text) IS
    'Internal: the parked number of a reason a pending job is out of the claim index (none 0, later 1, cap 2, rate 3).';

-- ---------------------------------------------------------------------------
-- Function: broker._due_time()
--   The time a write takes a job's run_after against: a job dated after it
--   is parked later, one dated at or before it is due (and its queue is
--   notified). The statement's start, or its transaction's when that is
--   later: a procedure that commits goes on in a new transaction under the
--   same statement, and a job it then enqueues for now() (its default) is
--   due, not dated after the CALL began. In an ordinary transaction the
--   statement starts last, so this is statement_timestamp(). SQL without
--   SET search_path, so that it is inlined; the parking trigger's WHEN
--   writes the same expression out (a function call there is inlined again
--   at every INSERT statement).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._due_time()
RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT GREATEST(pg_catalog.statement_timestamp(), pg_catalog.transaction_timestamp()) $$;
COMMENT ON FUNCTION broker._due_time() IS
    'Internal: the time a write compares run_after with (the statement''s start, or its transaction''s when later, as in a procedure after COMMIT).';

-- ---------------------------------------------------------------------------
-- Function: broker._claimable(p_complete_status, p_pending_deps, p_parked)
--   Whether a job may be claimed, run_after aside: pending, waiting on no
--   dependency, and not parked (by its run_after or its key's limit). The
--   claim index broker_jobs_claim_idx has this predicate written out
--   (sql/tables/broker_jobs.sql), and so has the WHEN of the trigger
--   broker_jobs_ready_xid_trg (sql/run/claim_hint.sql; held to it by
--   tests_sql/run/ready_xid_trigger_condition_is_claimable_written_out.sql);
--   inlined, this function is the same
--   expression, so the claim still uses that index
--   (tests_sql/run/claim_is_index_backed.sql).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claimable(p_complete_status smallint, p_pending_deps integer, p_parked smallint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_complete_status OPERATOR(pg_catalog.=) 0 AND p_pending_deps OPERATOR(pg_catalog.=) 0
           AND p_parked OPERATOR(pg_catalog.=) 0
$$;
COMMENT ON FUNCTION broker._claimable(smallint, integer, smallint) IS
    'Internal: pending, waiting on no unfinished dependency and not parked (the claim index predicate, inlined).';

-- ---------------------------------------------------------------------------
-- Function: broker._claimable_by_xid(p_complete_status, p_pending_deps, p_parked)
--   _claimable written with <= (the same rows: the CHECKs keep the three
--   columns >= 0), the predicate of broker_jobs_ready_xid_idx. A claim that
--   looks for the jobs made ready since its queue's hint says this, not
--   _claimable, so that no index but that one matches: with the claim
--   index's predicate the planner could read the claim index in claim order
--   and filter on ready_xid, over every ready job (sql/run/claim.sql).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claimable_by_xid(p_complete_status smallint, p_pending_deps integer, p_parked smallint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_complete_status OPERATOR(pg_catalog.<=) 0 AND p_pending_deps OPERATOR(pg_catalog.<=) 0
           AND p_parked OPERATOR(pg_catalog.<=) 0
$$;
COMMENT ON FUNCTION broker._claimable_by_xid(smallint, integer, smallint) IS
    'Internal: _claimable written with <= (the predicate of broker_jobs_ready_xid_idx, inlined), for the jobs a claim adds to its queue''s hint.';

-- ---------------------------------------------------------------------------
-- Function: broker._claimable_by_id(p_complete_status, p_pending_deps, p_parked)
--   _claimable written so that no partial index's predicate matches it (in a
--   CASE, which the planner does not prove index predicates from; the
--   columns are NOT NULL, so the rows are the same). A statement
--   that locks given jobs (by their row versions, the claim's lock in
--   sql/run/claim_lane.sql) says this: with _claimable, a generic plan can
--   read the whole claim index and filter on the given rows instead of
--   fetching each.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claimable_by_id(p_complete_status smallint, p_pending_deps integer, p_parked smallint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_complete_status OPERATOR(pg_catalog.=) 0 AND p_pending_deps OPERATOR(pg_catalog.=) 0
                     AND p_parked OPERATOR(pg_catalog.=) 0 THEN true ELSE false END
$$;
COMMENT ON FUNCTION broker._claimable_by_id(smallint, integer, smallint) IS
    'Internal: _claimable written so that no partial index matches it, for statements that lock given jobs (inlined).';
-- source: sql/core/lock_keys.sql
-- sql/core/lock_keys.sql: the advisory-lock keys (dependency groups and jobs, the active instance, the
-- finished counts' merge, concurrency keys).
-- ---------------------------------------------------------------------------
-- Function: broker._dependency_lock_key(p_tenant_id, p_group, p_job_id)
--   The one place the dependency-lock key of a group (p_group) or of a job
--   id (p_job_id, when p_group is NULL) of a tenant is computed; every taker
--   of these locks calls it. A bigint advisory key: the high 32 bits are the
--   tenant's (hashtext of its name), the low 32 bits 'br' (0x6272) then one
--   of 1,024 buckets for groups, one of 1,024 more for job ids. So two
--   tenants never share a key (unless their names hash alike: strict tenancy
--   names are the administrator's, see README), a tenant holds at most 2,048
--   keys, and, within a tenant, group keys sort before job keys.
--   SQL without SET search_path on purpose: the planner inlines it into the
--   queries that take the keys (the jobs' INSERT trigger computes one per new
--   job); every function and operator is schema-qualified.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._dependency_lock_key(p_tenant_id text, p_group text, p_job_id bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (pg_catalog.hashtext(p_tenant_id)::bigint OPERATOR(pg_catalog.<<) 32)
           OPERATOR(pg_catalog.|)
           (1651638272 OPERATOR(pg_catalog.+)  -- 0x62720000
            CASE WHEN p_group IS NOT NULL THEN pg_catalog.hashtext(p_group) OPERATOR(pg_catalog.&) 1023
                 ELSE 1024 OPERATOR(pg_catalog.+) (pg_catalog.hashint8(p_job_id) OPERATOR(pg_catalog.&) 1023) END)::bigint
$$;
COMMENT ON FUNCTION broker._dependency_lock_key(text, text, bigint) IS
    'Internal: the advisory key (bigint, tenant in the high half) of a group, or of a job id, of a tenant; no two tenants share one.';

-- ---------------------------------------------------------------------------
-- Function: broker._instance_lock_key()
--   The session advisory lock (two int4 keys) that the active instance holds.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._instance_lock_key(OUT classid integer, OUT objid integer)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 1651665664, 0 $$;
COMMENT ON FUNCTION broker._instance_lock_key() IS
    'Internal: advisory lock key held by the active runner instance of this database.';

-- ---------------------------------------------------------------------------
-- Function: broker._finished_merge_lock_key()
--   The transaction advisory lock (two int4 keys) that one merge of the
--   finished counts at a time holds (broker._merge_finished_counts). Its
--   class is the instance lock's; objid 0 is that lock, 1 the installer's
--   (pgsql-broker install holds it while it migrates, before this schema
--   may exist: runner/pgsql_broker/install/installer.py), 2 this one.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_merge_lock_key(OUT classid integer, OUT objid integer)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 1651665664, 2 $$;
COMMENT ON FUNCTION broker._finished_merge_lock_key() IS
    'Internal: advisory lock key of the merge of the finished counts (one merge at a time).';

-- ---------------------------------------------------------------------------
-- Function: broker._key_lock_key(p_tenant_id, p_key)
--   The transaction advisory-lock key of a concurrency key's limit: the
--   tenant's limit on p_key, or, with p_tenant_id NULL, the limit on p_key
--   across tenants. A claim takes it exclusively (never waiting: it passes
--   the key over when it cannot) while it counts the key's running jobs and
--   parks those over the limit; a job that leaves running takes it shared
--   before it unparks the key's parked jobs, so that it sees every job a
--   claim parked. High 32 bits the tenant's hash (0 for every tenant), low
--   32 the key's.
--   SQL without SET search_path on purpose (inlined; every name qualified).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_lock_key(p_tenant_id text, p_key text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (COALESCE(pg_catalog.hashtext(p_tenant_id), 0)::bigint OPERATOR(pg_catalog.<<) 32)
           OPERATOR(pg_catalog.#) (pg_catalog.hashtext('key:' OPERATOR(pg_catalog.||) p_key)::bigint
                                   OPERATOR(pg_catalog.&) 4294967295)
$$;
COMMENT ON FUNCTION broker._key_lock_key(text, text) IS
    'Internal: the advisory-lock key of a tenant''s limit on a concurrency key (p_tenant_id NULL: the limit across tenants).';
-- source: sql/core/notify.sql
-- sql/core/notify.sql: the NOTIFY that wakes runners (channel and payload).
-- ---------------------------------------------------------------------------
-- Runners LISTEN on channel pgsql_broker; the payload is '<database>/<queue>'
-- (a queue has a job to claim), '<database>/cancel/<job id>' (a running job
-- has a cancel request) or '<database>/due' (a job was parked until a time:
-- the runner asks broker_next_due again, so that its poll comes then).
-- broker._notify_queue, broker._notify_cancel and broker._notify_due write
-- them, and nothing else notifies that channel (task workers LISTEN on
-- pgsql_broker_task, where _notify_queue tells a task name's queue,
-- '<database>/<negative queue>', broker_task_queue) (schedule changes have their own, pgsql_broker_schedule:
-- broker._schedule_notify in sql/schedules/schedules.sql). A queue is notified when it gets a job claimable now: by the
-- jobs' INSERT trigger (broker._jobs_after_insert), by releases of
-- dependents, and by the enqueue functions once they have added a job's
-- dependencies.
-- broker.defer_notify: while this transaction-local setting is 'on', the
-- INSERT trigger sends nothing. broker_add_job and broker_add_jobs set it
-- while they insert jobs whose dependency edges they add next (a job that
-- looks claimable at INSERT may not be once its edges are in), reset it, and
-- notify themselves once the edges are counted.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._notify_queue(p_queue)
--   NOTIFY pgsql_broker, '<database>/<queue>'. SQL without SET search_path,
--   so that the planner inlines it into the trigger's one statement; every
--   call and operator is schema-qualified.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._notify_queue(p_queue integer)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    -- (a task's queue is negative: its workers, not the runners, listen on pgsql_broker_task)
    SELECT pg_catalog.pg_notify(CASE WHEN p_queue OPERATOR(pg_catalog.<) 0 THEN 'pgsql_broker_task' ELSE 'pgsql_broker' END,
                                pg_catalog.current_database() OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) p_queue::pg_catalog.text)
$$;
COMMENT ON FUNCTION broker._notify_queue(integer) IS
    'Internal: NOTIFY pgsql_broker, ''<database>/<queue>'' (sent on commit): the one writer of the runners'' wake-up; for a task''s queue (negative), on pgsql_broker_task, its workers'' wake-up.';

-- ---------------------------------------------------------------------------
-- Function: broker._notify_queues(p_queues)
--   Wake-up hint for runners: one NOTIFY on channel pgsql_broker per queue,
--   payload '<database>/<queue>'. Delivered only on commit; PostgreSQL folds
--   identical notifications of one transaction into one.
--   Calls: _notify_queue
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._notify_queues(p_queues integer[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM broker._notify_queue(d.q)
       FROM (SELECT DISTINCT q FROM pg_catalog.unnest(p_queues) AS q WHERE q IS NOT NULL) AS d;
END;
$$;
COMMENT ON FUNCTION broker._notify_queues(integer[]) IS
    'Internal: NOTIFY pgsql_broker, ''<database>/<queue>'' once per distinct queue (sent on commit).';

-- ---------------------------------------------------------------------------
-- Function: broker._notify_cancel(p_job_id)
--   NOTIFY pgsql_broker, '<database>/cancel/<job id>' (sent on commit, so the
--   cancel request is visible when it arrives): the runner executing the job
--   checks the request (broker_cancel_requests) and cancels its statement;
--   every other runner ignores it.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._notify_cancel(p_job_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('pgsql_broker',
                                 pg_catalog.current_database() OPERATOR(pg_catalog.||) '/cancel/' OPERATOR(pg_catalog.||) p_job_id::text);
END;
$$;
COMMENT ON FUNCTION broker._notify_cancel(bigint) IS
    'Internal: NOTIFY pgsql_broker, ''<database>/cancel/<job id>'' (sent on commit): a running job has a cancel request.';

-- ---------------------------------------------------------------------------
-- Function: broker._notify_due()
--   NOTIFY pgsql_broker, '<database>/due' (sent on commit): a job was parked
--   until a time (enqueued or retried for later, or held back by its key's
--   rate until its next tokens), so the time the runner's poll waits for
--   (broker_next_due) may have come nearer; the runner asks it again instead
--   of at its next regular poll. Called by the parking triggers and the
--   claim, never on the path of a job due now.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._notify_due()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('pgsql_broker', pg_catalog.current_database() OPERATOR(pg_catalog.||) '/due');
END;
$$;
COMMENT ON FUNCTION broker._notify_due() IS
    'Internal: NOTIFY pgsql_broker, ''<database>/due'' (sent on commit): a job was parked until a time; runners ask broker_next_due again.';
-- source: sql/tenancy/tenant.sql
-- sql/tenancy/tenant.sql: the current tenant (setting broker.tenant_id); table defaults call it.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_current_tenant()
--   The tenant this transaction acts for: the broker.tenant_id setting, or
--   'default' when it is unset or empty.
--   No SET search_path on purpose: the column defaults and every row-level
--   security policy call it once per row, and only a function without SET
--   clauses is inlined into the query. Every
--   name in it is schema-qualified, so no search_path can change its meaning
--   (listed in sql/pgspot-no-search-path.txt for pgspot).
-- Example:
--   SELECT broker.broker_current_tenant();   -- 'default' unless broker.tenant_id is set
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_current_tenant()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN pg_catalog.current_setting('broker.tenant_id', true) OPERATOR(pg_catalog.<>) ''
                THEN pg_catalog.current_setting('broker.tenant_id', true) ELSE 'default' END
$$;
COMMENT ON FUNCTION broker.broker_current_tenant() IS
    'Tenant of the current transaction: broker.tenant_id, or ''default'' when unset.';

-- ---------------------------------------------------------------------------
-- Function: broker._set_tenant(p_fn, p_tenant_id)
--   The one rule for a tenant id a caller names (broker_set_tenant, and the
--   p_tenant_id of the enqueue and schedule functions): not NULL, 1 to 200
--   characters, not blank. Sets broker.tenant_id for the current transaction
--   (set_config with is_local) and returns it.
-- Errors: 22004 NULL; 22023 blank or longer than 200 characters.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._set_tenant(p_fn text, p_tenant_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_tenant_id IS NULL THEN
        RAISE EXCEPTION '%: tenant id must not be NULL', p_fn
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_tenant_id) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_tenant_id) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION '%: tenant id must be 1 to 200 characters and not blank', p_fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
END;
$$;
COMMENT ON FUNCTION broker._set_tenant(text, text) IS
    'Internal: checks a tenant id (22004 NULL, 22023 blank or over 200 characters) and sets broker.tenant_id for the transaction.';

-- ---------------------------------------------------------------------------
-- Function: broker._call_tenant(p_fn, p_tenant_id)
--   The start of a call that may name its tenant (p_tenant_id of the
--   schedule functions): returns broker.tenant_id as it was, and when
--   p_tenant_id is not NULL sets it by broker._set_tenant's rules.
--   broker._end_call_tenant puts the returned value back.
-- Errors: those of broker._set_tenant.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._call_tenant(p_fn text, p_tenant_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := pg_catalog.current_setting('broker.tenant_id', true);
BEGIN
    IF p_tenant_id IS NOT NULL THEN
        PERFORM broker._set_tenant(p_fn, p_tenant_id);
    END IF;
    RETURN v_saved;
END;
$$;
COMMENT ON FUNCTION broker._call_tenant(text, text) IS
    'Internal: sets the tenant a call names (when not NULL) and returns broker.tenant_id as it was.';

-- ---------------------------------------------------------------------------
-- Function: broker._end_call_tenant(p_tenant_id, p_saved)
--   The end of such a call: when it named a tenant, broker.tenant_id is
--   p_saved again (the transaction's own tenant).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._end_call_tenant(p_tenant_id text, p_saved text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_tenant_id IS NOT NULL THEN
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(p_saved, ''), true);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._end_call_tenant(text, text) IS
    'Internal: after a call that named its tenant, broker.tenant_id as it was before the call.';

-- ---------------------------------------------------------------------------
-- Function: broker._whole_transaction(p_statement_start, p_transaction_start, p_query)
--   Whether a statement is its own transaction, from what the server knows of
--   it (broker_set_tenant hands in statement_timestamp(),
--   transaction_timestamp() and current_query()): its transaction began with
--   the message that carried it (both timestamps are taken once per message)
--   and that message held no other statement. So: true for an autocommit
--   statement sent alone (psql, the simple query protocol), false inside
--   BEGIN ... COMMIT and for several statements sent as one message (their
--   implicit transaction spans them all). A driver's extended protocol sends
--   the statement in messages after the one that began its transaction, so
--   there it is false even in autocommit (docs/security.md#tenants).
--   A semicolon inside a literal counts as a second statement (no warning).
-- Example:
--   SELECT broker._whole_transaction(statement_timestamp(), transaction_timestamp(), current_query());
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._whole_transaction(p_statement_start timestamptz, p_transaction_start timestamptz, p_query text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p_statement_start OPERATOR(pg_catalog.=) p_transaction_start
           AND pg_catalog.strpos(pg_catalog.rtrim(COALESCE(p_query, ''), E'; \t\r\n'), ';') OPERATOR(pg_catalog.=) 0
$$;
COMMENT ON FUNCTION broker._whole_transaction(timestamptz, timestamptz, text) IS
    'Internal: a statement sent alone whose transaction began with it (autocommit), from its start times and query text.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_tenant(p_tenant_id)
--   Sets broker.tenant_id for the current transaction only (set_config with
--   is_local), so a pooled connection never carries a tenant over. Called as
--   its own autocommit statement it changes nothing that follows (the
--   transaction ends with it): it then warns (01000), naming p_tenant_id of
--   the enqueue functions as the way to name a tenant in one call.
-- Errors: 22004 NULL; 22023 blank or longer than 200 characters.
-- Example:
--   BEGIN;
--   SELECT broker.broker_set_tenant('acme');
--   SELECT * FROM broker.broker_add_job('acme report', 'CALL acme.report()');
--   COMMIT;
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_set_tenant(p_tenant_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant text := broker._set_tenant('broker_set_tenant', p_tenant_id);
BEGIN
    IF broker._whole_transaction(pg_catalog.statement_timestamp(), pg_catalog.transaction_timestamp(),
                                 pg_catalog.current_query()) THEN
        RAISE WARNING 'broker_set_tenant: this statement is a transaction of its own: tenant % ends with it', pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = '01000',
                  HINT = 'Call it inside BEGIN ... COMMIT, before the statements it is for, or name the tenant in the call: broker_add_job(..., p_tenant_id => ''acme'').';
    END IF;
    RETURN v_tenant;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_tenant(text) IS
    'Sets broker.tenant_id for the current transaction only; new jobs and queries act for that tenant (warns when it is its own transaction).';
-- source: sql/tenancy/strict.sql
-- sql/tenancy/strict.sql: strict tenancy: which roles may act for which tenant.
-- ---------------------------------------------------------------------------
-- Function: broker._strict_tenancy()
--   True when strict tenancy is on (broker_config.strict_tenancy = 'on').
--   Calls: none
--   Tables: reads broker_config
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._strict_tenancy()
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN COALESCE((SELECT c.value OPERATOR(pg_catalog.=) 'on' FROM broker.broker_config AS c
                      WHERE c.setting OPERATOR(pg_catalog.=) 'strict_tenancy'), false);
END;
$$;
COMMENT ON FUNCTION broker._strict_tenancy() IS 'Internal: whether strict tenancy (broker_tenant_roles) is enforced.';

-- ---------------------------------------------------------------------------
-- Function: broker._tenant_allowed(p_tenant_id, p_role)
--   Policy helper: may p_role act for p_tenant_id? Always true unless strict
--   tenancy is on; then p_role must belong to a role mapped to the tenant in
--   broker_tenant_roles. Policies pass CURRENT_USER, evaluated as the querying
--   role, so a caller cannot answer for someone else.
--   Calls: none
--   Tables: reads broker_config, broker_tenant_roles
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._tenant_allowed(p_tenant_id text, p_role name)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role oid;
BEGIN
    -- (broker._strict_tenancy() inline: every enqueue and every policy check
    -- comes here, and a nested call with its own SET costs more than the query)
    IF NOT COALESCE((SELECT c.value OPERATOR(pg_catalog.=) 'on' FROM broker.broker_config AS c
                      WHERE c.setting OPERATOR(pg_catalog.=) 'strict_tenancy'), false) THEN
        RETURN true;
    END IF;
    -- roles by oid (to_regrole: NULL, not an error, for a name no role has): a p_role that no
    -- longer exists answers false, a mapping left behind by a dropped role is skipped
    -- (pg_has_role raises for an unknown role name, and is strict)
    v_role := pg_catalog.to_regrole(pg_catalog.quote_ident(p_role));
    IF v_role IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM broker.broker_tenant_roles AS m
                    WHERE m.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                      AND pg_catalog.pg_has_role(v_role, pg_catalog.to_regrole(pg_catalog.quote_ident(m.role_name)),
                                                 'MEMBER'));
END;
$$;
COMMENT ON FUNCTION broker._tenant_allowed(text, name) IS
    'Policy helper: true unless strict tenancy is on and p_role belongs to no role mapped to the tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_strict_tenancy(p_enabled)
--   Turns strict tenancy on or off. Runs with the caller's rights: only
--   roles that may write broker_config (broker_admin, superusers) can.
-- Example:
--   INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('acme', 'acme_app');
--   SELECT broker.broker_set_strict_tenancy(true);   -- broker_admin
--   Calls: none
--   Tables: writes broker_config
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_set_strict_tenancy(p_enabled boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'broker_set_strict_tenancy: p_enabled must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    INSERT INTO broker.broker_config AS c (setting, value)
    VALUES ('strict_tenancy', CASE WHEN p_enabled THEN 'on' ELSE 'off' END)
    ON CONFLICT (setting) DO UPDATE SET value = EXCLUDED.value;
    RETURN p_enabled;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_strict_tenancy(boolean) IS
    'Turns strict tenancy on/off (roles may then act only for tenants mapped in broker_tenant_roles); needs write access to broker_config.';
-- source: sql/tenancy/run_as.sql
-- sql/tenancy/run_as.sql: which roles a role may enqueue as (run_as), and when that right is lost.
-- ---------------------------------------------------------------------------
-- Function: broker._can_read_every_tenant(p_role)
--   Whether role p_role is, or is a member of in any way (inheriting or not,
--   directly or through other roles), a superuser, a BYPASSRLS role or
--   broker_admin (whose policies broker_admin_all show it every row). Not
--   only the privileges p_role has count: a job runs as its run_as role
--   without SET ROLE (its executor is SECURITY DEFINER), but ALTER ...
--   OWNER TO needs membership alone, so a job running as a NOINHERIT member
--   of broker_admin could hand a SECURITY DEFINER function to broker_admin
--   (which owns the executor schemas) and call it.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._can_read_every_tenant(p_role oid)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS a
                    WHERE (a.rolsuper OR a.rolbypassrls OR a.rolname OPERATOR(pg_catalog.=) 'broker_admin')
                      AND pg_catalog.pg_has_role(p_role, a.oid, 'MEMBER'));
END;
$$;
COMMENT ON FUNCTION broker._can_read_every_tenant(oid) IS
    'Internal: whether a role is, or is a member of in any way, a superuser, a BYPASSRLS role or broker_admin.';

-- ---------------------------------------------------------------------------
-- Function: broker._may_run_as(p_run_as, p_role)
--   Policy helper: may p_role enqueue jobs that run as p_run_as? It must be a
--   member of it; a target that reads, or may become a role that reads, every
--   tenant (_can_read_every_tenant: a superuser, BYPASSRLS, broker_admin, or
--   a member of one) other than itself needs p_role to be superuser.
--   Calls: _can_read_every_tenant
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._may_run_as(p_run_as name, p_role name)
RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- (PL/pgSQL keeps the query's plan; a SQL function with SET plans it at every statement)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (p_role by oid, to_regrole: a p_role that no longer exists answers false, not an error)
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS t
                    WHERE t.rolname OPERATOR(pg_catalog.=) p_run_as
                      AND pg_catalog.pg_has_role(pg_catalog.to_regrole(pg_catalog.quote_ident(p_role)), t.oid, 'MEMBER')
                      -- (the common case first: a job that runs as its enqueuer needs no role scan)
                      AND (t.rolname OPERATOR(pg_catalog.=) p_role
                           OR NOT broker._can_read_every_tenant(t.oid)
                           OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS s
                                       WHERE s.rolname OPERATOR(pg_catalog.=) p_role AND s.rolsuper)));
END;
$$;
COMMENT ON FUNCTION broker._may_run_as(name, name) IS
    'Policy helper: p_role is a member of p_run_as, and p_run_as neither reads nor may become a role that reads every tenant (superuser, BYPASSRLS, broker_admin) unless p_role is superuser or that role.';

-- ---------------------------------------------------------------------------
-- Function: broker._authority_lost(p_role, p_tenant_id, p_run_as, p_who)
--   Checked again when work enqueued in p_role's name is about to happen (a
--   job about to run: p_role is its enqueued_by; a schedule about to fire:
--   its owner): p_role must still exist, still act for the tenant (strict
--   tenancy) and still be allowed to run jobs as p_run_as (_may_run_as).
--   NULL when all hold, else why not, naming p_role as p_who.
--   Calls: _tenant_allowed, _may_run_as
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._authority_lost(p_role name, p_tenant_id text, p_run_as name, p_who text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN CASE
        WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role)
            THEN pg_catalog.format('%s role %I no longer exists', p_who, p_role)
        WHEN NOT broker._tenant_allowed(p_tenant_id, p_role)
            THEN pg_catalog.format('%s %I may no longer act for tenant %L', p_who, p_role, p_tenant_id)
        WHEN p_run_as OPERATOR(pg_catalog.<>) p_role AND NOT broker._may_run_as(p_run_as, p_role)
            THEN pg_catalog.format('%s %I may no longer run jobs as %I', p_who, p_role, p_run_as) END;
END;
$$;
COMMENT ON FUNCTION broker._authority_lost(name, text, name, text) IS
    'Internal: why p_role (a job''s enqueuer, a schedule''s owner) may no longer have work run as p_run_as in the tenant; NULL when it still may.';

-- ---------------------------------------------------------------------------
-- Function: broker._check_run_as(p_fn, p_run_as)
--   The role a job the current user enqueues may run as (broker_add_job,
--   broker_add_jobs): p_run_as must exist and the caller must be a member of
--   it; a role that reads, or may become by membership a role that reads,
--   every tenant (_can_read_every_tenant) other than the caller only for a
--   superuser. NULL for NULL (the caller itself). Errors start with p_fn.
-- Errors: 42704 unknown role; 42501 not a member, or a privileged role.
--   Calls: _can_read_every_tenant
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._check_run_as(p_fn text, p_run_as text)
RETURNS name
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role record;
BEGIN
    IF p_run_as IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT r.rolname, broker._can_read_every_tenant(r.oid) AS every_tenant
      INTO v_role
      FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_run_as;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: run_as role % does not exist', p_fn, pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(CURRENT_USER, v_role.rolname, 'MEMBER') THEN
        RAISE EXCEPTION '%: role % may not enqueue jobs that run as %', p_fn,
            pg_catalog.quote_ident(CURRENT_USER), pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('Only members of %I may: GRANT %I TO %I.', p_run_as, p_run_as, CURRENT_USER);
    END IF;
    IF v_role.every_tenant AND v_role.rolname OPERATOR(pg_catalog.<>) CURRENT_USER
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION '%: only a superuser may enqueue jobs that run as role %, which reads or may become a role that reads every tenant (superuser, BYPASSRLS or broker_admin)', p_fn,
            pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v_role.rolname;
END;
$$;
COMMENT ON FUNCTION broker._check_run_as(text, text) IS
    'Internal: the run_as role the current user may give a job it enqueues (member of it; privileged roles for superusers only), or an error.';
-- source: sql/tenancy/admin.sql
-- sql/tenancy/admin.sql: who administers the broker (pauses queues for every tenant).
-- ---------------------------------------------------------------------------
-- Function: broker._is_broker_admin(p_role)
--   Policy helper: is p_role an administrator of the broker (a superuser, or
--   a member of broker_admin with its privileges)? Administrators pause a
--   queue for every tenant.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._is_broker_admin(p_role name)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role  oid := pg_catalog.to_regrole(pg_catalog.quote_ident(p_role));
    v_admin oid := pg_catalog.to_regrole('broker_admin');
BEGIN
    IF v_role IS NULL THEN
        RETURN false;
    END IF;
    RETURN COALESCE((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) v_role), false)
        OR (v_admin IS NOT NULL AND pg_catalog.pg_has_role(v_role, v_admin, 'USAGE'));
END;
$$;
COMMENT ON FUNCTION broker._is_broker_admin(name) IS
    'Policy helper: true for a superuser or a role with the privileges of broker_admin.';
-- source: sql/tenancy/autonomous_roles.sql
-- sql/tenancy/autonomous_roles.sql: which roles may run autonomous jobs, and how (the administrator's per-role arrangement).
-- ---------------------------------------------------------------------------
-- Function: broker._autonomous_via(p_role)
--   How jobs of p_role may run autonomously ('set_role' or 'login', see
--   broker_autonomous_role), or NULL when an administrator has not allowed it.
--   Calls: none
--   Tables: reads broker_autonomous_role
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._autonomous_via(p_role name)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- (PL/pgSQL: created before the table, and planned once)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT a.via FROM broker.broker_autonomous_role AS a WHERE a.role_name OPERATOR(pg_catalog.=) p_role);
END;
$$;
COMMENT ON FUNCTION broker._autonomous_via(name) IS
    'Internal: set_role or login when an administrator allowed autonomous jobs for the role (broker_allow_autonomous), else NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_allow_autonomous(p_role, p_via)
--   Lets jobs of p_role run outside a transaction (autonomous jobs), as an
--   administrator's explicit, per-role decision (broker_admin only):
--   * 'set_role' (default): the maintenance statements only. The runner's
--     login runs SET ROLE p_role on a connection of its own, so it must be
--     able to: GRANT p_role TO broker_runtime first. That grant lets every
--     session of the runner's login act as p_role (broker_runtime is
--     NOINHERIT, so it does not use p_role's privileges without SET ROLE).
--   * 'login': CALL too. The runner logs in as p_role with credentials the
--     operator configures for it (the runner's autonomous_logins); no grant.
--   Refused for a role that is a superuser or has BYPASSRLS, CREATEROLE or
--   REPLICATION, or is a member of broker_admin or broker_runtime.
-- Errors: 22004 NULL; 22023 unknown p_via; 42704 unknown role; 42501 a role
--   refused above, or (set_role) broker_runtime not a member of it.
-- Example:
--   GRANT app TO broker_runtime;
--   SELECT broker.broker_allow_autonomous('app');            -- VACUUM, REINDEX ... CONCURRENTLY, ...
--   SELECT broker.broker_allow_autonomous('etl', 'login');   -- CALL etl.load_in_chunks() too
--   Calls: none
--   Tables: writes broker_autonomous_role
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_allow_autonomous(p_role text, p_via text DEFAULT 'set_role')
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role pg_catalog.pg_roles;
    v_via  text := pg_catalog.lower(pg_catalog.btrim(p_via));
BEGIN
    IF p_role IS NULL OR p_via IS NULL THEN
        RAISE EXCEPTION 'broker_allow_autonomous: % must not be NULL', CASE WHEN p_role IS NULL THEN 'p_role' ELSE 'p_via' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_via OPERATOR(pg_catalog.<>) ALL (ARRAY['set_role', 'login']) THEN
        RAISE EXCEPTION 'broker_allow_autonomous: p_via must be set_role or login, got %', pg_catalog.quote_literal(p_via)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_role FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_allow_autonomous: role % does not exist', pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_role.rolsuper OR v_role.rolbypassrls OR v_role.rolcreaterole OR v_role.rolreplication
       OR pg_catalog.pg_has_role(v_role.oid, 'broker_admin', 'MEMBER') OR pg_catalog.pg_has_role(v_role.oid, 'broker_runtime', 'MEMBER') THEN
        RAISE EXCEPTION 'broker_allow_autonomous: role % is privileged (superuser, BYPASSRLS, CREATEROLE, REPLICATION, or a member of broker_admin or broker_runtime)',
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run maintenance as an ordinary role that owns the objects.';
    END IF;
    IF v_via OPERATOR(pg_catalog.=) 'set_role' AND NOT pg_catalog.pg_has_role('broker_runtime', v_role.oid, 'MEMBER') THEN
        RAISE EXCEPTION 'broker_allow_autonomous: broker_runtime is not a member of role %, so the runner cannot SET ROLE to it',
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('GRANT %I TO broker_runtime first: every session of the runner''s login may then act as %I (docs/security.md).',
                                           p_role, p_role);
    END IF;
    INSERT INTO broker.broker_autonomous_role AS a (role_name, via) VALUES (p_role, v_via)
    ON CONFLICT (role_name) DO UPDATE SET via = EXCLUDED.via, allowed_by = EXCLUDED.allowed_by, allowed_at = EXCLUDED.allowed_at;
END;
$$;
COMMENT ON FUNCTION broker.broker_allow_autonomous(text, text) IS
    'Lets jobs of a role run outside a transaction (autonomous jobs): set_role (maintenance statements; needs GRANT role TO broker_runtime) or login (CALL too; the runner logs in as the role). broker_admin only.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_disallow_autonomous(p_role)
--   Withdraws broker_allow_autonomous: new autonomous jobs of p_role are
--   refused at enqueue, pending ones fail when they come to run (42501).
--   Returns whether there was an arrangement. (Revoke the role from
--   broker_runtime yourself.)
-- Example:
--   SELECT broker.broker_disallow_autonomous('app');  REVOKE app FROM broker_runtime;
--   Calls: none
--   Tables: writes broker_autonomous_role
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_disallow_autonomous(p_role text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM broker.broker_autonomous_role AS a WHERE a.role_name OPERATOR(pg_catalog.=) p_role;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION broker.broker_disallow_autonomous(text) IS
    'Withdraws broker_allow_autonomous for a role: its autonomous jobs are refused at enqueue and fail at run time (42501). broker_admin only.';
-- source: sql/traces/traceparent.sql
-- sql/traces/traceparent.sql: the enqueuer's trace context (W3C traceparent), captured on every enqueue path.
-- ---------------------------------------------------------------------------
-- Function: broker._is_traceparent(p_value)
--   Is p_value a W3C traceparent of version 00
--   (https://www.w3.org/TR/trace-context/#traceparent-header): '00-', 32
--   lower-case hex digits (the trace id, not all zeros), '-', 16 (the parent
--   span id, not all zeros), '-', 2 (the flags)? NULL for NULL. String
--   functions, not a regular expression ('[0-9a-f]{32}' cost twice as much).
--   Without SET search_path on purpose: one expression, inlined where it is
--   called; everything is schema-qualified.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._is_traceparent(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    -- (the shape: every hex digit made a 0, the text is the all-zero traceparent)
    SELECT pg_catalog.translate(p_value, '123456789abcdef', '000000000000000')
               OPERATOR(pg_catalog.=) '00-00000000000000000000000000000000-0000000000000000-00'
       AND pg_catalog.starts_with(p_value, '00-')
       AND pg_catalog.substr(p_value, 4, 32) OPERATOR(pg_catalog.<>) '00000000000000000000000000000000'
       AND pg_catalog.substr(p_value, 37, 16) OPERATOR(pg_catalog.<>) '0000000000000000'
$$;
COMMENT ON FUNCTION broker._is_traceparent(text) IS
    'Internal: p_value is a W3C traceparent of version 00 (lower-case hex, ids not all zeros).';

-- ---------------------------------------------------------------------------
-- Function: broker._checked_traceparent(p_value)
--   p_value, the setting broker.traceparent, once it is checked
--   (broker._is_traceparent; 22023 otherwise); remembered as
--   broker.traceparent_checked for the rest of the transaction, so that the
--   jobs after the first one made with it are not checked again (the check
--   costs more than the rest of the default). STABLE, not VOLATILE, although
--   it sets that setting: it returns the same for the same value, and a
--   VOLATILE call would keep the planner from inlining broker._traceparent,
--   which then cost an enqueue about 8 us per row (bench/traceparent_cost.py).
--   Calls: _is_traceparent
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._checked_traceparent(p_value text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT broker._is_traceparent(p_value) THEN
        RAISE EXCEPTION 'broker.traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case, ids not all zero), got %',
            pg_catalog.quote_literal(pg_catalog.left(p_value, 100))
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Set it from the current span (SET LOCAL broker.traceparent = ''00-...''), or RESET it to enqueue without one.';
    END IF;
    PERFORM pg_catalog.set_config('broker.traceparent_checked', p_value, true);
    RETURN p_value;
END;
$$;
COMMENT ON FUNCTION broker._checked_traceparent(text) IS
    'Internal: the setting broker.traceparent once checked as a W3C traceparent (22023 otherwise), remembered for the transaction.';

-- ---------------------------------------------------------------------------
-- Function: broker._traceparent()
--   The transaction's trace context for the job an INSERT makes: the setting
--   broker.traceparent (SET LOCAL broker.traceparent = '00-...' by the
--   enqueuer, before it enqueues), NULL when unset or empty, checked by
--   broker._checked_traceparent (22023) unless this transaction checked the
--   same value already.
--   broker_jobs.traceparent's default, so that every way a job is made
--   (broker_add_job, broker_add_jobs, broker_add_task, a schedule run now, a
--   plain INSERT) carries it with no parameter of its own: the rule in one
--   place. Without SET search_path on purpose: one expression, which the
--   planner inlines into the INSERT (an unset setting costs one
--   current_setting per row); everything is schema-qualified.
--   Calls: _checked_traceparent
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._traceparent()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN COALESCE(pg_catalog.current_setting('broker.traceparent', true), '') OPERATOR(pg_catalog.=) '' THEN NULL
        WHEN pg_catalog.current_setting('broker.traceparent', true)
             OPERATOR(pg_catalog.=) pg_catalog.current_setting('broker.traceparent_checked', true)
            THEN pg_catalog.current_setting('broker.traceparent', true)
        ELSE broker._checked_traceparent(pg_catalog.current_setting('broker.traceparent', true))
    END
$$;
COMMENT ON FUNCTION broker._traceparent() IS
    'Internal: the setting broker.traceparent checked as a W3C traceparent (22023 otherwise), NULL when unset: broker_jobs.traceparent''s default.';
-- source: sql/dependencies/locks.sql
-- sql/dependencies/locks.sql: taking the dependency locks of jobs and groups.
-- ---------------------------------------------------------------------------
-- Function: broker._lock_dependency_keys(p_tenant_id, p_shared_groups,
--     p_exclusive_groups, p_shared_jobs, p_exclusive_jobs)
--   Takes transaction advisory locks that keep pending_deps exact:
--   * enqueueing a job that depends on group G (or job J) locks G (J) exclusively
--     while it counts G's unfinished members;
--   * enqueueing a member of G, and finishing or cancelling a job of G (or J),
--     lock G (J) shared before they change the counters of G's dependents.
--   Keys (broker._dependency_lock_key) are the tenant's own: no lock one
--   tenant holds is one another tenant's work needs. Per tenant they are
--   hashed into 1024 buckets per kind (bounded lock-table use for bulk
--   enqueues; a collision only serialises a little more) and taken in one
--   global order (by key), a key wanted in both modes exclusively, so callers
--   that take all their keys here cannot deadlock on them.
-- Errors: 42501 a caller outside the broker's own code naming a tenant it may
--   not act for (strict tenancy).
--   Calls: _tenant_allowed, _dependency_lock_key
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._lock_dependency_keys(
    p_tenant_id text,
    p_shared_groups text[],
    p_exclusive_groups text[],
    p_shared_jobs bigint[],
    p_exclusive_jobs bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- broker_enqueue may call this (broker_add_job, SECURITY INVOKER, does): a
    -- caller that may not write the job table (it is not the broker's own
    -- code) locks only the keys of a tenant it may act for.
    IF NOT pg_catalog.has_table_privilege('broker.broker_jobs', 'UPDATE')
       AND NOT broker._tenant_allowed(p_tenant_id, CURRENT_USER) THEN
        RAISE EXCEPTION 'role % may not take the dependency locks of tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(p_tenant_id)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- force_generic_plan: the key query reads no table, and a custom plan (the
    -- default choice for it) would be planned again at every call.
    IF COALESCE(pg_catalog.cardinality(p_exclusive_groups), 0) OPERATOR(pg_catalog.=) 0
       AND COALESCE(pg_catalog.cardinality(p_exclusive_jobs), 0) OPERATOR(pg_catalog.=) 0
       AND COALESCE(pg_catalog.cardinality(p_shared_groups), 0) OPERATOR(pg_catalog.<=) 1
       AND COALESCE(pg_catalog.cardinality(p_shared_jobs), 0) OPERATOR(pg_catalog.<=) 1 THEN
        -- the common case (enqueue of a job, completion of a job): at most one
        -- shared key of each kind, the group's first (its key sorts first)
        IF p_shared_groups[1] IS NOT NULL THEN
            PERFORM pg_catalog.pg_advisory_xact_lock_shared(broker._dependency_lock_key(p_tenant_id, p_shared_groups[1], NULL));
        END IF;
        IF p_shared_jobs[1] IS NOT NULL THEN
            PERFORM pg_catalog.pg_advisory_xact_lock_shared(broker._dependency_lock_key(p_tenant_id, NULL, p_shared_jobs[1]));
        END IF;
        RETURN;
    END IF;
    -- Any set of keys: one statement; the aggregate takes them in the order of the sort.
    PERFORM pg_catalog.count(CASE WHEN k.excl THEN pg_catalog.pg_advisory_xact_lock(k.key)
                                 ELSE pg_catalog.pg_advisory_xact_lock_shared(k.key) END)
      FROM (SELECT u.key, pg_catalog.bool_or(u.excl) AS excl
              FROM (SELECT broker._dependency_lock_key(p_tenant_id, g, NULL) AS key, false AS excl
                      FROM pg_catalog.unnest(p_shared_groups) AS g
                    UNION ALL
                    SELECT broker._dependency_lock_key(p_tenant_id, g, NULL), true
                      FROM pg_catalog.unnest(p_exclusive_groups) AS g
                    UNION ALL
                    SELECT broker._dependency_lock_key(p_tenant_id, NULL, j), false
                      FROM pg_catalog.unnest(p_shared_jobs) AS j
                    UNION ALL
                    SELECT broker._dependency_lock_key(p_tenant_id, NULL, j), true
                      FROM pg_catalog.unnest(p_exclusive_jobs) AS j) AS u
             WHERE u.key IS NOT NULL
             GROUP BY u.key
             ORDER BY u.key) AS k;
END;
$$;
COMMENT ON FUNCTION broker._lock_dependency_keys(text, text[], text[], bigint[], bigint[]) IS
    'Internal: transaction advisory locks (shared/exclusive, global order, keys of the tenant only) that serialise dependency counting against finishing jobs.';

-- ---------------------------------------------------------------------------
-- Function: broker._lock_dependents(p_tenant_id, p_job_ids, p_groups)
--   Row-locks, in job_id order, the pending jobs that wait on any of the
--   jobs p_job_ids (id edges) or groups p_groups (group edges) of a tenant.
--   Returns their ids (NULL: none), which _cancel_dependents cancels as they
--   are. Every pending_deps update goes through this first, so concurrent
--   enqueues and finishes touching the same dependents queue up instead of
--   deadlocking.
--   Calls: none
--   Tables: reads broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._lock_dependents(p_tenant_id text, p_job_ids bigint[], p_groups text[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.array_agg(locked.job_id ORDER BY locked.job_id) FROM (
        SELECT d.job_id FROM broker.broker_jobs AS d
         WHERE d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
           AND d.job_id IN (SELECT e.job_id FROM broker.broker_job_dependency AS e
                             WHERE e.depends_on_job_id IS NOT NULL  -- (the partial indexes: not implied by = ANY)
                               AND e.depends_on_job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
                            UNION
                            SELECT e.job_id FROM broker.broker_job_dependency AS e
                             WHERE e.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                               AND e.depends_on_group IS NOT NULL
                               AND e.depends_on_group OPERATOR(pg_catalog.=) ANY (p_groups))
         ORDER BY d.job_id
           FOR NO KEY UPDATE OF d) AS locked);
END;
$$;
COMMENT ON FUNCTION broker._lock_dependents(text, bigint[], text[]) IS
    'Internal: row-lock, in job_id order, the pending jobs waiting on the given job ids or groups; returns their ids.';
-- source: sql/dependencies/cycle.sql
-- sql/dependencies/cycle.sql: the dependency cycle check.
-- ---------------------------------------------------------------------------
-- The check is linear in the size of the graph it looks at: it reads each
-- job and each group once, and each edge between them once, whatever the
-- number of paths (a fan-in over a fan-out has as many paths as the product
-- of their widths). A cycle closed by new edges passes through a job that
-- got them and that something waits on (an origin); every job on it waits,
-- transitively, on that origin. So the jobs that wait on the origins, with
-- the origins, hold every such cycle: the walk collects them (up, from the
-- targets to their waiters: the jobs a batch enqueues have few or no
-- waiters, however long the chain below them), then a topological sort of
-- the graph between them finds whether one is left.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._dependency_waiters(p_origins, p_max_reach)
--   For _dependency_cycle: the pending jobs p_origins, then every pending job
--   that waits on one of them, transitively, by id or by group (only pending
--   jobs wait), one row per job (job_id, tenant_id, its job_group) and one
--   per group of such a job (job_id NULL, tenant_id, job_group), each once:
--   a group is a node of its own, so its waiters are read once however many
--   of its members are reached. The origins come first. At most
--   2 * p_max_reach + 1 rows: past it, more than p_max_reach jobs were
--   reached (a group row follows one of its members). The walk follows
--   index probes only (the edges on a job id, or on a group with the
--   group's tenant, then the waiter by primary key), so it reads only the
--   tenant's own jobs and edges, whatever other tenants have (nested loops
--   only: a hash join would read every tenant's edges).
--   Calls: none
--   Tables: reads broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_waiters(p_origins bigint[], p_max_reach integer)
RETURNS TABLE (job_id bigint, tenant_id text, job_group text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
    WITH RECURSIVE walk (job_id, tenant_id, job_group) AS (
        SELECT o.job_id, o.tenant_id, o.job_group
          FROM broker.broker_jobs AS o
         WHERE o.job_id OPERATOR(pg_catalog.=) ANY (p_origins)
           AND o.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
        UNION
        SELECT n.job_id, n.tenant_id, n.job_group
          FROM walk AS r
         CROSS JOIN LATERAL (
               -- the job's group
               SELECT NULL::bigint AS job_id, r.tenant_id, r.job_group
                WHERE r.job_id IS NOT NULL
               UNION ALL
               -- the pending jobs waiting on the job by id
               SELECT w.job_id, w.tenant_id, w.job_group
                 FROM broker.broker_job_dependency AS e
                 JOIN broker.broker_jobs AS w ON w.job_id OPERATOR(pg_catalog.=) e.job_id
                WHERE r.job_id IS NOT NULL
                  AND e.depends_on_job_id IS NOT NULL
                  AND e.depends_on_job_id OPERATOR(pg_catalog.=) r.job_id
                  AND w.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
               UNION ALL
               -- the pending jobs waiting on the group
               SELECT w.job_id, w.tenant_id, w.job_group
                 FROM broker.broker_job_dependency AS e
                 JOIN broker.broker_jobs AS w ON w.job_id OPERATOR(pg_catalog.=) e.job_id
                WHERE r.job_id IS NULL
                  AND e.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
                  AND e.depends_on_group IS NOT NULL
                  AND e.depends_on_group OPERATOR(pg_catalog.=) r.job_group
                  AND w.complete_status OPERATOR(pg_catalog.=) broker._state('pending')) AS n
    )
    -- (the recursion runs only as far as this LIMIT reads)
    SELECT w.job_id, w.tenant_id, w.job_group
      FROM walk AS w
     LIMIT 2 OPERATOR(pg_catalog.*) p_max_reach::bigint OPERATOR(pg_catalog.+) 1
$$;
COMMENT ON FUNCTION broker._dependency_waiters(bigint[], integer) IS
    'Internal: the given pending jobs, every pending job waiting on them transitively (by id or group), and their groups, each once; at most 2 * p_max_reach + 1 rows.';

-- ---------------------------------------------------------------------------
-- Function: broker._dependency_node_key(p_tenant_id, p_group)
--   For _dependency_cycle: the text key of group p_group of tenant p_tenant_id
--   as a node of the graph it sorts: 'g', the tenant's length, ':', the
--   tenant, then the group (unambiguous whatever the names hold; a job's key
--   is 'j' and its id).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_node_key(p_tenant_id text, p_group text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    -- (SQL without SET search_path on purpose: the planner inlines it; everything is schema-qualified)
    SELECT 'g' OPERATOR(pg_catalog.||) pg_catalog.length(p_tenant_id)::pg_catalog.text OPERATOR(pg_catalog.||) ':'
           OPERATOR(pg_catalog.||) p_tenant_id OPERATOR(pg_catalog.||) p_group
$$;
COMMENT ON FUNCTION broker._dependency_node_key(text, text) IS
    'Internal: the node key of a tenant''s group in the cycle check''s graph.';

-- ---------------------------------------------------------------------------
-- Function: broker._dependency_cycle(p_origins, p_max_reach, p_max_edges)
--   For _dependency_after_insert: a pending job that waits, through pending
--   jobs, on one of the jobs p_origins again, by id or by its group, with
--   the origin it leads back to; no row when none does.
--   * the jobs waiting on the origins (broker._dependency_waiters); more
--     than p_max_reach (100,000 unless told) distinct jobs: 54000;
--   * the edges between them (index probes on job_id from each job); more
--     than p_max_edges (1,000,000 unless told): 54001;
--   * a topological sort (Kahn's: jobs and groups that wait on nothing left
--     are taken off, their waiters' counts go down), in arrays, linear in
--     jobs and edges; what is left holds a cycle, which a walk along the
--     edges left finds, then the origin on it and the job before it.
--   Bounded: at most 2 * p_max_reach + 1 nodes and p_max_edges edges.
-- Errors: 54000 more than p_max_reach jobs wait on the origins; 54001 more
--   than p_max_edges edges between them.
--   Calls: _dependency_waiters, _dependency_node_key
--   Tables: reads broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_cycle(p_origins bigint[], p_max_reach integer DEFAULT 100000,
                                         p_max_edges integer DEFAULT 1000000)
RETURNS TABLE (job_id bigint, job_name text, origin_id bigint, origin_name text, origin_group text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
    v_job    bigint[];   -- node i: a job (its id), or a group (NULL)
    v_tenant text[];
    v_group  text[];
    v_n      integer;    -- nodes
    v_jobs   integer;    -- of which jobs
    v_seeds  integer;    -- of which origins (the first ones)
    v_src    integer[];  -- edge k: node v_src[k] waits on node v_dst[k], sorted by v_dst
    v_dst    integer[];
    v_first  integer[];  -- the edges into node i are v_first[i] .. v_first[i + 1] - 1
    v_left   integer[];  -- per node: how many of its edges lead to nodes not yet taken off
    v_queue  integer[];  -- the nodes taken off, in order
    v_head   integer := 1;
    v_tail   integer;
    v_x      integer;
    v_p      integer;
    v_next   integer[];  -- on a cycle's search: one edge per node left
    v_step   integer[];
    v_cycle  integer[];
    v_origin integer;
    v_waiter integer;
BEGIN
    SELECT pg_catalog.array_agg(w.job_id ORDER BY w.o), pg_catalog.array_agg(w.tenant_id ORDER BY w.o),
           pg_catalog.array_agg(w.job_group ORDER BY w.o), pg_catalog.count(*),
           pg_catalog.count(w.job_id)
      INTO v_job, v_tenant, v_group, v_n, v_jobs
      FROM broker._dependency_waiters(p_origins, p_max_reach) WITH ORDINALITY AS w(job_id, tenant_id, job_group, o);
    IF v_jobs OPERATOR(pg_catalog.>) p_max_reach THEN
        RAISE EXCEPTION 'dependency cycle check: more than % pending jobs wait, directly or through others, on the job(s) getting new dependencies (job %)',
            p_max_reach, p_origins[1]
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'Split the work into smaller dependency graphs, or let part of the jobs waiting on these finish first.';
    END IF;
    IF v_n OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;
    v_seeds := (SELECT pg_catalog.count(*) FROM pg_catalog.unnest(v_job) WITH ORDINALITY AS u(id, o)
                 WHERE u.id OPERATOR(pg_catalog.=) ANY (p_origins));

    -- The edges between the nodes: a job waits on a job (id) or on a group; a group waits on
    -- its members. Each job's edges by index (on job_id); the nodes are matched by one text key
    -- ('j' and the id, or 'g', the tenant's length, the tenant and the group), in one hash join.
    WITH n AS MATERIALIZED (
        SELECT u.o::integer AS i, u.id,
               CASE WHEN u.id IS NOT NULL THEN 'j' OPERATOR(pg_catalog.||) u.id::text
                    ELSE broker._dependency_node_key(u.tenant_id, u.grp) END AS key,
               CASE WHEN u.id IS NOT NULL THEN broker._dependency_node_key(u.tenant_id, u.grp) END AS group_key
          FROM ROWS FROM (pg_catalog.unnest(v_job), pg_catalog.unnest(v_tenant), pg_catalog.unnest(v_group))
               WITH ORDINALITY AS u(id, tenant_id, grp, o)
    ), e AS (
        SELECT w.i AS src, t.i AS dst
          FROM n AS w
         CROSS JOIN LATERAL (
               SELECT CASE WHEN d.depends_on_job_id IS NOT NULL THEN 'j' OPERATOR(pg_catalog.||) d.depends_on_job_id::text
                           ELSE broker._dependency_node_key(d.tenant_id, d.depends_on_group) END AS key
                 FROM broker.broker_job_dependency AS d
                WHERE d.job_id OPERATOR(pg_catalog.=) w.id
               -- (OFFSET 0 keeps this a probe per job: pulled up into a join, it could be planned
               -- as one pass over every edge's index entry, a merge or hash join, when the
               -- statistics say the table is small, whatever it holds now)
               OFFSET 0) AS d
          JOIN n AS t ON t.key OPERATOR(pg_catalog.=) d.key
         WHERE w.id IS NOT NULL
        UNION ALL
        SELECT g.i, m.i
          FROM n AS g
          JOIN n AS m ON m.group_key OPERATOR(pg_catalog.=) g.key
         WHERE g.id IS NULL
    )
    SELECT pg_catalog.array_agg(l.src ORDER BY l.dst, l.src), pg_catalog.array_agg(l.dst ORDER BY l.dst, l.src)
      INTO v_src, v_dst
      FROM (SELECT * FROM e LIMIT p_max_edges::bigint OPERATOR(pg_catalog.+) 1) AS l;
    IF COALESCE(pg_catalog.cardinality(v_src), 0) OPERATOR(pg_catalog.>) p_max_edges THEN
        RAISE EXCEPTION 'dependency cycle check: more than % dependency edges between the jobs waiting on the job(s) getting new dependencies (job %)',
            p_max_edges, p_origins[1]
            USING ERRCODE = 'statement_too_complex',
                  HINT = 'Wait on groups rather than on many job ids, or split the work into smaller dependency graphs.';
    END IF;
    IF v_src IS NULL THEN
        RETURN;  -- no edge, no cycle
    END IF;

    -- per node: where its incoming edges start, and how many edges it has
    SELECT pg_catalog.array_agg(f.first ORDER BY f.i), pg_catalog.array_agg(f.outs ORDER BY f.i)
      INTO v_first, v_left
      FROM (SELECT g.i, COALESCE(c.outs, 0)::integer AS outs,
                   (1 OPERATOR(pg_catalog.+) COALESCE(pg_catalog.sum(c.ins) OVER (ORDER BY g.i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::integer AS first
              FROM pg_catalog.generate_series(1, v_n OPERATOR(pg_catalog.+) 1) AS g(i)
              LEFT JOIN (SELECT x.i, pg_catalog.sum(x.ins) AS ins, pg_catalog.sum(x.outs) AS outs
                           FROM (SELECT d AS i, 1 AS ins, 0 AS outs FROM pg_catalog.unnest(v_dst) AS d
                                 UNION ALL
                                 SELECT s, 0, 1 FROM pg_catalog.unnest(v_src) AS s) AS x
                          GROUP BY x.i) AS c ON c.i OPERATOR(pg_catalog.=) g.i) AS f;

    -- Kahn's sort: take off what waits on nothing left
    v_queue := ARRAY(SELECT g.i FROM pg_catalog.generate_series(1, v_n) AS g(i)
                      WHERE v_left[g.i] OPERATOR(pg_catalog.=) 0 ORDER BY g.i);
    v_tail := pg_catalog.cardinality(v_queue);
    WHILE v_head OPERATOR(pg_catalog.<=) v_tail LOOP
        v_x := v_queue[v_head];
        v_head := v_head OPERATOR(pg_catalog.+) 1;
        FOR k IN v_first[v_x] .. v_first[v_x OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.-) 1 LOOP
            v_p := v_src[k];
            v_left[v_p] := v_left[v_p] OPERATOR(pg_catalog.-) 1;
            IF v_left[v_p] OPERATOR(pg_catalog.=) 0 THEN
                v_tail := v_tail OPERATOR(pg_catalog.+) 1;
                v_queue[v_tail] := v_p;
            END IF;
        END LOOP;
    END LOOP;
    IF v_tail OPERATOR(pg_catalog.=) v_n THEN
        RETURN;  -- everything taken off: no cycle
    END IF;

    -- A node left waits on a node left: follow such edges until one comes round again.
    v_next := ARRAY(SELECT COALESCE(x.dst, 0) FROM pg_catalog.generate_series(1, v_n) AS g(i)
                      LEFT JOIN (SELECT u.s, pg_catalog.min(u.d) AS dst
                                   FROM ROWS FROM (pg_catalog.unnest(v_src), pg_catalog.unnest(v_dst)) AS u(s, d)
                                  WHERE v_left[u.s] OPERATOR(pg_catalog.>) 0 AND v_left[u.d] OPERATOR(pg_catalog.>) 0
                                  GROUP BY u.s) AS x ON x.s OPERATOR(pg_catalog.=) g.i
                     ORDER BY g.i);
    v_step := pg_catalog.array_fill(0, ARRAY[v_n]);
    v_x := (SELECT pg_catalog.min(g.i) FROM pg_catalog.generate_series(1, v_n) AS g(i)
             WHERE v_left[g.i] OPERATOR(pg_catalog.>) 0);
    v_p := 0;
    WHILE v_step[v_x] OPERATOR(pg_catalog.=) 0 LOOP
        v_p := v_p OPERATOR(pg_catalog.+) 1;
        v_step[v_x] := v_p;
        v_x := v_next[v_x];
    END LOOP;
    -- the cycle from v_x round to it; every cycle passes through an origin (the graph had none before)
    v_cycle := ARRAY[v_x];
    v_p := v_next[v_x];
    WHILE v_p OPERATOR(pg_catalog.<>) v_x LOOP
        v_cycle := v_cycle OPERATOR(pg_catalog.||) v_p;
        v_p := v_next[v_p];
    END LOOP;
    SELECT c.o INTO v_p FROM pg_catalog.unnest(v_cycle) WITH ORDINALITY AS c(i, o)
     WHERE c.i OPERATOR(pg_catalog.<=) v_seeds ORDER BY c.o LIMIT 1;
    IF v_p IS NULL THEN
        v_p := 1;  -- (not expected; name the cycle from any of its jobs)
        WHILE v_job[v_cycle[v_p]] IS NULL LOOP
            v_p := v_p OPERATOR(pg_catalog.+) 1;
        END LOOP;
    END IF;
    v_origin := v_cycle[v_p];
    -- the job before it on the cycle (before its group, when the cycle enters through the group)
    v_p := ((v_p OPERATOR(pg_catalog.-) 2 OPERATOR(pg_catalog.+) pg_catalog.cardinality(v_cycle))
            OPERATOR(pg_catalog.%) pg_catalog.cardinality(v_cycle)) OPERATOR(pg_catalog.+) 1;
    v_waiter := v_cycle[v_p];
    IF v_job[v_waiter] IS NULL THEN
        v_p := ((v_p OPERATOR(pg_catalog.-) 2 OPERATOR(pg_catalog.+) pg_catalog.cardinality(v_cycle))
                OPERATOR(pg_catalog.%) pg_catalog.cardinality(v_cycle)) OPERATOR(pg_catalog.+) 1;
        v_waiter := v_cycle[v_p];
    END IF;
    RETURN QUERY
    SELECT w.job_id, w.job_name, o.job_id, o.job_name, o.job_group
      FROM broker.broker_jobs AS w, broker.broker_jobs AS o
     WHERE w.job_id OPERATOR(pg_catalog.=) v_job[v_waiter]
       AND o.job_id OPERATOR(pg_catalog.=) v_job[v_origin];
END;
$$;
COMMENT ON FUNCTION broker._dependency_cycle(bigint[], integer, integer) IS
    'Internal: a pending job that waits, transitively through pending jobs, on one of the given jobs (or their groups) again, with that job; 54000 past p_max_reach jobs, 54001 past p_max_edges edges.';
-- source: sql/dependencies/release.sql
-- sql/dependencies/release.sql: releasing dependents when jobs complete (pending_deps), deferred when large.
-- ---------------------------------------------------------------------------
-- Function: broker._lower_pending_deps(p_job_ids, p_amounts)
--   Lowers the pending_deps of the pending jobs p_job_ids (ascending) by
--   p_amounts (element by element), locking them in id order first (every
--   path that lowers counters locks in that order, so they cannot deadlock),
--   and notifies the queues that got a ready job. Jobs no longer pending
--   (cancelled meanwhile) are skipped. Returns how many became ready.
--   Calls: _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._lower_pending_deps(p_job_ids bigint[], p_amounts integer[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_queues integer[];
    v_ready  integer;
BEGIN
    PERFORM 1 FROM broker.broker_jobs AS d
     WHERE d.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
       AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
     ORDER BY d.job_id
       FOR NO KEY UPDATE OF d;
    WITH released AS (
        UPDATE broker.broker_jobs AS d
           SET pending_deps = d.pending_deps OPERATOR(pg_catalog.-) c.n
          FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_amounts)) AS c(id, n)
         WHERE d.job_id OPERATOR(pg_catalog.=) c.id
           AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
        RETURNING d.job_queue, d.pending_deps, d.run_after
    )
    SELECT pg_catalog.array_agg(DISTINCT r.job_queue)
               FILTER (WHERE r.run_after OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()),
           pg_catalog.count(*)::integer
      INTO v_queues, v_ready
      FROM released AS r
     WHERE r.pending_deps OPERATOR(pg_catalog.=) 0;
    IF v_queues IS NOT NULL THEN
        PERFORM broker._notify_queues(v_queues);
    END IF;
    RETURN v_ready;
END;
$$;
COMMENT ON FUNCTION broker._lower_pending_deps(bigint[], integer[]) IS
    'Internal: lower the pending_deps of pending jobs (locked in id order) and notify queues with newly ready jobs.';

-- ---------------------------------------------------------------------------
-- Function: broker._release_dependents_of(p_tenant_id, p_job_ids, p_groups)
--   Called when the jobs p_job_ids (of groups p_groups, element by element)
--   of one tenant completed: every pending job waiting on them, by id or by
--   group, has pending_deps lowered by the number of such edges, counted per
--   completed job (two members of a group release a dependent of the group
--   twice). The first 500 of them (by id) are released here; the others
--   are listed in broker_deferred_release, which the runner's maintenance
--   applies (broker_apply_deferred_releases). Returns the number of jobs that became
--   ready here. Index probes only (enable_seqscan off, see job_triggers.sql),
--   so its cached plans stay good as the tables grow.
--   The list is final when it is taken: a job that starts to wait on one of
--   these groups later does not count the completed jobs (the dependency
--   keys, held here, order the two), and a listed job stays pending until
--   its release is applied (its pending_deps includes it), unless cancelled.
--   Calls: _lock_dependency_keys, _lower_pending_deps
--   Tables: reads broker_job_dependency, broker_jobs; writes broker_deferred_release
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._release_dependents_of(p_tenant_id text, p_job_ids bigint[], p_groups text[])
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    c_now    CONSTANT integer := 500;   -- released in the completing transaction
    v_ids    bigint[];
    v_counts integer[];
    v_n      integer;
BEGIN
    PERFORM broker._lock_dependency_keys(p_tenant_id, p_groups, NULL, p_job_ids, NULL);
    -- the common case: nothing ever waited on these jobs or their groups (index probes)
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_job_ids) AS d(id)
                    CROSS JOIN LATERAL (SELECT 1 FROM broker.broker_job_dependency AS e
                                         WHERE e.depends_on_job_id OPERATOR(pg_catalog.=) d.id LIMIT 1) AS x)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_groups) AS g(name)
                        CROSS JOIN LATERAL (SELECT 1 FROM broker.broker_job_dependency AS e
                                             WHERE e.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                                               AND e.depends_on_group OPERATOR(pg_catalog.=) g.name LIMIT 1) AS x) THEN
        RETURN 0;
    END IF;

    WITH edges AS (
        SELECT e.job_id
          FROM pg_catalog.unnest(p_job_ids) AS d(id)
          JOIN broker.broker_job_dependency AS e ON e.depends_on_job_id OPERATOR(pg_catalog.=) d.id
        UNION ALL
        SELECT e.job_id
          FROM pg_catalog.unnest(p_groups) AS g(name)
          JOIN broker.broker_job_dependency AS e
            ON e.tenant_id OPERATOR(pg_catalog.=) p_tenant_id AND e.depends_on_group OPERATOR(pg_catalog.=) g.name
    ), counted AS (
        SELECT x.job_id, pg_catalog.count(*)::integer AS n FROM edges AS x GROUP BY x.job_id
    )
    -- Running jobs are left out: one that waits on these jobs started when none
    -- of them was unfinished-and-counted for it (were it to fail, its retry
    -- counts again). Finished ones are skipped when the release is applied.
    -- (The running jobs come from the small lease index, not a probe per job.)
    SELECT pg_catalog.array_agg(c.job_id ORDER BY c.job_id), pg_catalog.array_agg(c.n ORDER BY c.job_id)
      INTO v_ids, v_counts
      FROM counted AS c
     WHERE c.job_id OPERATOR(pg_catalog.<>) ALL (ARRAY(
               SELECT r.job_id FROM broker.broker_jobs AS r WHERE r.complete_status OPERATOR(pg_catalog.=) broker._state('running')));
    v_n := COALESCE(pg_catalog.cardinality(v_ids), 0);
    IF v_n OPERATOR(pg_catalog.=) 0 THEN
        RETURN 0;
    END IF;
    IF v_n OPERATOR(pg_catalog.>) c_now THEN
        -- (the runner's maintenance applies them: broker_apply_deferred_releases)
        INSERT INTO broker.broker_deferred_release (tenant_id, job_ids, amounts)
        VALUES (p_tenant_id, v_ids[c_now OPERATOR(pg_catalog.+) 1:], v_counts[c_now OPERATOR(pg_catalog.+) 1:]);
    END IF;
    RETURN broker._lower_pending_deps(v_ids[1:c_now], v_counts[1:c_now]);
END;
$$;
COMMENT ON FUNCTION broker._release_dependents_of(text, bigint[], text[]) IS
    'Internal: jobs of a tenant completed; lower pending_deps of the pending jobs waiting on them (by id or group), the first 500 now and the rest through broker_deferred_release.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_apply_deferred_releases(p_max_jobs)
--   Applies deferred dependency releases (broker_deferred_release), at most
--   p_max_jobs listed jobs in all: the rows oldest first, at most 500 jobs of
--   each row per pass, each row in a subtransaction of its own. It never
--   waits on a lock: a row another session is applying is skipped (SKIP
--   LOCKED), and so is a row whose listed jobs some session holds locked
--   (NOWAIT; say their tenant locked its own pending jobs): it stays listed
--   for a later call, and the other rows are applied meanwhile. The runner's
--   maintenance calls it (claims never do release work), again while it
--   returns more than 0. Returns how many listed jobs it applied.
-- Errors: 22023 p_max_jobs < 1.
-- Example:
--   SELECT broker.broker_apply_deferred_releases();   -- the runner's maintenance, every second
--   Calls: _lower_pending_deps
--   Tables: reads broker_jobs; writes broker_deferred_release
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_apply_deferred_releases(p_max_jobs integer DEFAULT 5000)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_row   CONSTANT integer := 500;   -- jobs of one row per pass
    v_left  integer := p_max_jobs;
    v_done  integer := 0;
    v_ids   bigint[] := '{}';          -- rows visited in this pass
    v_any   boolean;
    r       record;
    v_n     integer;
BEGIN
    IF p_max_jobs IS NULL OR p_max_jobs OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_apply_deferred_releases: p_max_jobs must be >= 1, got %', COALESCE(p_max_jobs::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOOP
        v_any := false;
        v_ids := '{}';
        LOOP
            EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
            SELECT b.release_id, b.job_ids, b.amounts INTO r
              FROM broker.broker_deferred_release AS b
             WHERE b.release_id OPERATOR(pg_catalog.<>) ALL (v_ids)
             ORDER BY b.release_id
             LIMIT 1
               FOR UPDATE SKIP LOCKED;
            EXIT WHEN NOT FOUND;
            v_ids := v_ids OPERATOR(pg_catalog.||) r.release_id;
            v_n := LEAST(c_row, v_left, pg_catalog.cardinality(r.job_ids));
            BEGIN
                -- never wait for a listed job another session holds locked
                PERFORM 1 FROM broker.broker_jobs AS d
                 WHERE d.job_id OPERATOR(pg_catalog.=) ANY (r.job_ids[1:v_n])
                   AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                 ORDER BY d.job_id
                   FOR NO KEY UPDATE OF d NOWAIT;
                IF v_n OPERATOR(pg_catalog.=) pg_catalog.cardinality(r.job_ids) THEN
                    DELETE FROM broker.broker_deferred_release AS b WHERE b.release_id OPERATOR(pg_catalog.=) r.release_id;
                ELSE
                    UPDATE broker.broker_deferred_release AS b
                       SET job_ids = r.job_ids[v_n OPERATOR(pg_catalog.+) 1:], amounts = r.amounts[v_n OPERATOR(pg_catalog.+) 1:]
                     WHERE b.release_id OPERATOR(pg_catalog.=) r.release_id;
                END IF;
                PERFORM broker._lower_pending_deps(r.job_ids[1:v_n], r.amounts[1:v_n]);
                v_done := v_done OPERATOR(pg_catalog.+) v_n;
                v_left := v_left OPERATOR(pg_catalog.-) v_n;
                v_any := true;
            EXCEPTION WHEN lock_not_available THEN
                NULL;   -- left listed; the next call tries it again
            END;
        END LOOP;
        EXIT WHEN NOT v_any OR v_left OPERATOR(pg_catalog.<=) 0;
    END LOOP;
    RETURN v_done;
END;
$$;
COMMENT ON FUNCTION broker.broker_apply_deferred_releases(integer) IS
    'Applies up to p_max_jobs deferred dependency releases (oldest rows first, 500 per row per pass), never waiting on a lock; returns how many it applied. The runner''s maintenance calls it.';

-- ---------------------------------------------------------------------------
-- Function: broker._release_dependents(p_tenant_id, p_job_id, p_job_group)
--   _release_dependents_of for one completed job.
--   Calls: _release_dependents_of
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._release_dependents(p_tenant_id text, p_job_id bigint, p_job_group text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN broker._release_dependents_of(p_tenant_id, ARRAY[p_job_id], ARRAY[p_job_group]);
END;
$$;
COMMENT ON FUNCTION broker._release_dependents(text, bigint, text) IS
    'Internal: a job completed; lower pending_deps of the pending jobs waiting on it (by id or group) and notify queues with newly ready jobs.';
-- source: sql/dependencies/propagation.sql
-- sql/dependencies/propagation.sql: a failed or cancelled job cancels its dependents; counting blockers.
-- ---------------------------------------------------------------------------
-- Function: broker._cancel_dependents(p_tenant_id, p_job_id, p_job_group, p_reason)
--   Called when job p_job_id ended failed or cancelled: every pending job
--   waiting on it (by id, or by its group), and transitively every pending job
--   waiting on those, is cancelled with p_reason and cancel_cause_job_id
--   p_job_id (what broker_retry_job brings back with it). Returns how many.
--   Calls: _lock_dependency_keys, _lock_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cancel_dependents(p_tenant_id text, p_job_id bigint, p_job_group text, p_reason text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids    bigint[] := ARRAY[p_job_id];
    v_groups text[]   := ARRAY[p_job_group];
    v_total  integer  := 0;
    v_n      integer;
    v_locked bigint[];
BEGIN
    LOOP
        -- Lock the frontier before reading its dependents, so an enqueue that
        -- is counting one of these jobs as unfinished commits first and is seen.
        PERFORM broker._lock_dependency_keys(p_tenant_id, v_groups, NULL, v_ids, NULL);

        -- the pending jobs waiting on the frontier, locked (their keys are held, so the set
        -- cannot grow before they are cancelled)
        v_locked := broker._lock_dependents(p_tenant_id, v_ids, v_groups);

        WITH victims AS (
            UPDATE broker.broker_jobs AS d
               SET complete_status = broker._state('cancelled'),
                   finished_at = pg_catalog.clock_timestamp(),
                   cancel_reason = p_reason,
                   cancel_cause_job_id = p_job_id
             WHERE d.job_id OPERATOR(pg_catalog.=) ANY (v_locked)
               AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
            RETURNING d.job_id, d.job_group
        )
        SELECT pg_catalog.array_agg(v.job_id), pg_catalog.array_agg(DISTINCT v.job_group), pg_catalog.count(*)
          INTO v_ids, v_groups, v_n
          FROM victims AS v;

        EXIT WHEN v_n OPERATOR(pg_catalog.=) 0;
        v_total := v_total OPERATOR(pg_catalog.+) v_n;
    END LOOP;
    RETURN v_total;
END;
$$;
COMMENT ON FUNCTION broker._cancel_dependents(text, bigint, text, text) IS
    'Internal: a job failed or was cancelled; cancel (status 4) every pending job waiting on it by id or group, transitively, with the given reason.';

-- ---------------------------------------------------------------------------
-- Function: broker._count_pending_deps(p_tenant_id, p_job_id)
--   Recounts from its edges how many unfinished jobs job p_job_id waits on,
--   holding the dependency locks exclusively (as an enqueue of it would).
--   Calls: _lock_dependency_keys
--   Tables: reads broker_job_dependency, broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._count_pending_deps(p_tenant_id text, p_job_id bigint)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids    bigint[];
    v_groups text[];
BEGIN
    SELECT pg_catalog.array_agg(e.depends_on_job_id) FILTER (WHERE e.depends_on_job_id IS NOT NULL),
           pg_catalog.array_agg(e.depends_on_group) FILTER (WHERE e.depends_on_group IS NOT NULL)
      INTO v_ids, v_groups
      FROM broker.broker_job_dependency AS e
     WHERE e.job_id OPERATOR(pg_catalog.=) p_job_id;
    IF v_ids IS NULL AND v_groups IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM broker._lock_dependency_keys(p_tenant_id, NULL, v_groups, NULL, v_ids);
    RETURN (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS t
             WHERE t.job_id OPERATOR(pg_catalog.=) ANY (v_ids)
               AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]))::integer
         OPERATOR(pg_catalog.+)
           (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS m
             WHERE m.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
               AND m.job_group OPERATOR(pg_catalog.=) ANY (v_groups)
               AND m.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]))::integer;
END;
$$;
COMMENT ON FUNCTION broker._count_pending_deps(text, bigint) IS
    'Internal: recount the unfinished dependencies of a job from its edges (under the dependency locks).';
-- source: sql/dependencies/triggers.sql
-- sql/dependencies/triggers.sql: triggers that keep dependency bookkeeping exact on every INSERT.
-- ---------------------------------------------------------------------------
-- Triggers that keep dependency bookkeeping exact whoever writes the tables
-- (broker_add_job, or a role with INSERT privilege writing rows directly).
-- Their functions are SECURITY DEFINER: the bookkeeping touches rows the
-- writer may not update itself. The AFTER triggers run with enable_seqscan off:
-- their queries are index probes, and PL/pgSQL keeps the plan made at the first
-- call; made while the tables were small, a plan that scans them would be kept
-- for the whole of a long transaction (thousands of enqueues in one statement
-- then cost quadratic time). Identity and tenant of the writer are
-- checked by the row-level security policies, as the writer, before these run.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._jobs_join_groups(p_tenants, p_groups, p_members)
--   For _jobs_after_insert, when some job waits on a group that got new
--   members: p_members[i] new unfinished jobs joined group p_groups[i] of
--   tenant p_tenants[i]; every pending job waiting on such a group waits on
--   them too (its pending_deps grows by the new members of its groups).
--   The caller holds the shared keys of these groups.
--   Calls: _lock_dependents
--   Tables: reads broker_job_dependency; writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._jobs_join_groups(p_tenants text[], p_groups text[], p_members integer[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT t.tenant_id, pg_catalog.array_agg(t.grp) AS groups
          FROM ROWS FROM (pg_catalog.unnest(p_tenants), pg_catalog.unnest(p_groups)) AS t(tenant_id, grp)
         GROUP BY t.tenant_id
         ORDER BY t.tenant_id
    LOOP
        PERFORM broker._lock_dependents(r.tenant_id, NULL, r.groups);
        UPDATE broker.broker_jobs AS d
           SET pending_deps = d.pending_deps OPERATOR(pg_catalog.+) c.n
          FROM (SELECT e.job_id, pg_catalog.sum(m.n)::integer AS n
                  FROM broker.broker_job_dependency AS e
                  JOIN ROWS FROM (pg_catalog.unnest(p_tenants), pg_catalog.unnest(p_groups), pg_catalog.unnest(p_members)) AS m(tenant_id, grp, n)
                    ON m.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
                   AND m.grp OPERATOR(pg_catalog.=) e.depends_on_group
                 WHERE e.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
                   AND e.depends_on_group IS NOT NULL
                   AND e.depends_on_group OPERATOR(pg_catalog.=) ANY (r.groups)
                 GROUP BY e.job_id) AS c
         WHERE d.job_id OPERATOR(pg_catalog.=) c.job_id
           AND d.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._jobs_join_groups(text[], text[], integer[]) IS
    'Internal: new unfinished members joined these groups; the pending jobs waiting on them wait on the new members too.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_after_insert()
--   Statement-level AFTER INSERT on broker_jobs, the one trigger an enqueue
--   pays for, kept to two queries in the common case:
--   * takes the shared key of every group that got unfinished members (a job
--     enqueued with a dependency on the group at the same time holds it
--     exclusively while it counts the members), in key order;
--   * one NOTIFY per queue that got a job claimable now (same query), unless
--     broker.defer_notify is on (see sql/core/notify.sql);
--   * then, with a fresh snapshot, looks whether any job waits on one of
--     these groups (an index probe per group) and, only then, counts the
--     new members into their pending_deps (broker._jobs_join_groups).
--   Calls: _dependency_lock_key, _notify_queue, _due_time, _jobs_join_groups
--   Tables: reads broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._jobs_after_insert()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_groups record;
BEGIN
    -- One statement for the common work (each costs an executor start-up, the
    -- bulk of a one-job enqueue): the shared group keys of
    -- _lock_dependency_keys (broker._dependency_lock_key, in key order), then one NOTIFY per queue with a job
    -- claimable now (the Append runs its branches in order).
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(k.key)
       FROM (SELECT DISTINCT broker._dependency_lock_key(n.tenant_id, n.job_group, NULL) AS key
               FROM new_jobs AS n
              WHERE n.complete_status OPERATOR(pg_catalog.<=) broker._state('running')
              ORDER BY 1) AS k
    UNION ALL
    SELECT broker._notify_queue(q.job_queue)
       FROM (SELECT DISTINCT n.job_queue FROM new_jobs AS n
              WHERE n.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                AND n.pending_deps OPERATOR(pg_catalog.=) 0
                AND n.run_after OPERATOR(pg_catalog.<=) broker._due_time()
                AND pg_catalog.current_setting('broker.defer_notify', true) IS DISTINCT FROM 'on') AS q;
    -- (a new statement: its snapshot sees every waiter committed before the keys were granted)
    IF EXISTS (SELECT 1 FROM (SELECT DISTINCT n.tenant_id, n.job_group FROM new_jobs AS n
                               WHERE n.complete_status OPERATOR(pg_catalog.<=) broker._state('running')) AS g
                WHERE EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                               WHERE e.tenant_id OPERATOR(pg_catalog.=) g.tenant_id
                                 AND e.depends_on_group OPERATOR(pg_catalog.=) g.job_group)) THEN
        SELECT pg_catalog.array_agg(g.tenant_id) AS tenants, pg_catalog.array_agg(g.job_group) AS groups,
               pg_catalog.array_agg(g.n) AS members
          INTO v_groups
          FROM (SELECT n.tenant_id, n.job_group, pg_catalog.count(*)::integer AS n
                  FROM new_jobs AS n
                 WHERE n.complete_status OPERATOR(pg_catalog.<=) broker._state('running')
                 GROUP BY n.tenant_id, n.job_group) AS g
         WHERE EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                        WHERE e.tenant_id OPERATOR(pg_catalog.=) g.tenant_id
                          AND e.depends_on_group OPERATOR(pg_catalog.=) g.job_group);
        PERFORM broker._jobs_join_groups(v_groups.tenants, v_groups.groups, v_groups.members);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._jobs_after_insert() IS
    'Internal trigger: new jobs join their groups (pending jobs waiting on those groups wait on them too), and their queues are notified.';

CREATE OR REPLACE TRIGGER broker_jobs_after_insert_trg
    AFTER INSERT ON broker.broker_jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._jobs_after_insert();
COMMENT ON TRIGGER broker_jobs_after_insert_trg ON broker.broker_jobs IS
    'Per INSERT statement: counts new group members into the pending_deps of the jobs waiting on their groups, and notifies the queues that got claimable jobs.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._dependency_before_insert()
--   Row-level BEFORE INSERT on broker_job_dependency, SECURITY INVOKER on
--   purpose: it validates the edge through the writer's own view of the jobs
--   (row-level security applies), so its errors reveal nothing the writer may
--   not see. It runs before the row's policy check and before the
--   foreign-key check, so these are the errors a caller gets.
-- Errors: 23503 unknown job or target job (or one the writer cannot see);
--   55000 the job is not pending, or the target failed/was cancelled;
--   23514 the job's own group.
--   Calls: none
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._dependency_before_insert()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job    record;
    v_target record;
BEGIN
    SELECT j.job_id, j.job_name, j.job_group, j.tenant_id, j.complete_status INTO v_job
      FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) NEW.job_id AND j.tenant_id OPERATOR(pg_catalog.=) NEW.tenant_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % does not exist', NEW.job_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF v_job.complete_status OPERATOR(pg_catalog.<>) broker._state('pending') THEN
        RAISE EXCEPTION 'job % is not pending; dependencies can only be added to pending jobs', v_job.job_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF NEW.depends_on_group OPERATOR(pg_catalog.=) v_job.job_group THEN
        RAISE EXCEPTION 'job % (%) cannot depend on its own group %', v_job.job_id,
            pg_catalog.quote_literal(v_job.job_name), pg_catalog.quote_literal(v_job.job_group)
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.depends_on_job_id IS NOT NULL THEN
        SELECT t.job_id, t.complete_status INTO v_target FROM broker.broker_jobs AS t
         WHERE t.job_id OPERATOR(pg_catalog.=) NEW.depends_on_job_id AND t.tenant_id OPERATOR(pg_catalog.=) NEW.tenant_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dependency job % does not exist', NEW.depends_on_job_id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
        IF v_target.complete_status OPERATOR(pg_catalog.>=) broker._state('failed') THEN
            RAISE EXCEPTION 'dependency job % % and can never complete', v_target.job_id,
                CASE v_target.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Enqueue the dependency again and depend on the new job id.';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._dependency_before_insert() IS
    'Internal trigger: validate a new dependency edge with the writer''s own visibility (before the policy and FK checks).';

CREATE OR REPLACE TRIGGER broker_job_dependency_before_insert_trg
    BEFORE INSERT ON broker.broker_job_dependency
    FOR EACH ROW EXECUTE FUNCTION broker._dependency_before_insert();
COMMENT ON TRIGGER broker_job_dependency_before_insert_trg ON broker.broker_job_dependency IS
    'Validates each new dependency edge as the writer sees the jobs.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._dependency_after_insert()
--   Statement-level AFTER INSERT on broker_job_dependency (so only edges that
--   passed the row-level security policy get here), set-based so that bulk
--   enqueues stay linear:
--   * refuses a job waiting on more than 100 groups;
--   * takes the dependency locks of all new edges in one ordered call;
--   * rejects id edges whose target failed or was cancelled meanwhile;
--   * rejects cycles: from the jobs that got edges and that some pending job
--     already waits on (by id or by its group: the only way a new edge can
--     close a cycle), once for the whole statement, collects the pending
--     jobs of their tenant that wait on them, transitively, and sorts that
--     graph topologically (broker._dependency_cycle: linear in its jobs and
--     edges, at most 100,000 jobs and 1,000,000 edges);
--   * adds to each job's pending_deps its new edges' unfinished targets
--     (each target group's unfinished members are counted once per group).
-- Errors: 22023 more than 100 groups; 55000 a target failed meanwhile;
--   23514 a dependency cycle; 54000 more than 100,000 jobs wait on the jobs
--   getting edges, 54001 more than 1,000,000 edges between them.
--   Calls: _dependency_lock_key, _lock_dependency_keys, _dependency_cycle
--   Tables: reads broker_job_dependency; writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._dependency_after_insert()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_keys    record;
    v_cycle   record;
    v_origins bigint[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_edges) THEN
        RETURN NULL;
    END IF;
    -- At most 100 groups per job (each is a lock its enqueue takes and a count
    -- the completions of its tenant keep exact), however its edges are written.
    SELECT x.job_id, x.n INTO v_cycle
      FROM (SELECT ne.job_id,
                   (SELECT pg_catalog.count(*) FROM broker.broker_job_dependency AS e
                     WHERE e.job_id OPERATOR(pg_catalog.=) ne.job_id AND e.depends_on_group IS NOT NULL) AS n
              FROM (SELECT DISTINCT e.job_id FROM new_edges AS e WHERE e.depends_on_group IS NOT NULL) AS ne) AS x
     WHERE x.n OPERATOR(pg_catalog.>) 100
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'job % may wait on at most 100 groups, got %', v_cycle.job_id, v_cycle.n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- (tenants in the order of their keys, so that a statement for several tenants
    -- takes its keys in the one global order too)
    FOR v_keys IN
        SELECT e.tenant_id, pg_catalog.array_agg(DISTINCT j.job_group) AS own_groups,
               pg_catalog.array_agg(DISTINCT e.depends_on_group) FILTER (WHERE e.depends_on_group IS NOT NULL) AS groups,
               pg_catalog.array_agg(DISTINCT e.depends_on_job_id) FILTER (WHERE e.depends_on_job_id IS NOT NULL) AS ids
          FROM new_edges AS e
          JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) e.job_id
         GROUP BY e.tenant_id
         ORDER BY broker._dependency_lock_key(e.tenant_id, '', NULL), e.tenant_id
    LOOP
        PERFORM broker._lock_dependency_keys(v_keys.tenant_id, v_keys.own_groups, v_keys.groups, NULL, v_keys.ids);
    END LOOP;

    SELECT e.depends_on_job_id INTO v_cycle
      FROM new_edges AS e
      JOIN broker.broker_jobs AS t ON t.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id
     WHERE t.complete_status OPERATOR(pg_catalog.>=) broker._state('failed')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'dependency job % ended while the dependency was being added and can never complete',
            v_cycle.depends_on_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    -- Cycle check, from the jobs something already waits on (usually none: no walk).
    -- (an edge on the job or its group, from a pending job or not: a superset that only makes
    -- the walk run a little more often, checked with two index probes per job)
    v_origins := ARRAY(
        SELECT j.job_id
          FROM (SELECT DISTINCT e.job_id FROM new_edges AS e) AS ne
          JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) ne.job_id
         WHERE EXISTS (SELECT 1 FROM broker.broker_job_dependency AS e
                        WHERE e.depends_on_job_id OPERATOR(pg_catalog.=) j.job_id
                       UNION ALL
                       SELECT 1 FROM broker.broker_job_dependency AS e
                        WHERE e.tenant_id OPERATOR(pg_catalog.=) j.tenant_id
                          AND e.depends_on_group OPERATOR(pg_catalog.=) j.job_group));
    IF pg_catalog.cardinality(v_origins) OPERATOR(pg_catalog.>) 0 THEN
        SELECT * INTO v_cycle FROM broker._dependency_cycle(v_origins) LIMIT 1;   -- (bounded: see there)
        IF FOUND THEN
            RAISE EXCEPTION 'dependency cycle: job % (%) already waits on job % (%) or its group %',
                v_cycle.job_id, pg_catalog.quote_literal(v_cycle.job_name), v_cycle.origin_id,
                pg_catalog.quote_literal(v_cycle.origin_name), pg_catalog.quote_literal(v_cycle.origin_group)
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;

    -- Count: each target group's unfinished members once, each id target once.
    WITH grp AS (
        SELECT g.tenant_id, g.grp,
               (SELECT pg_catalog.count(*)::integer FROM broker.broker_jobs AS m
                 WHERE m.tenant_id OPERATOR(pg_catalog.=) g.tenant_id
                   AND m.job_group OPERATOR(pg_catalog.=) g.grp
                   AND m.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])) AS n
          FROM (SELECT DISTINCT e.tenant_id, e.depends_on_group AS grp FROM new_edges AS e
                 WHERE e.depends_on_group IS NOT NULL) AS g
    ), cnt AS (
        SELECT e.job_id,
               pg_catalog.sum(CASE WHEN e.depends_on_group IS NOT NULL THEN g.n
                                   WHEN t.complete_status OPERATOR(pg_catalog.<=) broker._state('running') THEN 1 ELSE 0 END)::integer AS n
          FROM new_edges AS e
          LEFT JOIN grp AS g
            ON g.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND g.grp OPERATOR(pg_catalog.=) e.depends_on_group
          LEFT JOIN broker.broker_jobs AS t ON t.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id
         GROUP BY e.job_id
    )
    UPDATE broker.broker_jobs AS j
       SET pending_deps = j.pending_deps OPERATOR(pg_catalog.+) c.n
      FROM cnt AS c
     WHERE j.job_id OPERATOR(pg_catalog.=) c.job_id
       AND c.n OPERATOR(pg_catalog.>) 0;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._dependency_after_insert() IS
    'Internal trigger: after an INSERT statement of edges, lock, reject cycles, and count the new edges'' unfinished targets into pending_deps.';

CREATE OR REPLACE TRIGGER broker_job_dependency_after_insert_trg
    AFTER INSERT ON broker.broker_job_dependency
    REFERENCING NEW TABLE AS new_edges
    FOR EACH STATEMENT EXECUTE FUNCTION broker._dependency_after_insert();
COMMENT ON TRIGGER broker_job_dependency_after_insert_trg ON broker.broker_job_dependency IS
    'Rejects cycles and maintains pending_deps for each INSERT statement of dependency edges (after their policy checks).';
-- source: sql/enqueue/transaction_checks.sql
-- sql/enqueue/transaction_checks.sql: the lexer of job SQL and the refusal of regular jobs that can never run in a transaction.
-- ---------------------------------------------------------------------------
-- Function: broker._sql_tokens(p_sql)
--   A lexer for the enqueue-time checks of job SQL (SQL has no parser to
--   call). Returns the tokens of p_sql in order: words and keywords
--   upper-cased, a quoted identifier as '"', a standard string literal as
--   '''', a number as '0', each other character as itself, and markers for
--   what the autonomous check refuses: '--' (a comment of either kind),
--   '$$' (a dollar quote or a $n parameter), 'E''' (a string with a prefix
--   such as E, U&, B or X, or with a backslash), 'U&"' (a Unicode
--   identifier). Comments and dollar quotes are skipped over whole (nested
--   block comments too), so what follows them is lexed as PostgreSQL would.
--   NULL for an unterminated quote or comment, or a text over 100,000
--   characters: the callers then refuse nothing they cannot be sure of.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._sql_tokens(p_sql text)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c      text[];
    n      integer;
    i      integer := 1;
    j      integer;
    depth  integer;
    tag    text;
    word   text;
    toks   text[] := ARRAY[]::text[];
BEGIN
    IF p_sql IS NULL OR pg_catalog.length(p_sql) OPERATOR(pg_catalog.>) 100000 THEN
        RETURN NULL;
    END IF;
    c := pg_catalog.regexp_split_to_array(p_sql, '');  -- (indexing an array is O(1), substr on text is not)
    n := pg_catalog.cardinality(c);
    WHILE i OPERATOR(pg_catalog.<=) n LOOP
        IF c[i] OPERATOR(pg_catalog.~) '^\s$' THEN
            i := i OPERATOR(pg_catalog.+) 1;
        ELSIF c[i] OPERATOR(pg_catalog.=) '-' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '-' THEN
            toks := toks OPERATOR(pg_catalog.||) '--'::text;
            WHILE i OPERATOR(pg_catalog.<=) n AND c[i] OPERATOR(pg_catalog.<>) E'\n' AND c[i] OPERATOR(pg_catalog.<>) E'\r' LOOP
                i := i OPERATOR(pg_catalog.+) 1;
            END LOOP;
        ELSIF c[i] OPERATOR(pg_catalog.=) '/' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '*' THEN
            toks := toks OPERATOR(pg_catalog.||) '--'::text;
            depth := 1;
            i := i OPERATOR(pg_catalog.+) 2;
            WHILE depth OPERATOR(pg_catalog.>) 0 LOOP
                IF i OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                ELSIF c[i] OPERATOR(pg_catalog.=) '/' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '*' THEN
                    depth := depth OPERATOR(pg_catalog.+) 1;
                    i := i OPERATOR(pg_catalog.+) 2;
                ELSIF c[i] OPERATOR(pg_catalog.=) '*' AND c[i OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '/' THEN
                    depth := depth OPERATOR(pg_catalog.-) 1;
                    i := i OPERATOR(pg_catalog.+) 2;
                ELSE
                    i := i OPERATOR(pg_catalog.+) 1;
                END IF;
            END LOOP;
        ELSIF c[i] OPERATOR(pg_catalog.=) '''' THEN
            -- a standard string; a backslash in it is refused (its meaning depends on settings)
            j := i OPERATOR(pg_catalog.+) 1;
            tag := '''';
            LOOP
                IF j OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                ELSIF c[j] OPERATOR(pg_catalog.=) '''' AND c[j OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '''' THEN
                    j := j OPERATOR(pg_catalog.+) 2;
                ELSIF c[j] OPERATOR(pg_catalog.=) '''' THEN
                    EXIT;
                ELSE
                    IF c[j] OPERATOR(pg_catalog.=) E'\\' THEN
                        tag := 'E''';
                    END IF;
                    j := j OPERATOR(pg_catalog.+) 1;
                END IF;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) tag;
            i := j OPERATOR(pg_catalog.+) 1;
        ELSIF c[i] OPERATOR(pg_catalog.=) '"' THEN
            j := i OPERATOR(pg_catalog.+) 1;
            LOOP
                IF j OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                ELSIF c[j] OPERATOR(pg_catalog.=) '"' AND c[j OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM '"' THEN
                    j := j OPERATOR(pg_catalog.+) 2;
                ELSIF c[j] OPERATOR(pg_catalog.=) '"' THEN
                    EXIT;
                ELSE
                    j := j OPERATOR(pg_catalog.+) 1;
                END IF;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) '"'::text;
            i := j OPERATOR(pg_catalog.+) 1;
        ELSIF c[i] OPERATOR(pg_catalog.=) '$' THEN
            -- $n, or a dollar quote $tag$ ... $tag$ (skipped whole)
            j := i OPERATOR(pg_catalog.+) 1;
            WHILE j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.~) '^[A-Za-z0-9_]$' LOOP
                j := j OPERATOR(pg_catalog.+) 1;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) '$$'::text;
            IF j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.=) '$'
               AND (j OPERATOR(pg_catalog.=) (i OPERATOR(pg_catalog.+) 1) OR c[i OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.!~) '^[0-9]$') THEN
                tag := pg_catalog.array_to_string(c[i:j], '');
                j := pg_catalog.strpos(pg_catalog.array_to_string(c[j OPERATOR(pg_catalog.+) 1:n], ''), tag);
                IF j OPERATOR(pg_catalog.=) 0 THEN
                    RETURN NULL;
                END IF;
                i := i OPERATOR(pg_catalog.+) pg_catalog.length(tag) OPERATOR(pg_catalog.+) j OPERATOR(pg_catalog.-) 1
                     OPERATOR(pg_catalog.+) pg_catalog.length(tag);
            ELSE
                i := j;
            END IF;
        ELSIF c[i] OPERATOR(pg_catalog.~) '^[A-Za-z_\u0080-\uFFFF]$' THEN
            j := i;
            WHILE j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.~) '^[A-Za-z0-9_$\u0080-\uFFFF]$' LOOP
                j := j OPERATOR(pg_catalog.+) 1;
            END LOOP;
            word := pg_catalog.upper(pg_catalog.array_to_string(c[i:j OPERATOR(pg_catalog.-) 1], ''));
            IF j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.=) '''' THEN
                -- E'...', B'...', X'...', N'...': skipped whatever escapes it uses (the autonomous check refuses it)
                toks := toks OPERATOR(pg_catalog.||) 'E'''::text;
                j := j OPERATOR(pg_catalog.+) 1;
                WHILE j OPERATOR(pg_catalog.<=) n AND c[j] OPERATOR(pg_catalog.<>) '''' LOOP
                    IF c[j] OPERATOR(pg_catalog.=) E'\\' THEN
                        j := j OPERATOR(pg_catalog.+) 1;
                    END IF;
                    j := j OPERATOR(pg_catalog.+) 1;
                END LOOP;
                IF j OPERATOR(pg_catalog.>) n THEN
                    RETURN NULL;
                END IF;
                i := j OPERATOR(pg_catalog.+) 1;
            ELSIF word OPERATOR(pg_catalog.=) 'U' AND c[j] IS NOT DISTINCT FROM '&' THEN
                RETURN toks OPERATOR(pg_catalog.||) 'U&"'::text;  -- refused; nothing after it matters
            ELSE
                toks := toks OPERATOR(pg_catalog.||) word;
                i := j;
            END IF;
        ELSIF c[i] OPERATOR(pg_catalog.~) '^[0-9]$' THEN
            WHILE i OPERATOR(pg_catalog.<=) n AND c[i] OPERATOR(pg_catalog.~) '^[0-9.]$' LOOP
                i := i OPERATOR(pg_catalog.+) 1;
            END LOOP;
            toks := toks OPERATOR(pg_catalog.||) '0'::text;
        ELSE
            toks := toks OPERATOR(pg_catalog.||) c[i];
            i := i OPERATOR(pg_catalog.+) 1;
        END IF;
    END LOOP;
    RETURN toks;
END;
$fn$;
COMMENT ON FUNCTION broker._sql_tokens(text) IS
    'Internal: the tokens of job SQL for the enqueue-time checks (words upper-cased, literals and identifiers as markers, comments and dollar quotes as refusal markers); NULL when unsure.';

-- ---------------------------------------------------------------------------
-- Function: broker._transaction_words()
--   A regular expression (case-insensitive) that every text
--   _never_in_transaction refuses matches: one of its statement words at the
--   start of the text or after a ';' (comments between allowed), or COMMIT /
--   ROLLBACK after a PL/pgSQL BEGIN, THEN, ELSE or LOOP. Texts it does not
--   match need no lexing; broker_add_jobs matches each element once. BEGIN
--   and END are left out (every PL/pgSQL body has them): a transaction block
--   that one of them opens or ends alone is left to fail at run time.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._transaction_words()
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE  -- (PL/pgSQL: a SQL function with SET is planned at every call)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN '(^|;)\s*((/\*.*?\*/|--[^\n]*)\s*)*(vacuum|commit|rollback|abort|start|savepoint|release|prepare|create|drop|alter|cluster|reindex)\M'
           '|\m(begin|then|else|loop)\s+(commit|rollback)\M';
END;
$$;
COMMENT ON FUNCTION broker._transaction_words() IS
    'Internal: a regular expression matched by every job text that can never run inside a transaction (a quick filter before lexing).';

-- ---------------------------------------------------------------------------
-- Function: broker._transaction_keywords()
--   A regular expression (case-insensitive) for the words that start the
--   statements _never_in_transaction refuses, each as a whole word: every
--   text it refuses matches (a refused statement's first token is one of
--   them, and a token is a whole word), and a text with none of them needs
--   no further look.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._transaction_keywords()
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE  -- (PL/pgSQL: a SQL function with SET is planned at every call)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN '\m(vacuum|commit|rollback|abort|begin|end|start|savepoint|release|prepare|create|drop|alter|cluster|reindex)\M';
END;
$$;
COMMENT ON FUNCTION broker._transaction_keywords() IS
    'Internal: a regular expression of the words that start a statement that can never run inside a transaction (the first quick filter).';

-- ---------------------------------------------------------------------------
-- Function: broker._may_not_run_in_transaction(p_sql)
--   The quick filter before lexing: true for every text
--   _never_in_transaction refuses (and for some it accepts), false for the
--   others, which need no lexing: _transaction_keywords, then
--   _transaction_words. The word test is what most texts stop at, a
--   fraction of the cost of _transaction_words' expression (its lazy comment
--   group is slow to match).
--   SQL without SET search_path on purpose: inlined into the enqueue
--   functions' queries and expressions; every operator is schema-qualified.
--   Calls: _transaction_keywords, _transaction_words
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._may_not_run_in_transaction(p_sql text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_sql OPERATOR(pg_catalog.~*) broker._transaction_keywords()
           AND p_sql OPERATOR(pg_catalog.~*) broker._transaction_words()
$$;
COMMENT ON FUNCTION broker._may_not_run_in_transaction(text) IS
    'Internal: the quick filter before lexing a job''s text: true for every text that can never run inside a transaction.';

-- ---------------------------------------------------------------------------
-- Function: broker._never_in_transaction(p_sql, p_language)
--   The statement of a job's text that can never run inside a transaction
--   (and so never inside the job executor), e.g. 'VACUUM' or 'COMMIT', or
--   NULL. Only what is certain: a statement hidden in EXECUTE or behind a
--   text this lexer gives up on is left to fail at run time. A quick regular
--   expression first, so that ordinary jobs pay one match.
--   Calls: _may_not_run_in_transaction, _sql_tokens
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._never_in_transaction(p_sql text, p_language text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t      text[];
    s      text[];
    i      integer;
    k      integer;
    v_p    integer;
    v_o    integer;
    v_conc boolean;
    prev   text;
    v_plpg boolean := p_language OPERATOR(pg_catalog.=) 'plpgsql';
BEGIN
    IF NOT COALESCE(broker._may_not_run_in_transaction(p_sql), false) THEN
        RETURN NULL;
    END IF;
    t := broker._sql_tokens(p_sql);
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    IF v_plpg THEN
        -- PL/pgSQL: a COMMIT or ROLLBACK statement (at a statement start) fails in any function
        FOR i IN 1 .. pg_catalog.cardinality(t) LOOP
            prev := CASE WHEN i OPERATOR(pg_catalog.>) 1 THEN t[i OPERATOR(pg_catalog.-) 1] ELSE ';' END;
            IF t[i] OPERATOR(pg_catalog.=) ANY (ARRAY['COMMIT', 'ROLLBACK'])
               AND prev OPERATOR(pg_catalog.=) ANY (ARRAY[';', 'BEGIN', 'THEN', 'ELSE', 'LOOP']) THEN
                RETURN t[i];
            END IF;
        END LOOP;
        RETURN NULL;
    END IF;
    k := 1;
    FOR i IN 1 .. pg_catalog.cardinality(t) OPERATOR(pg_catalog.+) 1 LOOP
        IF i OPERATOR(pg_catalog.>) pg_catalog.cardinality(t) OR t[i] OPERATOR(pg_catalog.=) ';' THEN
            s := t[k:i OPERATOR(pg_catalog.-) 1] OPERATOR(pg_catalog.||) ARRAY[NULL, NULL, NULL, NULL, NULL]::text[];
            k := i OPERATOR(pg_catalog.+) 1;
            s := ARRAY(SELECT x FROM pg_catalog.unnest(s) WITH ORDINALITY AS u(x, o) WHERE x IS DISTINCT FROM '--' ORDER BY o);
            IF s[1] OPERATOR(pg_catalog.=) ANY (ARRAY['VACUUM', 'COMMIT', 'ROLLBACK', 'ABORT', 'BEGIN', 'END', 'SAVEPOINT', 'RELEASE'])
               OR (s[1] OPERATOR(pg_catalog.=) 'START' AND s[2] IS NOT DISTINCT FROM 'TRANSACTION')
               OR (s[1] OPERATOR(pg_catalog.=) 'PREPARE' AND s[2] IS NOT DISTINCT FROM 'TRANSACTION')
               OR (s[1] OPERATOR(pg_catalog.=) 'CLUSTER' AND s[2] IS NULL)
               OR (s[1] OPERATOR(pg_catalog.=) ANY (ARRAY['CREATE', 'DROP']) AND s[2] OPERATOR(pg_catalog.=) ANY (ARRAY['DATABASE', 'TABLESPACE']))
               OR (s[1] OPERATOR(pg_catalog.=) 'ALTER' AND s[2] IS NOT DISTINCT FROM 'SYSTEM') THEN
                RETURN pg_catalog.concat_ws(' ', s[1], CASE WHEN s[1] OPERATOR(pg_catalog.=) ANY (ARRAY['START', 'PREPARE', 'CREATE', 'DROP', 'ALTER']) THEN s[2] END);
            ELSIF s[1] OPERATOR(pg_catalog.=) 'CREATE' AND 'INDEX' OPERATOR(pg_catalog.=) ANY (s[2:3])
                  AND 'CONCURRENTLY' OPERATOR(pg_catalog.=) ANY (s[3:4]) THEN
                RETURN 'CREATE INDEX CONCURRENTLY';
            ELSIF s[1] OPERATOR(pg_catalog.=) 'DROP' AND s[2] IS NOT DISTINCT FROM 'INDEX' AND s[3] IS NOT DISTINCT FROM 'CONCURRENTLY' THEN
                RETURN 'DROP INDEX CONCURRENTLY';
            ELSIF s[1] OPERATOR(pg_catalog.=) 'REINDEX' THEN
                -- REINDEX [(options)] kind [CONCURRENTLY] name: the kind after the options, CONCURRENTLY
                -- after the kind or as an option without a value or with a true one
                v_p := 2;
                v_conc := false;
                IF s[2] IS NOT DISTINCT FROM '(' THEN
                    v_p := pg_catalog.array_position(s, ')') OPERATOR(pg_catalog.+) 1;
                    FOR v_o IN 3 .. COALESCE(v_p OPERATOR(pg_catalog.-) 2, 0) LOOP
                        v_conc := v_conc OR (s[v_o] OPERATOR(pg_catalog.=) 'CONCURRENTLY'
                                         AND s[v_o OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.=) ANY (ARRAY[',', ')', 'TRUE', 'ON']));
                    END LOOP;
                END IF;
                v_conc := v_conc OR s[v_p OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM 'CONCURRENTLY';
                IF s[v_p] OPERATOR(pg_catalog.=) ANY (ARRAY['INDEX', 'TABLE', 'SCHEMA', 'DATABASE', 'SYSTEM'])
                   AND (v_conc OR s[v_p] OPERATOR(pg_catalog.=) ANY (ARRAY['SCHEMA', 'DATABASE', 'SYSTEM'])) THEN
                    RETURN 'REINDEX ' OPERATOR(pg_catalog.||) s[v_p] OPERATOR(pg_catalog.||) CASE WHEN v_conc THEN ' CONCURRENTLY' ELSE '' END;
                END IF;
            END IF;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._never_in_transaction(text, text) IS
    'Internal: the statement of a job''s text that can never run inside a transaction (VACUUM, COMMIT, CREATE INDEX CONCURRENTLY, ...), or NULL.';
-- source: sql/enqueue/autonomous.sql
-- sql/enqueue/autonomous.sql: the enqueue-time checks of a job's SQL against how it runs (autonomous jobs: one allowed statement, a role with the arrangement).
-- ---------------------------------------------------------------------------
-- Function: broker._autonomous_kind(p_fn, p_sql)
--   The enqueue-time check of an autonomous job's text: exactly one
--   statement of an allowed kind, in a shape this lexer (_sql_tokens) is sure
--   of: no comment, no dollar quote or $n, no string with a prefix or a
--   backslash, no Unicode identifier, no ';' but one at the end, and only
--   the characters ( ) , . = < > + - * / [ ] : besides words, numbers,
--   standard strings and quoted identifiers. Returns the kind: VACUUM,
--   ANALYZE, CREATE INDEX CONCURRENTLY, REINDEX CONCURRENTLY, REFRESH
--   MATERIALIZED VIEW CONCURRENTLY or CALL. The runner parses the text again
--   with PostgreSQL's own parser (pglast) before it runs it.
-- Errors: 22023 a shape outside the above; 0A000 another kind of statement.
--   Calls: _sql_tokens, _autonomous_refuse_kind
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._autonomous_kind(p_fn text, p_sql text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t    text[] := broker._sql_tokens(p_sql);
    n    integer := pg_catalog.cardinality(t);
    x    text;
    p    integer := 2;  -- REINDEX: where the object kind is (after its options)
    c_hint CONSTANT text := 'An autonomous job is one of: VACUUM ..., ANALYZE ..., CREATE [UNIQUE] INDEX CONCURRENTLY ..., '
                            'REINDEX [(...)] INDEX|TABLE|SCHEMA|DATABASE CONCURRENTLY ..., REFRESH MATERIALIZED VIEW CONCURRENTLY ..., '
                            'CALL ...(...); write it without comments or dollar quoting, with standard string literals '
                            '(no backslashes) and, for names that need it, double quotes.';
BEGIN
    IF t IS NULL THEN
        RAISE EXCEPTION '%: an autonomous job''s SQL must be at most 100,000 characters with every quote and comment closed', p_fn
            USING ERRCODE = 'invalid_parameter_value', HINT = c_hint;
    END IF;
    IF n OPERATOR(pg_catalog.>) 0 AND t[n] OPERATOR(pg_catalog.=) ';' THEN
        n := n OPERATOR(pg_catalog.-) 1;
        t := t[1:n];
    END IF;
    FOREACH x IN ARRAY t LOOP
        IF x OPERATOR(pg_catalog.=) ANY (ARRAY['--', '$$', 'E''', 'U&"', ';'])
           OR (pg_catalog.length(x) OPERATOR(pg_catalog.=) 1 AND x OPERATOR(pg_catalog.!~) '^[A-Za-z_0-9"''(),.=<>+*/:\[\]-]$'
               AND x OPERATOR(pg_catalog.!~) '^[\u0080-\uFFFF]$') THEN
            RAISE EXCEPTION '%: an autonomous job is one statement without %', p_fn,
                CASE x WHEN '--' THEN 'comments' WHEN '$$' THEN 'dollar quoting or $n parameters'
                       WHEN 'E''' THEN 'escape-string, bit-string or backslash literals' WHEN 'U&"' THEN 'Unicode-escaped names'
                       WHEN ';' THEN 'a second statement (a '';'' before the end)'
                       ELSE pg_catalog.format('the character %L', x) END
                USING ERRCODE = 'invalid_parameter_value', HINT = c_hint;
        END IF;
    END LOOP;
    IF t[1] OPERATOR(pg_catalog.=) 'REINDEX' AND t[2] IS NOT DISTINCT FROM '(' THEN
        p := pg_catalog.array_position(t, ')') OPERATOR(pg_catalog.+) 1;
    END IF;
    RETURN CASE
        WHEN t[1] OPERATOR(pg_catalog.=) 'VACUUM' THEN 'VACUUM'
        WHEN t[1] OPERATOR(pg_catalog.=) ANY (ARRAY['ANALYZE', 'ANALYSE']) THEN 'ANALYZE'
        WHEN t[1] OPERATOR(pg_catalog.=) 'CREATE'
             AND ((t[2] IS NOT DISTINCT FROM 'INDEX' AND t[3] IS NOT DISTINCT FROM 'CONCURRENTLY')
                  OR (t[2] IS NOT DISTINCT FROM 'UNIQUE' AND t[3] IS NOT DISTINCT FROM 'INDEX' AND t[4] IS NOT DISTINCT FROM 'CONCURRENTLY'))
             THEN 'CREATE INDEX CONCURRENTLY'
        WHEN t[1] OPERATOR(pg_catalog.=) 'REINDEX' AND p IS NOT NULL
             AND t[p] OPERATOR(pg_catalog.=) ANY (ARRAY['INDEX', 'TABLE', 'SCHEMA', 'DATABASE'])
             AND t[p OPERATOR(pg_catalog.+) 1] IS NOT DISTINCT FROM 'CONCURRENTLY'
             THEN 'REINDEX CONCURRENTLY'
        WHEN t[1] OPERATOR(pg_catalog.=) 'REFRESH' AND t[2:4] OPERATOR(pg_catalog.=) ARRAY['MATERIALIZED', 'VIEW', 'CONCURRENTLY']
             THEN 'REFRESH MATERIALIZED VIEW CONCURRENTLY'
        WHEN t[1] OPERATOR(pg_catalog.=) 'CALL' THEN 'CALL'
        ELSE broker._autonomous_refuse_kind(p_fn, COALESCE(pg_catalog.array_to_string(t[1:2], ' '), ''), c_hint) END;
END;
$fn$;
COMMENT ON FUNCTION broker._autonomous_kind(text, text) IS
    'Internal: the kind of an autonomous job''s one statement (VACUUM, ANALYZE, CREATE INDEX CONCURRENTLY, REINDEX CONCURRENTLY, REFRESH MATERIALIZED VIEW CONCURRENTLY, CALL); raises 22023/0A000 for anything else.';

-- ---------------------------------------------------------------------------
-- Function: broker._autonomous_refuse_kind(p_fn, p_found, p_hint)
--   Raises 0A000: an autonomous job of another kind of statement.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._autonomous_refuse_kind(p_fn text, p_found text, p_hint text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION '%: an autonomous job cannot run %', p_fn, pg_catalog.quote_literal(p_found)
        USING ERRCODE = 'feature_not_supported',
              HINT = p_hint OPERATOR(pg_catalog.||) ' Other SQL runs as a regular job (p_autonomous => false).';
END;
$$;
COMMENT ON FUNCTION broker._autonomous_refuse_kind(text, text, text) IS
    'Internal: raise 0A000 for an autonomous job of a statement kind that is not allowed.';

-- ---------------------------------------------------------------------------
-- Function: broker._check_autonomous(p_fn, p_sql, p_language, p_run_as, p_autonomous)
--   The enqueue-time checks of a job's text against how it will run (every
--   enqueue path: broker_add_job, broker_add_jobs, the schedules, and raw
--   INSERTs through the insert policy). A regular job whose text can never
--   run inside a transaction is refused (0A000, the hint names the opt-in);
--   an autonomous job must be SQL, pass _autonomous_kind, and its run_as role
--   must have the administrator's arrangement (42501 with the fix in the
--   hint): set_role for the maintenance statements, login for CALL too.
--   Returns true (it raises otherwise).
--   Calls: _never_in_transaction, _autonomous_kind, _autonomous_via
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._check_autonomous(p_fn text, p_sql text, p_language text, p_run_as name, p_autonomous boolean)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_kind text;
    v_via  text;
BEGIN
    IF NOT COALESCE(p_autonomous, false) THEN
        v_kind := broker._never_in_transaction(p_sql, p_language);
        IF v_kind IS NOT NULL THEN
            RAISE EXCEPTION '%: % cannot run inside a transaction, and a job runs inside one', p_fn, v_kind
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Enqueue it as an autonomous job: p_autonomous => true (the key "autonomous" in broker_add_jobs), '
                             'once an administrator allowed them for the role (broker.broker_allow_autonomous, docs/jobs.md).';
        END IF;
        RETURN true;
    END IF;
    IF p_language IS DISTINCT FROM 'sql' THEN
        RAISE EXCEPTION '%: an autonomous job is SQL, not %', p_fn, pg_catalog.quote_literal(p_language)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Put PL/pgSQL that commits in a procedure and CALL it.';
    END IF;
    v_kind := broker._autonomous_kind(p_fn, p_sql);
    v_via := broker._autonomous_via(p_run_as);
    IF v_via IS NULL THEN
        RAISE EXCEPTION '%: role % may not run autonomous jobs', p_fn, pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('An administrator allows it per role: for maintenance statements GRANT %1$I TO broker_runtime; '
                                           'SELECT broker.broker_allow_autonomous(%2$L); for CALL too, a login for %1$s in the runner''s '
                                           'autonomous_logins and SELECT broker.broker_allow_autonomous(%2$L, ''login'') (docs/security.md).',
                                           p_run_as, p_run_as);
    END IF;
    IF v_kind OPERATOR(pg_catalog.=) 'CALL' AND v_via OPERATOR(pg_catalog.<>) 'login' THEN
        RAISE EXCEPTION '%: role % may run maintenance statements autonomously, not CALL', p_fn, pg_catalog.quote_ident(p_run_as)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('A CALL runs on a connection that logs in as %1$s: an administrator configures a login for it in '
                                           'the runner''s autonomous_logins, then SELECT broker.broker_allow_autonomous(%2$L, ''login'').',
                                           p_run_as, p_run_as);
    END IF;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker._check_autonomous(text, text, text, name, boolean) IS
    'Internal: enqueue-time check of a job''s SQL against how it runs (regular jobs: nothing that can never run in a transaction; autonomous: one allowed statement and the role''s arrangement).';

-- source: sql/enqueue/rules.sql
-- sql/enqueue/rules.sql: the rules a job's fields obey, for every enqueue path (one job, many, schedules).
-- ---------------------------------------------------------------------------
-- Type: broker._job_fields
--   A job as the enqueue functions take it: broker_add_job's parameters
--   without p_ (also the keys of broker_add_jobs' elements), before the
--   defaults that need the caller (run_as, job_group, run_after) are filled
--   in. broker._job_problem checks one; broker._add_jobs holds an array of
--   them, one per element. The table's CHECK constraints stay as the last
--   line of defence behind these rules.
-- ---------------------------------------------------------------------------
-- broker._job_fields: created by the base version (changes: ALTER TYPE in the manifest)
COMMENT ON TYPE broker._job_fields IS
    'Internal: a job''s fields as the enqueue functions take them (broker_add_job''s parameters without p_, broker_add_jobs'' keys).';

-- ---------------------------------------------------------------------------
-- Type: broker._job_edge
--   One dependency of an element of broker_add_jobs: the element (ord) and
--   the job id or the group it waits on (one of the two).
-- ---------------------------------------------------------------------------
-- broker._job_edge: created by the base version (changes: ALTER TYPE in the manifest)
COMMENT ON TYPE broker._job_edge IS
    'Internal: a dependency of an element of broker_add_jobs (its ord, and the job id or group it waits on).';

-- ---------------------------------------------------------------------------
-- Type: broker._added_job
--   What an element of broker_add_jobs resolved to: its job (is_new: made by
--   this call, else an unfinished job of its idempotency key), and the key.
-- ---------------------------------------------------------------------------
-- broker._added_job: created by the base version (changes: ALTER TYPE in the manifest)
COMMENT ON TYPE broker._added_job IS
    'Internal: the job an element of broker_add_jobs resolved to (made now, or the unfinished job of its key).';

-- ---------------------------------------------------------------------------
-- Function: broker._blank_in(p_names)
--   Does p_names hold a NULL or a blank name? (A query, kept out of
--   _job_problem so that the planner can still inline that one.)
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._blank_in(p_names text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.unnest(p_names) AS g WHERE g IS NULL OR pg_catalog.btrim(g) = '')
$$;
COMMENT ON FUNCTION broker._blank_in(text[]) IS
    'Internal: p_names holds a NULL or blank name (broker._job_problem).';

-- ---------------------------------------------------------------------------
-- Function: broker._job_problem(j)
--   The rules of a job's own fields, each once: the first one j breaks, as
--   ARRAY[sqlstate, field, what is wrong, hint or NULL] (field: the name in
--   broker._job_fields), else NULL. Raised by broker._job_field_error, which
--   puts the caller's name and the caller's name of the field in front.
--   What needs more than the fields (run_as rights: _check_run_as; the SQL
--   against how it runs: _check_autonomous; tenancy, schedule ids,
--   dependencies) is checked by the callers after this.
--   Without SET search_path on purpose, like broker._claimable: one SELECT
--   of one expression, so the planner inlines it into the calling statement
--   (broker_add_jobs checks a whole array in one query); every function and
--   operator is schema-qualified.
--   Calls: _blank_in
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._job_problem(j broker._job_fields)
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN j.job_name IS NULL THEN ARRAY['22004', 'job_name', 'must not be NULL', NULL]
        WHEN j.execute_str IS NULL THEN ARRAY['22004', 'execute_str', 'must not be NULL', NULL]
        WHEN j.job_queue IS NULL THEN ARRAY['22004', 'job_queue', 'must not be NULL', NULL]
        WHEN j.job_priority IS NULL THEN ARRAY['22004', 'job_priority', 'must not be NULL', NULL]
        WHEN j.job_language IS NULL THEN ARRAY['22004', 'job_language', 'must not be NULL', NULL]
        WHEN j.max_attempts IS NULL THEN ARRAY['22004', 'max_attempts', 'must not be NULL', NULL]
        WHEN pg_catalog.btrim(j.job_name) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(j.job_name) OPERATOR(pg_catalog.>) 200
            THEN ARRAY['22023', 'job_name', 'must be 1 to 200 characters and not blank', NULL]
        WHEN pg_catalog.btrim(j.execute_str) OPERATOR(pg_catalog.=) ''
            THEN ARRAY['22023', 'execute_str', 'is empty; give the SQL the job should run', NULL]
        WHEN pg_catalog.lower(pg_catalog.btrim(j.job_language)) OPERATOR(pg_catalog.<>) ALL (ARRAY['sql', 'plpgsql', 'task'])
            THEN ARRAY['22023', 'job_language', pg_catalog.format('must be sql or plpgsql, got %L', j.job_language),
                       'Use ''sql'' or ''plpgsql''.']
        -- a task sits in its name's queue (negative: no runner serves it), which broker_add_task finds
        WHEN pg_catalog.lower(pg_catalog.btrim(j.job_language)) OPERATOR(pg_catalog.=) 'task'
             AND (j.job_queue OPERATOR(pg_catalog.>=) 0 OR COALESCE(j.autonomous, false))
            THEN ARRAY['22023', 'job_language', 'task: tasks are enqueued with broker_add_task', 'Call broker.broker_add_task(task, args, ...).']
        WHEN j.job_queue OPERATOR(pg_catalog.<) 1 AND pg_catalog.lower(pg_catalog.btrim(j.job_language)) OPERATOR(pg_catalog.<>) 'task'
            THEN ARRAY['22023', 'job_queue', pg_catalog.format('must be >= 1, got %s', j.job_queue), NULL]
        -- queues are 1..1000 (metric series, runner memory)
        WHEN j.job_queue OPERATOR(pg_catalog.>) 1000
            THEN ARRAY['22023', 'job_queue', pg_catalog.format('must be <= 1000, got %s', j.job_queue), NULL]
        WHEN j.max_attempts OPERATOR(pg_catalog.<) 1
            THEN ARRAY['22023', 'max_attempts', pg_catalog.format('must be >= 1, got %s', j.max_attempts), NULL]
        WHEN pg_catalog.btrim(COALESCE(j.job_group, j.job_name)) OPERATOR(pg_catalog.=) ''
             OR pg_catalog.length(COALESCE(j.job_group, j.job_name)) OPERATOR(pg_catalog.>) 200
            THEN ARRAY['22023', 'job_group', 'must be 1 to 200 characters and not blank', NULL]
        WHEN pg_catalog.btrim(j.idempotency_key) OPERATOR(pg_catalog.=) ''
            THEN ARRAY['22023', 'idempotency_key', 'must not be blank (NULL for none)', NULL]
        -- (the unique index holds ~2.7 kB)
        WHEN pg_catalog.length(j.idempotency_key) OPERATOR(pg_catalog.>) 512
            THEN ARRAY['22023', 'idempotency_key',
                       pg_catalog.format('must be at most 512 characters, got %s', pg_catalog.length(j.idempotency_key)), NULL]
        WHEN pg_catalog.starts_with(j.idempotency_key, 'broker_schedule:')
            THEN ARRAY['22023', 'idempotency_key', 'must not start with broker_schedule: (reserved for schedules)', NULL]
        WHEN pg_catalog.btrim(j.concurrency_key) OPERATOR(pg_catalog.=) ''
            THEN ARRAY['22023', 'concurrency_key', 'must not be blank (NULL for none)', NULL]
        WHEN pg_catalog.length(j.concurrency_key) OPERATOR(pg_catalog.>) 200
            THEN ARRAY['22023', 'concurrency_key',
                       pg_catalog.format('must be at most 200 characters, got %s', pg_catalog.length(j.concurrency_key)), NULL]
        WHEN j.timeout OPERATOR(pg_catalog.<=) interval '0'
            THEN ARRAY['22023', 'timeout', pg_catalog.format('must be positive, got %s', j.timeout), NULL]
        WHEN pg_catalog.array_ndims(j.depends_on_job_ids) OPERATOR(pg_catalog.>) 1
            THEN ARRAY['22023', 'depends_on_job_ids', 'must be a flat array of job ids', NULL]
        WHEN pg_catalog.array_position(j.depends_on_job_ids, NULL) IS NOT NULL
            THEN ARRAY['22004', 'depends_on_job_ids', 'must not contain NULL', NULL]
        WHEN pg_catalog.array_ndims(j.depends_on_groups) OPERATOR(pg_catalog.>) 1
            THEN ARRAY['22023', 'depends_on_groups', 'must be a flat array of group names', NULL]
        WHEN pg_catalog.cardinality(j.depends_on_groups) OPERATOR(pg_catalog.>) 100
            THEN ARRAY['22023', 'depends_on_groups',
                       pg_catalog.format('may name at most 100 groups, got %s', pg_catalog.cardinality(j.depends_on_groups)), NULL]
        WHEN j.depends_on_groups IS NOT NULL AND broker._blank_in(j.depends_on_groups)
            THEN ARRAY['22023', 'depends_on_groups', 'must not contain NULL or blank group names', NULL]
    END
$$;
COMMENT ON FUNCTION broker._job_problem(broker._job_fields) IS
    'Internal: the first rule of a job''s fields that j breaks, as ARRAY[sqlstate, field, message, hint], else NULL (every enqueue path).';

-- ---------------------------------------------------------------------------
-- Function: broker._job_field_error(p_fn, p_field, p_problem)
--   Raises p_problem (from broker._job_problem) as '<p_fn>: <p_field>
--   <message>' with its SQLSTATE and hint: p_fn is the calling function
--   (for broker_add_jobs with the element, 'broker_add_jobs: element 3'),
--   p_field the field as the caller names it (p_job_queue, job_queue).
--   Declared to return text so that a query can call it where a value is
--   expected; VOLATILE so that the planner never runs it ahead of the row.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._job_field_error(p_fn text, p_field text, p_problem text[])
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_problem[4] IS NULL THEN
        RAISE EXCEPTION '%: % %', p_fn, p_field, p_problem[3] USING ERRCODE = p_problem[1];
    END IF;
    RAISE EXCEPTION '%: % %', p_fn, p_field, p_problem[3] USING ERRCODE = p_problem[1], HINT = p_problem[4];
END;
$$;
COMMENT ON FUNCTION broker._job_field_error(text, text, text[]) IS
    'Internal: raise a broken job field rule (broker._job_problem) as ''<function>: <field> <message>''.';
-- source: sql/enqueue/add_job.sql
-- sql/enqueue/add_job.sql: enqueueing one job (broker_add_job, broker_add_job_simple).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_job(p_job_name, p_execute_str, p_job_queue,
--     p_job_priority, p_job_language, p_run_as, p_schedule_id,
--     p_depends_on_job_ids, p_idempotency_key, p_max_attempts, p_job_group,
--     p_depends_on_groups, p_run_after, p_timeout, p_search_path, p_tenant_id, p_autonomous,
--     p_concurrency_key)
--   Enqueues a job for the caller's tenant and returns (job_id, is_new).
--   * p_tenant_id names the tenant for this call only (checked as by
--     broker_set_tenant, and the caller must be allowed to act for it, as for
--     broker.tenant_id); default: the transaction's tenant.
--   The first twelve parameters are the original broker's, in its order.
--   * p_job_group defaults to p_job_name; p_search_path (the search_path the
--     job's SQL runs with) defaults to the caller's, evaluated at the call.
--   * A job waits for every job in p_depends_on_job_ids and for every job of
--     each group in p_depends_on_groups that is unfinished (pending or
--     running) when it is enqueued or that joins the group later while it is
--     still pending.
--   * With p_idempotency_key, an unfinished job of the same tenant and key is
--     returned instead (is_new = false); once that job has finished the key
--     may be used again.
--   * p_autonomous: the job runs outside a transaction block, on a
--     connection of its own, at least once (VACUUM, ANALYZE, CREATE INDEX /
--     REINDEX / REFRESH MATERIALIZED VIEW CONCURRENTLY, or a CALL of a
--     procedure that commits): one such statement, for a role an
--     administrator allowed (broker_allow_autonomous). A regular job whose
--     text can never run inside a transaction is refused (0A000).
--   * p_concurrency_key: the key whose limits (broker_set_limit: jobs
--     running at once, starts per second) the job counts against; NULL
--     (default) for none. At most 200 characters, not blank.
--   * SECURITY INVOKER on purpose: the rows are written with the caller's
--     rights, so the row-level security policies check the caller's tenant,
--     identity (enqueued_by) and run_as as that caller; the triggers on the
--     tables do the bookkeeping that needs more rights (dependency counters,
--     cycle checks). The job runs as run_as through its executor, created
--     here when missing (see broker_create_executor).
-- Errors: those of broker._job_problem, as 'broker_add_job: p_<field> ...':
--   22004 NULL where a value is required; 22023 invalid value (also a queue
--   outside 1..1000, an idempotency key over 512 characters or starting with
--   'broker_schedule:', reserved for the tick, a blank concurrency key or
--   one over 200 characters);
--   42704 unknown run_as role; 42501 run_as not allowed, or the role may not
--   act for the tenant (strict tenancy); 23503 unknown
--   schedule or dependency job; 55000 dependency job already failed or
--   cancelled; 23514 self-dependency or dependency cycle; those of
--   broker._check_autonomous (0A000 SQL that can never run in a transaction
--   without p_autonomous; with it 22023/0A000 SQL it does not accept, 42501
--   a role without the arrangement).
-- Example:
--   SELECT * FROM broker.broker_add_job('refresh sales', 'REFRESH MATERIALIZED VIEW sales_daily',
--                                    p_job_priority => 5, p_max_attempts => 3, p_timeout => '10 minutes');
--   SELECT * FROM broker.broker_add_job('acme report', 'CALL acme.report()', p_tenant_id => 'acme');
--   SELECT * FROM broker.broker_add_job('reindex orders', 'REINDEX INDEX CONCURRENTLY orders_pkey', p_autonomous => true);
--   SELECT * FROM broker.broker_add_job('sync 42', 'CALL crm.sync(42)', p_concurrency_key => 'crm-api');
--   Calls: _set_tenant, broker_current_tenant, _job_problem, _job_field_error, _tenant_allowed, _check_run_as, _may_not_run_in_transaction, _check_autonomous, _lock_dependency_keys, broker_create_executor, _notify_queues, _due_time
--   Tables: reads broker_tenant_roles, broker_schedule; writes broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_job(
    p_job_name            text,
    p_execute_str         text,
    p_job_queue           integer     DEFAULT 1,
    p_job_priority        integer     DEFAULT 0,
    p_job_language        text        DEFAULT 'sql',
    p_run_as              text        DEFAULT NULL,
    p_schedule_id         bigint      DEFAULT NULL,
    p_depends_on_job_ids  bigint[]    DEFAULT NULL,
    p_idempotency_key     text        DEFAULT NULL,
    p_max_attempts        integer     DEFAULT 1,
    p_job_group           text        DEFAULT NULL,
    p_depends_on_groups   text[]      DEFAULT NULL,
    p_run_after           timestamptz DEFAULT NULL,
    p_timeout             interval    DEFAULT NULL,
    p_search_path         text        DEFAULT pg_catalog.current_setting('search_path'),
    p_tenant_id           text        DEFAULT NULL,
    p_autonomous          boolean     DEFAULT false,
    p_concurrency_key     text        DEFAULT NULL)
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant   text := broker.broker_current_tenant();
    v_language text := pg_catalog.lower(pg_catalog.btrim(p_job_language));
    v_group    text := COALESCE(p_job_group, p_job_name);
    v_run_as   name;
    v_ids      bigint[];
    v_groups   text[];
    v_id       bigint;
    v_has_deps boolean;
    v_saved    text;
    v_problem  text[];
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant('broker_add_job', p_tenant_id);
        RETURN QUERY SELECT a.job_id, a.is_new FROM broker.broker_add_job(p_job_name, p_execute_str, p_job_queue,
            p_job_priority, p_job_language, p_run_as, p_schedule_id, p_depends_on_job_ids, p_idempotency_key,
            p_max_attempts, p_job_group, p_depends_on_groups, p_run_after, p_timeout, p_search_path,
            p_autonomous => p_autonomous, p_concurrency_key => p_concurrency_key) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    ---- the fields' own rules (broker._job_problem, one expression) -----------
    v_problem := broker._job_problem(ROW(p_job_name, p_execute_str, p_job_queue, p_job_priority, p_job_language,
        p_run_as, p_schedule_id, p_depends_on_job_ids, p_idempotency_key, p_max_attempts, p_job_group,
        p_depends_on_groups, p_run_after, p_timeout, p_search_path, p_autonomous, p_concurrency_key)::broker._job_fields);
    IF v_problem IS NOT NULL THEN
        PERFORM broker._job_field_error('broker_add_job', 'p_' OPERATOR(pg_catalog.||) v_problem[2], v_problem);
    END IF;

    IF NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_add_job: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
    END IF;

    ---- run_as: the enqueuer, or a role it is a member of ---------------------
    v_run_as := CASE WHEN p_run_as IS NULL THEN CURRENT_USER
                     ELSE broker._check_run_as('broker_add_job', p_run_as) END;
    -- (a regular job's text the quick filter of _never_in_transaction does not match is never refused:
    -- most calls skip the check's call)
    -- (a task's execute_str is its arguments, run by application code: no SQL to check, no executor)
    IF v_language OPERATOR(pg_catalog.<>) 'task'
       AND (COALESCE(p_autonomous, false) OR broker._may_not_run_in_transaction(p_execute_str)) THEN
        PERFORM broker._check_autonomous('broker_add_job', p_execute_str, v_language, v_run_as, p_autonomous);
    END IF;

    IF p_schedule_id IS NOT NULL THEN  -- (nested: the query runs only when there is an id)
        IF NOT EXISTS (SELECT 1 FROM broker.broker_schedule AS s
                        WHERE s.schedule_id OPERATOR(pg_catalog.=) p_schedule_id
                          AND s.tenant_id OPERATOR(pg_catalog.=) v_tenant) THEN
            RAISE EXCEPTION 'broker_add_job: schedule % does not exist', p_schedule_id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END IF;

    ---- idempotency fast path ----------------------------------------------
    IF p_idempotency_key IS NOT NULL THEN
        SELECT j.job_id INTO v_id FROM broker.broker_jobs AS j
         WHERE j.tenant_id OPERATOR(pg_catalog.=) v_tenant
           AND j.idempotency_key OPERATOR(pg_catalog.=) p_idempotency_key
           AND j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]);
        IF FOUND THEN
            RETURN QUERY SELECT v_id, false;
            RETURN;
        END IF;
    END IF;

    IF pg_catalog.cardinality(p_depends_on_job_ids) OPERATOR(pg_catalog.>) 0 THEN
        v_ids := ARRAY(SELECT DISTINCT x FROM pg_catalog.unnest(p_depends_on_job_ids) AS x ORDER BY 1);
    END IF;
    IF pg_catalog.cardinality(p_depends_on_groups) OPERATOR(pg_catalog.>) 0 THEN
        v_groups := ARRAY(SELECT DISTINCT g FROM pg_catalog.unnest(p_depends_on_groups) AS g ORDER BY 1);
    END IF;

    IF v_group OPERATOR(pg_catalog.=) ANY (v_groups) THEN
        RAISE EXCEPTION 'broker_add_job: job % cannot depend on its own group %',
            pg_catalog.quote_literal(p_job_name), pg_catalog.quote_literal(v_group)
            USING ERRCODE = 'check_violation';
    END IF;

    v_has_deps := v_ids IS NOT NULL OR v_groups IS NOT NULL;  -- (each set only when not empty)
    IF v_has_deps THEN
        -- Take every dependency lock this enqueue needs now, in the global order
        -- (the triggers below take the same ones again, which is then free).
        -- Without dependencies the insert trigger takes the only one, its group's.
        PERFORM broker._lock_dependency_keys(v_tenant, ARRAY[v_group], v_groups, NULL, v_ids);
    END IF;

    -- The job will run inside its run_as role's executor: make sure it has one
    -- (a look-up by name here; broker_create_executor and the run check it fully).
    IF v_language OPERATOR(pg_catalog.<>) 'task' AND pg_catalog.to_regprocedure(pg_catalog.format('%I.run_job(text,text,text)',
           'broker_exec_' OPERATOR(pg_catalog.||) pg_catalog.to_regrole(pg_catalog.quote_ident(v_run_as))::pg_catalog.oid::pg_catalog.text)) IS NULL THEN
        PERFORM broker.broker_create_executor(v_run_as);
    END IF;

    ---- insert -------------------------------------------------------------
    IF p_idempotency_key IS NULL AND NOT v_has_deps THEN
        -- the common case: one plain INSERT (its trigger notifies the queue)
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, schedule_id, max_attempts, run_after, job_timeout, job_search_path, autonomous, concurrency_key)
        VALUES (p_job_name, v_group, p_execute_str, v_language, p_job_queue, p_job_priority,
                v_run_as, p_schedule_id, p_max_attempts,
                COALESCE(p_run_after, pg_catalog.now()), p_timeout, COALESCE(p_search_path, ''), COALESCE(p_autonomous, false),
                p_concurrency_key)
        RETURNING j.job_id INTO v_id;
        job_id := v_id;
        is_new := true;
        RETURN NEXT;
        RETURN;
    END IF;
    IF v_has_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', 'on', true);
    END IF;
    LOOP
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, schedule_id, idempotency_key, max_attempts, run_after, job_timeout, job_search_path, autonomous,
                concurrency_key)
        VALUES (p_job_name, v_group, p_execute_str, v_language, p_job_queue, p_job_priority,
                v_run_as, p_schedule_id, p_idempotency_key, p_max_attempts,
                COALESCE(p_run_after, pg_catalog.now()), p_timeout, COALESCE(p_search_path, ''), COALESCE(p_autonomous, false),
                p_concurrency_key)
        ON CONFLICT (tenant_id, idempotency_key)
           WHERE idempotency_key IS NOT NULL AND complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
        DO NOTHING
        RETURNING j.job_id INTO v_id;
        EXIT WHEN v_id IS NOT NULL;
        -- A concurrent transaction holds the key: return its job, unless it just finished.
        SELECT j.job_id INTO v_id FROM broker.broker_jobs AS j
         WHERE j.tenant_id OPERATOR(pg_catalog.=) v_tenant
           AND j.idempotency_key OPERATOR(pg_catalog.=) p_idempotency_key
           AND j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]);
        IF FOUND THEN
            PERFORM pg_catalog.set_config('broker.defer_notify', '', true);
            RETURN QUERY SELECT v_id, false;
            RETURN;
        END IF;
    END LOOP;

    IF v_has_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', '', true);
        -- One statement: each edge is validated by its row trigger, then all are
        -- locked, cycle-checked and counted by the statement trigger.
        INSERT INTO broker.broker_job_dependency (job_id, depends_on_job_id, depends_on_group)
        SELECT v_id, x, NULL FROM pg_catalog.unnest(v_ids) AS x
        UNION ALL
        SELECT v_id, NULL, g FROM pg_catalog.unnest(v_groups) AS g;
        -- wake a runner only if nothing it waits on is unfinished
        PERFORM broker._notify_queues(ARRAY[p_job_queue])
           FROM broker.broker_jobs AS j
          WHERE j.job_id OPERATOR(pg_catalog.=) v_id
            AND j.pending_deps OPERATOR(pg_catalog.=) 0
            AND j.run_after OPERATOR(pg_catalog.<=) broker._due_time();
    END IF;

    RETURN QUERY SELECT v_id, true;
END;
$$;
COMMENT ON FUNCTION broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text, text[], timestamptz, interval, text, text, boolean, text) IS
    'Enqueues a job (SQL or PL/pgSQL) for the current tenant with optional id/group dependencies, idempotency key, retries, delay, timeout and concurrency key, or as an autonomous job (outside a transaction); returns (job_id, is_new).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_job_simple(p_job_name, p_execute_str,
--     p_job_priority, p_depends_on_groups)
--   Shortcut for the common case: queue 1, SQL, one attempt, group = name.
-- Example:
--   SELECT * FROM broker.broker_add_job_simple('transform', 'CALL etl.transform()', 5, ARRAY['extract']);
--   Calls: broker_add_job
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_add_job_simple(
    p_job_name          text,
    p_execute_str       text,
    p_job_priority      integer DEFAULT 0,
    p_depends_on_groups text[]  DEFAULT NULL,
    p_search_path       text    DEFAULT pg_catalog.current_setting('search_path'))
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.job_id, a.is_new
      FROM broker.broker_add_job(p_job_name, p_execute_str, 1, p_job_priority, 'sql', NULL, NULL, NULL,
                                 NULL, 1, NULL, p_depends_on_groups, NULL, NULL, p_search_path) AS a
$$;
COMMENT ON FUNCTION broker.broker_add_job_simple(text, text, integer, text[], text) IS
    'Shortcut for broker_add_job: name, SQL, priority and group dependencies; queue 1, one attempt. Returns (job_id, is_new).';
-- source: sql/enqueue/parse_jobs.sql
-- sql/enqueue/parse_jobs.sql: parsing the jsonb array of broker_add_jobs.
-- ---------------------------------------------------------------------------
-- Function: broker._parse_jobs(p_jobs, p_search_path)
--   One row per element of the JSON array p_jobs (ord = 1-based position):
--   job, its keys converted to broker_add_job's parameter types (a missing
--   key takes broker_add_job's default: jsonb_populate_record keeps the base
--   row's value; job_group stays NULL, the job's name), a JSON null is NULL;
--   problem, the first rule of broker._job_problem the element breaks, else
--   NULL. Raises PostgreSQL's own conversion errors; the caller checked the
--   JSON types of the values.
--   Calls: _job_problem
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._parse_jobs(p_jobs jsonb, p_search_path text)
RETURNS TABLE (ord integer, job broker._job_fields, problem text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- (r in FROM, not in the select list: converted once per element, however
    -- many fields the inlined rules read)
    SELECT e.o::integer, r, broker._job_problem(r)
      FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(v, o)
     CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(
               ROW(NULL, NULL, 1, 0, 'sql', NULL, NULL, NULL, NULL, 1, NULL, NULL, NULL, NULL, p_search_path, false,
                   NULL)::broker._job_fields,
               e.v) AS r
$$;
COMMENT ON FUNCTION broker._parse_jobs(jsonb, text) IS
    'Internal: the elements of broker_add_jobs'' JSON array as broker._job_fields with broker_add_job''s defaults, and the first rule each breaks.';
-- source: sql/enqueue/add_jobs.sql
-- sql/enqueue/add_jobs.sql: enqueueing many jobs in one call (broker_add_jobs).
-- ---------------------------------------------------------------------------
-- Function: broker._add_jobs(p_jobs, p_search_path, p_tenant_id)
--   The body of broker_add_jobs (see there); p_search_path is the caller's
--   search_path, the default of each job's search_path; p_tenant_id the
--   tenant of every job of the call (NULL: the transaction's). Set-based: a fixed
--   number of statements whatever the number of jobs, one INSERT of jobs and
--   one of edges (their statement-level triggers run once each), and one
--   NOTIFY per queue. SECURITY INVOKER like broker_add_job: the rows are
--   written with the caller's rights and checked by the row-level security
--   policies as the caller; the triggers do the bookkeeping.
--   Input order: the jobs are inserted in element order and their identity
--   ids increase in the order the INSERT takes its rows, so the k-th new job
--   without an idempotency key belongs to the k-th such element.
--   Calls: _set_tenant, broker_current_tenant, _tasks_as_jobs, _may_not_run_in_transaction, _tenant_allowed, _add_plain_jobs, _parse_jobs, _job_problem, _job_field_error, _check_run_as, _check_autonomous, _lock_dependency_keys, _executor, broker_create_executor, _notify_queues, _claimable, _due_time
--   Tables: reads broker_tenant_roles, broker_schedule; writes broker_jobs, broker_job_dependency
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._add_jobs(p_jobs jsonb, p_search_path text, p_tenant_id text)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_keys  CONSTANT text[] := ARRAY['job_name', 'execute_str', 'job_queue', 'job_priority', 'job_language',
        'run_as', 'schedule_id', 'depends_on_job_ids', 'idempotency_key', 'max_attempts', 'job_group',
        'depends_on_groups', 'run_after', 'timeout', 'search_path', 'autonomous', 'concurrency_key'];
    c_types CONSTANT text[] := ARRAY['string', 'string', 'number', 'number', 'string', 'string', 'number', 'array',
        'string', 'number', 'string', 'array', 'string', 'string', 'string', 'boolean', 'string'];
    v_tenant text := broker.broker_current_tenant();
    v_bad    record;
    a_jobs   broker._job_fields[];  -- the elements (index = ord)
    a_todo   boolean[];             -- still to insert (index = ord)
    a_key    text[];                -- a_jobs' idempotency keys (index = ord), read often below
    a_edges  broker._job_edge[];    -- one per dependency, by ord
    v_err_ord integer; v_err text[];  -- the first element that breaks a field rule, and that rule
    a_done   broker._added_job[];   -- the elements resolved so far
    v_round  broker._added_job[];   -- resolved by this round of the insert
    v_ords   integer[];             -- the elements without a key this round inserts, in order
    v_new    bigint[];              -- the ids it made for them, in order
    v_keyed  broker._added_job[];   -- the jobs it made with a key (ord not known yet)
    v_deps   boolean;
    v_misshapen boolean;
    v_special   boolean;  -- an element uses a key the plain path does not take
    v_saved  text;
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant('broker_add_jobs', p_tenant_id);
        RETURN QUERY SELECT a.ord, a.job_id, a.is_new FROM broker._add_jobs(p_jobs, p_search_path, NULL) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    IF p_jobs IS NULL THEN
        RAISE EXCEPTION 'broker_add_jobs: p_jobs must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.jsonb_typeof(p_jobs) OPERATOR(pg_catalog.<>) 'array' THEN
        RAISE EXCEPTION 'broker_add_jobs: p_jobs must be a JSON array of job objects, got a JSON %',
            pg_catalog.jsonb_typeof(p_jobs)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example [{"job_name": "a", "execute_str": "SELECT 1"}].';
    END IF;
    -- tasks ({"task": name, "args": value}): the job fields broker_add_task gives them
    IF p_jobs OPERATOR(pg_catalog.@?) '$[*] ? (@.type() == "object" && exists(@.task))' THEN
        p_jobs := broker._tasks_as_jobs(p_jobs);
    END IF;

    ---- shape: objects, known keys, values of the right JSON type -------------
    -- A quick pass first (no row per key: about a quarter of the cost); only
    -- when it finds something does the query below say what and where.
    -- (a missing key: jsonb_typeof(NULL) is NULL, which is no hit). The same
    -- pass says whether any element uses a key the plain path cannot take.
    SELECT COALESCE(pg_catalog.bool_or(CASE WHEN pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.<>) 'object' THEN true
                           ELSE (e.v OPERATOR(pg_catalog.-) c_keys) OPERATOR(pg_catalog.<>) '{}'::jsonb
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_name') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'execute_str') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_queue') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_priority') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_language') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'run_as') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'schedule_id') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'depends_on_job_ids') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'array'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'idempotency_key') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'max_attempts') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'number'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'job_group') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'depends_on_groups') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'array'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'run_after') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'timeout') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'search_path') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'autonomous') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'boolean'])
                             OR pg_catalog.jsonb_typeof(e.v OPERATOR(pg_catalog.->) 'concurrency_key') OPERATOR(pg_catalog.<>) ALL (ARRAY['null', 'string']) END), false),
           -- (autonomous jobs, and texts that may never run in a transaction, are checked on the general path)
           COALESCE(pg_catalog.bool_or(e.v OPERATOR(pg_catalog.?|) ARRAY['run_as', 'schedule_id', 'idempotency_key',
                                                                    'depends_on_job_ids', 'depends_on_groups', 'autonomous']
                                       OR broker._may_not_run_in_transaction(e.v OPERATOR(pg_catalog.->>) 'execute_str')), false)
      INTO v_misshapen, v_special
      FROM pg_catalog.jsonb_array_elements(p_jobs) AS e(v);
    IF v_misshapen THEN
        SELECT e.o, pg_catalog.jsonb_typeof(e.v) AS kind, k.key, pg_catalog.jsonb_typeof(k.value) AS got,
               c_types[pg_catalog.array_position(c_keys, k.key)] AS want
          INTO v_bad
          FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(v, o)
          LEFT JOIN LATERAL pg_catalog.jsonb_each(CASE WHEN pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.=) 'object'
                                                       THEN e.v END) AS k ON true
         WHERE pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.<>) 'object'
            OR k.key OPERATOR(pg_catalog.<>) ALL (c_keys)
            OR pg_catalog.jsonb_typeof(k.value) OPERATOR(pg_catalog.<>) ALL
                   (ARRAY['null', c_types[pg_catalog.array_position(c_keys, k.key)]])
         ORDER BY e.o
         LIMIT 1;
        IF FOUND THEN
            IF v_bad.kind OPERATOR(pg_catalog.<>) 'object' THEN
                RAISE EXCEPTION 'broker_add_jobs: element % is a JSON %, not an object', v_bad.o, v_bad.kind
                    USING ERRCODE = 'invalid_parameter_value';
            ELSIF v_bad.want IS NULL THEN
                RAISE EXCEPTION 'broker_add_jobs: element %: unknown key %', v_bad.o, pg_catalog.quote_literal(v_bad.key)
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'The keys are broker_add_job''s parameter names without p_: '
                                 OPERATOR(pg_catalog.||) pg_catalog.array_to_string(c_keys, ', ')
                                 OPERATOR(pg_catalog.||) '; a task''s: task and args, and those that apply to it.';
            END IF;
            RAISE EXCEPTION 'broker_add_jobs: element %: % must be a JSON % or null, got a JSON %',
                v_bad.o, v_bad.key, v_bad.want, v_bad.got
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    ---- the common case: no element with run_as, a schedule, an idempotency key
    ---- or dependencies, from a caller allowed to act for its tenant ----------
    -- One INSERT straight from the elements (broker._add_plain_jobs). A value
    -- that does not convert there is left to the general path below, which
    -- names its element; nothing was written.
    IF NOT v_special AND broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        BEGIN
            RETURN QUERY SELECT a.ord, a.job_id, a.is_new FROM broker._add_plain_jobs(p_jobs, p_search_path) AS a;
            RETURN;
        EXCEPTION WHEN data_exception THEN
            IF pg_catalog.starts_with(SQLERRM, 'broker_add_jobs: ') THEN
                RAISE;  -- an element's problem, already named
            END IF;
        END;
    END IF;

    ---- parse and check the arguments of every element -----------------------
    BEGIN
        -- one sort; the aggregates take the rows in that order
        WITH p AS MATERIALIZED (SELECT * FROM broker._parse_jobs(p_jobs, p_search_path) AS x ORDER BY x.ord)
        SELECT pg_catalog.array_agg(p.job), pg_catalog.array_agg((p.job).idempotency_key),
               pg_catalog.min(p.ord) FILTER (WHERE p.problem IS NOT NULL),
               (SELECT pg_catalog.array_agg(e.edge ORDER BY (e.edge).ord, (e.edge).job_id, (e.edge).job_group)
                  FROM (SELECT ROW(q.ord, x, NULL)::broker._job_edge AS edge
                          FROM p AS q, pg_catalog.unnest((q.job).depends_on_job_ids) AS x
                        UNION ALL
                        SELECT ROW(q.ord, NULL, x)::broker._job_edge
                          FROM p AS q, pg_catalog.unnest((q.job).depends_on_groups) AS x) AS e)
          INTO a_jobs, a_key, v_err_ord, a_edges
          FROM p;
    EXCEPTION WHEN data_exception THEN
        -- a value that does not convert: find its element
        FOR i IN 1 .. pg_catalog.jsonb_array_length(p_jobs) LOOP
            BEGIN
                PERFORM 1 FROM broker._parse_jobs(pg_catalog.jsonb_build_array(p_jobs OPERATOR(pg_catalog.->) (i OPERATOR(pg_catalog.-) 1)), '');
            EXCEPTION WHEN data_exception THEN
                RAISE EXCEPTION 'broker_add_jobs: element %: %', i, SQLERRM USING ERRCODE = 'invalid_parameter_value';
            END;
        END LOOP;
        RAISE;
    END;
    IF a_jobs IS NULL THEN
        RETURN;  -- an empty array
    END IF;
    IF v_err_ord IS NOT NULL THEN
        v_err := broker._job_problem(a_jobs[v_err_ord]);
        PERFORM broker._job_field_error(pg_catalog.format('broker_add_jobs: element %s', v_err_ord), v_err[2], v_err);
    END IF;

    IF NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_add_jobs: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
    END IF;

    ---- run_as: the enqueuer, or a role it is a member of (per distinct role) --
    PERFORM broker._check_run_as(pg_catalog.format('broker_add_jobs: element %s', u.o), u.r)
       FROM (SELECT pg_catalog.min(x.o) AS o, x.r
               FROM (SELECT u.run_as AS r, u.ordinality AS o FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u) AS x
              WHERE x.r IS NOT NULL
              GROUP BY x.r
              ORDER BY 1) AS u;
    -- what can never run in a transaction, and autonomous jobs' SQL and roles
    PERFORM broker._check_autonomous(pg_catalog.format('broker_add_jobs: element %s', u.ordinality), u.execute_str,
                                     pg_catalog.lower(pg_catalog.btrim(u.job_language)), COALESCE(u.run_as::name, CURRENT_USER),
                                     COALESCE(u.autonomous, false))
       FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
      WHERE u.autonomous OR broker._may_not_run_in_transaction(u.execute_str)
      ORDER BY u.ordinality;

    SELECT u.ordinality AS o, u.schedule_id AS s INTO v_bad
      FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
     WHERE u.schedule_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM broker.broker_schedule AS s
                        WHERE s.schedule_id OPERATOR(pg_catalog.=) u.schedule_id AND s.tenant_id OPERATOR(pg_catalog.=) v_tenant)
     ORDER BY u.ordinality LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'broker_add_jobs: element %: schedule % does not exist', v_bad.o, v_bad.s
            USING ERRCODE = 'foreign_key_violation';
    END IF;

    ---- idempotency: keys with an unfinished job return it; a key repeated in
    ---- the array makes one job (its first element), the others return it ----
    SELECT COALESCE(pg_catalog.array_agg(ROW(u.o, j.job_id, false, u.k)::broker._added_job), '{}')
      INTO a_done
      FROM pg_catalog.unnest(a_key) WITH ORDINALITY AS u(k, o)
      JOIN broker.broker_jobs AS j
        ON j.tenant_id OPERATOR(pg_catalog.=) v_tenant
       AND j.idempotency_key OPERATOR(pg_catalog.=) u.k
       AND j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[]);
    a_todo := ARRAY(
        SELECT u.k IS NULL OR (u.first AND r.ord IS NULL)
          FROM (SELECT v.k, v.o, pg_catalog.row_number() OVER (PARTITION BY v.k ORDER BY v.o) OPERATOR(pg_catalog.=) 1 AS first
                  FROM pg_catalog.unnest(a_key) WITH ORDINALITY AS v(k, o)) AS u
          LEFT JOIN pg_catalog.unnest(a_done) AS r ON r.ord OPERATOR(pg_catalog.=) u.o
         ORDER BY u.o);

    ---- dependencies of the jobs to insert ------------------------------------
    SELECT g.ord AS o, u.name, g.job_group AS grp INTO v_bad
      FROM pg_catalog.unnest(a_edges) AS g
      JOIN (SELECT x.job_name AS name, x.job_group AS grp, x.ordinality AS o
              FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS x) AS u ON u.o OPERATOR(pg_catalog.=) g.ord
     WHERE a_todo[g.ord] AND g.job_group OPERATOR(pg_catalog.=) COALESCE(u.grp, u.name)
     ORDER BY g.ord LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'broker_add_jobs: element %: job % cannot depend on its own group %', v_bad.o,
            pg_catalog.quote_literal(v_bad.name), pg_catalog.quote_literal(v_bad.grp)
            USING ERRCODE = 'check_violation';
    END IF;
    -- as the caller sees them (row-level security applies), like the edge trigger
    SELECT d.ord AS o, d.job_id AS id, t.complete_status INTO v_bad
      FROM pg_catalog.unnest(a_edges) AS d
      LEFT JOIN broker.broker_jobs AS t
        ON t.job_id OPERATOR(pg_catalog.=) d.job_id AND t.tenant_id OPERATOR(pg_catalog.=) v_tenant
     WHERE d.job_id IS NOT NULL AND a_todo[d.ord]
       AND (t.job_id IS NULL OR t.complete_status OPERATOR(pg_catalog.>=) broker._state('failed'))
     ORDER BY d.ord, d.job_id LIMIT 1;
    IF FOUND THEN
        IF v_bad.complete_status IS NULL THEN
            RAISE EXCEPTION 'broker_add_jobs: element %: dependency job % does not exist', v_bad.o, v_bad.id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
        RAISE EXCEPTION 'broker_add_jobs: element %: dependency job % % and can never complete', v_bad.o, v_bad.id,
            CASE v_bad.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Enqueue the dependency again and depend on the new job id.';
    END IF;
    v_deps := EXISTS (SELECT 1 FROM pg_catalog.unnest(a_edges) AS d WHERE a_todo[d.ord]);

    -- every dependency lock of the batch in one ordered call (the triggers take them again for free)
    PERFORM broker._lock_dependency_keys(v_tenant,
        ARRAY(SELECT DISTINCT COALESCE(u.job_group, u.job_name) FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
               WHERE a_todo[u.ordinality]),
        ARRAY(SELECT DISTINCT g.job_group FROM pg_catalog.unnest(a_edges) AS g WHERE g.job_group IS NOT NULL AND a_todo[g.ord]),
        NULL,
        ARRAY(SELECT DISTINCT d.job_id FROM pg_catalog.unnest(a_edges) AS d WHERE d.job_id IS NOT NULL AND a_todo[d.ord]));

    -- the jobs run inside their run_as roles' executors: make sure they exist
    FOR v_bad IN
        SELECT DISTINCT COALESCE(u.run_as::name, CURRENT_USER) AS r FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
         WHERE a_todo[u.ordinality]
    LOOP
        IF broker._executor(v_bad.r) IS NULL THEN
            PERFORM broker.broker_create_executor(v_bad.r);
        END IF;
    END LOOP;

    ---- insert ----------------------------------------------------------------
    IF v_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', 'on', true);
    END IF;
    WHILE true OPERATOR(pg_catalog.=) ANY (a_todo) LOOP
        WITH ins AS (
            INSERT INTO broker.broker_jobs AS j
                   (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                    run_as, schedule_id, idempotency_key, max_attempts, run_after, job_timeout, job_search_path, autonomous,
                    concurrency_key)
            SELECT u.job_name, COALESCE(u.job_group, u.job_name), u.execute_str, pg_catalog.lower(pg_catalog.btrim(u.job_language)),
                   u.job_queue, u.job_priority, COALESCE(u.run_as::name, CURRENT_USER), u.schedule_id, u.idempotency_key,
                   u.max_attempts, COALESCE(u.run_after, pg_catalog.now()), u.timeout, COALESCE(u.search_path, ''),
                   COALESCE(u.autonomous, false), u.concurrency_key
              FROM pg_catalog.unnest(a_jobs) WITH ORDINALITY AS u
             WHERE a_todo[u.ordinality]
             ORDER BY u.ordinality
            ON CONFLICT (tenant_id, idempotency_key)
               WHERE idempotency_key IS NOT NULL AND complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
            DO NOTHING
            RETURNING j.job_id, j.idempotency_key
        )
        SELECT COALESCE(pg_catalog.array_agg(i.job_id ORDER BY i.job_id) FILTER (WHERE i.idempotency_key IS NULL), '{}'),
               pg_catalog.array_agg(ROW(NULL, i.job_id, true, i.idempotency_key)::broker._added_job)
                   FILTER (WHERE i.idempotency_key IS NOT NULL)
          INTO v_new, v_keyed
          FROM ins AS i;
        -- without a key: the k-th new id is the k-th such element
        v_ords := ARRAY(SELECT u.o FROM ROWS FROM (pg_catalog.unnest(a_key), pg_catalog.unnest(a_todo)) WITH ORDINALITY AS u(k, todo, o)
                         WHERE u.todo AND u.k IS NULL ORDER BY u.o);
        IF pg_catalog.cardinality(v_ords) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(v_new) THEN
            RAISE EXCEPTION 'broker_add_jobs: inserted % jobs without a key for % elements', pg_catalog.cardinality(v_new),
                pg_catalog.cardinality(v_ords) USING ERRCODE = 'internal_error';
        END IF;
        a_done := a_done OPERATOR(pg_catalog.||) ARRAY(
            SELECT ROW(n.o, n.id, true, NULL)::broker._added_job
              FROM ROWS FROM (pg_catalog.unnest(v_ords), pg_catalog.unnest(v_new)) AS n(o, id) ORDER BY n.o);
        -- with a key: inserted, or held by a concurrent transaction (return its job); a key whose
        -- job finished in between is tried again
        v_round := ARRAY(
            SELECT ROW(u.o, COALESCE(n.job_id, x.job_id), n.job_id IS NOT NULL, u.k)::broker._added_job
              FROM ROWS FROM (pg_catalog.unnest(a_key), pg_catalog.unnest(a_todo)) WITH ORDINALITY AS u(k, todo, o)
              LEFT JOIN pg_catalog.unnest(v_keyed) AS n ON n.idempotency_key OPERATOR(pg_catalog.=) u.k
              LEFT JOIN broker.broker_jobs AS x
                ON n.job_id IS NULL AND x.tenant_id OPERATOR(pg_catalog.=) v_tenant AND x.idempotency_key OPERATOR(pg_catalog.=) u.k
               AND x.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
             WHERE u.todo AND u.k IS NOT NULL AND COALESCE(n.job_id, x.job_id) IS NOT NULL);
        a_done := a_done OPERATOR(pg_catalog.||) v_round;
        a_todo := ARRAY(SELECT u.todo AND u.k IS NOT NULL AND t.ord IS NULL
                          FROM ROWS FROM (pg_catalog.unnest(a_key), pg_catalog.unnest(a_todo)) WITH ORDINALITY AS u(k, todo, o)
                          LEFT JOIN pg_catalog.unnest(v_round) AS t ON t.ord OPERATOR(pg_catalog.=) u.o
                         ORDER BY u.o);
    END LOOP;

    IF v_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', '', true);
        -- one statement: validated per edge, then locked, cycle-checked and counted by the triggers
        INSERT INTO broker.broker_job_dependency (job_id, depends_on_job_id, depends_on_group)
        SELECT DISTINCT m.job_id, d.job_id, d.job_group
          FROM pg_catalog.unnest(a_done) AS m
          JOIN pg_catalog.unnest(a_edges) AS d ON d.ord OPERATOR(pg_catalog.=) m.ord
         WHERE m.is_new;
        -- wake runners for the new jobs that wait on nothing unfinished
        PERFORM broker._notify_queues(ARRAY(
            SELECT DISTINCT j.job_queue FROM broker.broker_jobs AS j
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT m.job_id FROM pg_catalog.unnest(a_done) AS m))
               AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
               AND j.run_after OPERATOR(pg_catalog.<=) broker._due_time()));
    END IF;

    RETURN QUERY
    SELECT u.o::integer, COALESCE(m.job_id, k.job_id), COALESCE(m.is_new, false)
      FROM pg_catalog.unnest(a_key) WITH ORDINALITY AS u(k, o)
      LEFT JOIN pg_catalog.unnest(a_done) AS m ON m.ord OPERATOR(pg_catalog.=) u.o
      LEFT JOIN (SELECT DISTINCT a.k, rm.job_id
                   FROM pg_catalog.unnest(a_done) AS rm
                   JOIN pg_catalog.unnest(a_key) WITH ORDINALITY AS a(k, o) ON a.o OPERATOR(pg_catalog.=) rm.ord
                  WHERE a.k IS NOT NULL) AS k
        ON m.ord IS NULL AND k.k OPERATOR(pg_catalog.=) u.k
     ORDER BY u.o;
END;
$$;
COMMENT ON FUNCTION broker._add_jobs(jsonb, text, text) IS
    'Internal: the body of broker_add_jobs, with the caller''s search_path as the jobs'' default.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_jobs(p_jobs, p_tenant_id)
--   Set-based bulk enqueue. p_jobs is a JSON array of objects whose keys are
--   broker_add_job's parameter names without the p_ prefix (job_name,
--   execute_str, job_queue, job_priority, job_language, run_as, schedule_id,
--   depends_on_job_ids, idempotency_key, max_attempts, job_group,
--   depends_on_groups, run_after, timeout, search_path, autonomous,
--   concurrency_key); a missing key takes broker_add_job's default
--   (search_path: the caller's). An element with the key task is a task
--   (broker_add_task): its name in task, its arguments in args (any JSON
--   value, default {}), and the keys that apply to a task
--   (broker._tasks_as_jobs). Returns one row per
--   element, in input order: (ord = 1-based position, job_id, is_new).
--   Same validation, idempotency, dependency, tenancy and row-level security
--   rules as broker_add_job, which the whole array passes or fails together:
--   * an idempotency key with an unfinished job returns that job
--     (is_new = false); a key repeated in the array makes one job, at its
--     first element, which the later ones return;
--   * group dependencies count every unfinished member, including the jobs of
--     the same array; cycles within the array or with existing jobs are 23514;
--   * one NOTIFY per queue that got a claimable job.
--   Written without SET search_path on purpose, so that the caller's
--   search_path is read here; everything is schema-qualified.
--   p_tenant_id names the tenant of every job of the call, for this call only
--   (as broker_add_job's); one call is one tenant, so an element has no
--   tenant key.
-- Errors: as broker_add_job, the message naming the element ("element 3:
--   ..."); 22004 p_jobs NULL; 22023 p_jobs not an array of objects, an unknown
--   key, a value of the wrong JSON type or one that does not convert.
-- Example:
--   SELECT * FROM broker.broker_add_jobs($$[
--       {"job_name": "extract", "execute_str": "CALL etl.extract()", "job_group": "extract"},
--       {"job_name": "load", "execute_str": "CALL etl.load()", "depends_on_groups": ["extract"]}
--   ]$$);
--   SELECT * FROM broker.broker_add_jobs($$[
--       {"task": "send_email", "args": {"to": "ada@example.com"}, "max_attempts": 5},
--       {"task": "send_email", "args": {"to": "bob@example.com"}, "max_attempts": 5}
--   ]$$);
--   Calls: _add_jobs
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_add_jobs(p_jobs jsonb, p_tenant_id text DEFAULT NULL)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE sql VOLATILE SECURITY INVOKER
AS $$
    SELECT a.ord, a.job_id, a.is_new
      FROM broker._add_jobs(p_jobs, pg_catalog.current_setting('search_path'), p_tenant_id) AS a
$$;
COMMENT ON FUNCTION broker.broker_add_jobs(jsonb, text) IS
    'Enqueues many jobs (and tasks: {"task": name, "args": value}) in one call from a JSON array of broker_add_job arguments (keys without p_); returns (ord, job_id, is_new) in input order.';
-- source: sql/enqueue/add_plain_jobs.sql
-- sql/enqueue/add_plain_jobs.sql: the fast path of broker_add_jobs for jobs without dependencies.
-- ---------------------------------------------------------------------------
-- Function: broker._add_plain_jobs(p_jobs, p_search_path)
--   broker_add_jobs for an array whose elements have no run_as, schedule_id,
--   idempotency_key, depends_on_job_ids or depends_on_groups key, from a
--   caller allowed to act for its tenant (_add_jobs checked both, and the
--   JSON shape): one INSERT straight from the parsed elements, in element
--   order, no arrays in between. An element with a problem raises it when
--   the INSERT reaches it (element order, so the first one is reported) and
--   nothing is written; the jobs run as the caller, whose executor is made
--   when missing. Same rows, checks and notifications as the general path:
--   the table's triggers do the bookkeeping. A value that does not convert
--   raises PostgreSQL's own error (22xxx); _add_jobs then takes the general
--   path, which names the element.
--   Calls: _job_field_error, _parse_jobs, _executor, broker_create_executor
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._add_plain_jobs(p_jobs jsonb, p_search_path text)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    WITH ins AS (
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, max_attempts, run_after, job_timeout, job_search_path, concurrency_key)
        SELECT (p.job).job_name, COALESCE((p.job).job_group, (p.job).job_name), (p.job).execute_str,
               CASE WHEN p.problem IS NULL THEN pg_catalog.lower(pg_catalog.btrim((p.job).job_language))
                    ELSE broker._job_field_error(pg_catalog.format('broker_add_jobs: element %s', p.ord), p.problem[2], p.problem) END,
               (p.job).job_queue, (p.job).job_priority, CURRENT_USER, (p.job).max_attempts,
               COALESCE((p.job).run_after, pg_catalog.now()), (p.job).timeout, COALESCE((p.job).search_path, ''),
               (p.job).concurrency_key
          FROM broker._parse_jobs(p_jobs, p_search_path) AS p
         ORDER BY p.ord
        RETURNING j.job_id
    )
    SELECT pg_catalog.array_agg(i.job_id ORDER BY i.job_id) INTO v_ids FROM ins AS i;
    IF v_ids IS NULL THEN
        RETURN;  -- an empty array
    END IF;
    -- the jobs run inside the caller's executor: make sure it exists
    IF broker._executor(CURRENT_USER) IS NULL THEN
        PERFORM broker.broker_create_executor(CURRENT_USER);
    END IF;
    -- identity ids increase in the order the INSERT took the rows: element order
    RETURN QUERY SELECT u.o::integer, u.id, true FROM pg_catalog.unnest(v_ids) WITH ORDINALITY AS u(id, o);
END;
$$;
COMMENT ON FUNCTION broker._add_plain_jobs(jsonb, text) IS
    'Internal: broker_add_jobs for elements without run_as, schedule, idempotency key or dependencies: one INSERT in element order.';
-- source: sql/enqueue/add_jobs_arrays.sql
-- sql/enqueue/add_jobs_arrays.sql: enqueueing many plain jobs from arrays (broker_add_jobs_arrays).
-- ---------------------------------------------------------------------------
-- Function: broker._jobs_of_arrays(p_job_names, p_execute_strs, p_job_queues,
--     p_job_priorities, p_job_groups, p_max_attempts, p_run_afters,
--     p_timeouts, p_job_languages, p_concurrency_keys, p_search_path)
--   The jobs of broker_add_jobs_arrays' arrays, one row per element of
--   p_job_names (ord = its position): job, the k-th element of each array
--   as broker._job_fields, a NULL array taking broker_add_job's default
--   (a NULL element stays NULL); problem, the first rule of
--   broker._job_problem it breaks, else NULL.
--   SQL without SET search_path on purpose: the planner inlines it into the
--   caller's queries; every function and operator is schema-qualified.
--   Calls: _job_problem
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_of_arrays(p_job_names text[], p_execute_strs text[], p_job_queues integer[],
    p_job_priorities integer[], p_job_groups text[], p_max_attempts integer[], p_run_afters timestamptz[],
    p_timeouts interval[], p_job_languages text[], p_concurrency_keys text[], p_search_path text)
RETURNS TABLE (ord bigint, job broker._job_fields, problem text[])
LANGUAGE sql STABLE
AS $$
    -- (the row built once per element, below the OFFSET, however many fields the inlined rules read)
    SELECT s.o, s.r, broker._job_problem(s.r)
      FROM (SELECT u.o, ROW(u.name, u.sql, CASE WHEN p_job_queues IS NULL THEN 1 ELSE u.queue END,
                            CASE WHEN p_job_priorities IS NULL THEN 0 ELSE u.priority END,
                            CASE WHEN p_job_languages IS NULL THEN 'sql' ELSE u.lang END, NULL, NULL, NULL, NULL,
                            CASE WHEN p_max_attempts IS NULL THEN 1 ELSE u.attempts END, u.grp, NULL, u.run_after, u.timeout,
                            p_search_path, false, u.ckey)::broker._job_fields AS r
              FROM ROWS FROM (pg_catalog.unnest(p_job_names), pg_catalog.unnest(p_execute_strs),
                              pg_catalog.unnest(p_job_queues), pg_catalog.unnest(p_job_priorities),
                              pg_catalog.unnest(p_job_groups), pg_catalog.unnest(p_max_attempts),
                              pg_catalog.unnest(p_run_afters), pg_catalog.unnest(p_timeouts),
                              pg_catalog.unnest(p_job_languages), pg_catalog.unnest(p_concurrency_keys))
                   WITH ORDINALITY AS u(name, sql, queue, priority, grp, attempts, run_after, timeout, lang, ckey, o)
            OFFSET 0) AS s
$$;
COMMENT ON FUNCTION broker._jobs_of_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[], text[], text[], text) IS
    'Internal: broker_add_jobs_arrays'' elements as broker._job_fields with broker_add_job''s defaults, and the first rule each breaks.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_jobs_arrays(p_job_names, p_execute_strs,
--     p_job_queues, p_job_priorities, p_job_groups, p_max_attempts,
--     p_run_afters, p_timeouts, p_job_languages, p_search_path, p_tenant_id,
--     p_concurrency_keys)
--   Bulk enqueue of jobs without run_as, schedule, idempotency key,
--   dependencies or autonomy, one array per field: job k has the k-th
--   element of each array. An array left NULL gives every job
--   broker_add_job's default for that field (queue 1, priority 0, group =
--   name, 1 attempt, now, no timeout, sql, no concurrency key); a NULL
--   element is a NULL field (refused where broker_add_job refuses NULL).
--   p_search_path (one for every job) defaults to the caller's. Returns one
--   row per job, in array order: (ord = 1-based position, job_id, is_new =
--   true).
--   What broker_add_jobs does for such elements, without JSON in between:
--   the same rules (broker._job_problem, the element named as in
--   broker_add_jobs: 'broker_add_jobs_arrays: element 3: job_queue ...'),
--   tenancy and row-level security, the refusal of texts that can never
--   run in a transaction, one INSERT in array order (its statement trigger
--   notifies each queue that got a claimable job once), all or nothing.
--   SECURITY INVOKER like broker_add_jobs.
-- Errors: as broker_add_jobs; 22004 p_job_names NULL; 22023 an array that
--   is not flat or not as long as p_job_names.
-- Example:
--   SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b'], ARRAY['CALL etl.a()', 'CALL etl.b()'],
--                                               p_job_queues => ARRAY[1, 2]);
--   SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['sync 1', 'sync 2'], ARRAY['CALL crm.sync(1)', 'CALL crm.sync(2)'],
--                                               p_concurrency_keys => ARRAY['crm-api', 'crm-api']);
--   Calls: _set_tenant, broker_current_tenant, _transaction_keywords, _may_not_run_in_transaction, _tenant_allowed, _jobs_of_arrays, _job_field_error, _check_autonomous, _executor, broker_create_executor
--   Tables: reads broker_tenant_roles; writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_jobs_arrays(
    p_job_names      text[],
    p_execute_strs   text[],
    p_job_queues     integer[]     DEFAULT NULL,
    p_job_priorities integer[]     DEFAULT NULL,
    p_job_groups     text[]        DEFAULT NULL,
    p_max_attempts   integer[]     DEFAULT NULL,
    p_run_afters     timestamptz[] DEFAULT NULL,
    p_timeouts       interval[]    DEFAULT NULL,
    p_job_languages  text[]        DEFAULT NULL,
    p_search_path    text          DEFAULT pg_catalog.current_setting('search_path'),
    p_tenant_id      text          DEFAULT NULL,
    p_concurrency_keys text[]      DEFAULT NULL)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_fn    CONSTANT text := 'broker_add_jobs_arrays';
    v_n     integer := pg_catalog.cardinality(p_job_names);
    v_saved text;
    v_bad   record;
    v_ids   bigint[];
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant(c_fn, p_tenant_id);
        RETURN QUERY SELECT a.ord, a.job_id, a.is_new FROM broker.broker_add_jobs_arrays(p_job_names, p_execute_strs,
            p_job_queues, p_job_priorities, p_job_groups, p_max_attempts, p_run_afters, p_timeouts, p_job_languages,
            p_search_path, p_concurrency_keys => p_concurrency_keys) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    IF p_job_names IS NULL THEN
        RAISE EXCEPTION '%: p_job_names must not be NULL', c_fn USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT a.name, a.n INTO v_bad
      FROM (VALUES (1, 'p_job_names', pg_catalog.array_ndims(p_job_names), v_n),
                   (2, 'p_execute_strs', pg_catalog.array_ndims(p_execute_strs), pg_catalog.cardinality(p_execute_strs)),
                   (3, 'p_job_queues', pg_catalog.array_ndims(p_job_queues), pg_catalog.cardinality(p_job_queues)),
                   (4, 'p_job_priorities', pg_catalog.array_ndims(p_job_priorities), pg_catalog.cardinality(p_job_priorities)),
                   (5, 'p_job_groups', pg_catalog.array_ndims(p_job_groups), pg_catalog.cardinality(p_job_groups)),
                   (6, 'p_max_attempts', pg_catalog.array_ndims(p_max_attempts), pg_catalog.cardinality(p_max_attempts)),
                   (7, 'p_run_afters', pg_catalog.array_ndims(p_run_afters), pg_catalog.cardinality(p_run_afters)),
                   (8, 'p_timeouts', pg_catalog.array_ndims(p_timeouts), pg_catalog.cardinality(p_timeouts)),
                   (9, 'p_job_languages', pg_catalog.array_ndims(p_job_languages), pg_catalog.cardinality(p_job_languages)),
                   (10, 'p_concurrency_keys', pg_catalog.array_ndims(p_concurrency_keys), pg_catalog.cardinality(p_concurrency_keys)))
           AS a(k, name, dims, n)
     WHERE a.dims OPERATOR(pg_catalog.>) 1 OR a.n OPERATOR(pg_catalog.<>) v_n
     ORDER BY a.k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: % must be a flat array of % elements, one per job name (NULL: the default for every job), got %',
            c_fn, v_bad.name, v_n, v_bad.n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_n OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;

    -- A caller not allowed to act for its tenant, or a text that may never run in a transaction: the
    -- fields' rules first, then these (broker_add_jobs' order); else the INSERT checks the rules as it goes.
    IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER)
       -- (the texts joined by spaces match the filter's word test whenever one of them does: one match for the
       -- batch, then one per text only when it matches)
       OR (pg_catalog.array_to_string(p_execute_strs, ' ') OPERATOR(pg_catalog.~*) broker._transaction_keywords()
           AND EXISTS (SELECT 1 FROM pg_catalog.unnest(p_execute_strs) AS s WHERE broker._may_not_run_in_transaction(s))) THEN
        SELECT x.ord AS o, x.problem INTO v_bad
          FROM broker._jobs_of_arrays(p_job_names, p_execute_strs, p_job_queues, p_job_priorities, p_job_groups,
                                      p_max_attempts, p_run_afters, p_timeouts, p_job_languages, p_concurrency_keys,
                                      p_search_path) AS x
         WHERE x.problem IS NOT NULL
         ORDER BY x.ord LIMIT 1;
        IF FOUND THEN
            PERFORM broker._job_field_error(pg_catalog.format('%s: element %s', c_fn, v_bad.o), v_bad.problem[2], v_bad.problem);
        END IF;
        IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER) THEN
            RAISE EXCEPTION '%: role % may not act for tenant %', c_fn, pg_catalog.quote_ident(CURRENT_USER),
                pg_catalog.quote_literal(broker.broker_current_tenant())
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
        END IF;
        PERFORM broker._check_autonomous(pg_catalog.format('%s: element %s', c_fn, u.o), u.sql,
                                         pg_catalog.lower(pg_catalog.btrim(COALESCE(p_job_languages[u.o], 'sql'))), CURRENT_USER, false)
           FROM pg_catalog.unnest(p_execute_strs) WITH ORDINALITY AS u(sql, o)
          WHERE broker._may_not_run_in_transaction(u.sql)
          ORDER BY u.o;
    END IF;

    -- One INSERT in array order; an element that breaks a rule raises it when the INSERT reaches it.
    WITH ins AS (
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, max_attempts, run_after, job_timeout, job_search_path, concurrency_key)
        SELECT (x.job).job_name, COALESCE((x.job).job_group, (x.job).job_name), (x.job).execute_str,
               CASE WHEN x.problem IS NULL THEN pg_catalog.lower(pg_catalog.btrim((x.job).job_language))
                    ELSE broker._job_field_error(pg_catalog.format('%s: element %s', c_fn, x.ord), x.problem[2], x.problem) END,
               (x.job).job_queue, (x.job).job_priority, CURRENT_USER, (x.job).max_attempts,
               COALESCE((x.job).run_after, pg_catalog.now()), (x.job).timeout, COALESCE(p_search_path, ''),
               (x.job).concurrency_key
          FROM broker._jobs_of_arrays(p_job_names, p_execute_strs, p_job_queues, p_job_priorities, p_job_groups,
                                      p_max_attempts, p_run_afters, p_timeouts, p_job_languages, p_concurrency_keys,
                                      p_search_path) AS x
         ORDER BY x.ord
        RETURNING j.job_id
    )
    SELECT pg_catalog.array_agg(i.job_id ORDER BY i.job_id) INTO v_ids FROM ins AS i;
    -- the jobs run inside the caller's executor: make sure it exists
    IF broker._executor(CURRENT_USER) IS NULL THEN
        PERFORM broker.broker_create_executor(CURRENT_USER);
    END IF;
    -- identity ids increase in the order the INSERT took the rows: array order
    RETURN QUERY SELECT u.o::integer, u.id, true FROM pg_catalog.unnest(v_ids) WITH ORDINALITY AS u(id, o);
END;
$$;
COMMENT ON FUNCTION broker.broker_add_jobs_arrays(text[], text[], integer[], integer[], text[], integer[], timestamptz[], interval[], text[], text, text, text[]) IS
    'Enqueues many plain jobs (no run_as, schedule, idempotency key, dependencies) from one array per field, as broker_add_jobs would; returns (ord, job_id, is_new) in array order.';
-- source: sql/run/executors.sql
-- sql/run/executors.sql: job executors: the per-role functions a job's SQL runs in, and calling them.
-- ---------------------------------------------------------------------------
-- Job executors. A job runs inside broker_exec_<role oid>.run_job(sql,
-- language, search_path): a SECURITY DEFINER function owned by the job's
-- run_as role. Inside it the job has exactly that role's privileges, and
-- PostgreSQL refuses SET ROLE, RESET ROLE, SET SESSION AUTHORIZATION and
-- set_config('role', ...) in a security-definer context, also in DO blocks
-- and functions the job calls or creates, so the job cannot get back to the
-- privileges of the broker that called it.
-- Each role gets its own schema, owned by the broker's owner, in which only
-- that role (and its members) may create: nobody else can plant a look-alike
-- or an overload next to its executor. broker_run only calls a run_job whose
-- schema, owner, signature and SECURITY DEFINER flag all match.
-- run_job is the one place a job's SQL runs (its search_path, its language).
-- Next to it, run_jobs(sqls, languages, search_paths, tenant) runs the jobs
-- of a batch in one call, each through run_job in a subtransaction of its
-- own, and returns each one's error (NULL: success; the message then reports
-- the run: rows of its last statement, chr(31), the value it set with
-- broker_set_output, as run_job leaves them in broker.job_rows and
-- broker.job_output) and run time;
-- broker_run_batch calls it under the same checks. An executor without
-- run_jobs (made by 0.1.0) runs its jobs one run_job call each
-- (sql/compat/executor_fallback.sql; broker_create_executor adds run_jobs).
-- Under a batch budget run_jobs starts no job once broker.batch_deadline
-- passed (the jobs not started get no row), and it names the job running in
-- application_name ('pgsql_broker job <id>', from broker.batch_job_ids),
-- which other sessions see at once in pg_stat_activity (broker_job_activity).
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._executor(p_role)
--   The executor of role p_role, or NULL when it has none that passes the
--   checks above. Generic plans (here and in _executor_jobs): a custom plan
--   of the catalog join, made again at every call (every batch of jobs run,
--   every batch enqueued), cost several times more than running it.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._executor(p_role name)
RETURNS regprocedure
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN (SELECT p.oid::regprocedure
      FROM pg_catalog.pg_roles AS r
      JOIN pg_catalog.pg_namespace AS n
        ON n.nspname OPERATOR(pg_catalog.=) ('broker_exec_' OPERATOR(pg_catalog.||) r.oid::text)
       AND n.nspowner OPERATOR(pg_catalog.=) (SELECT b.nspowner FROM pg_catalog.pg_namespace AS b
                                               WHERE b.nspname OPERATOR(pg_catalog.=) 'broker')
      JOIN pg_catalog.pg_proc AS p
        ON p.pronamespace OPERATOR(pg_catalog.=) n.oid
       AND p.proname OPERATOR(pg_catalog.=) 'run_job'
       AND p.proargtypes OPERATOR(pg_catalog.=) '25 25 25'::pg_catalog.oidvector
     WHERE r.rolname OPERATOR(pg_catalog.=) p_role
       AND p.proowner OPERATOR(pg_catalog.=) r.oid
       AND p.prosecdef
       AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc AS o
             WHERE o.pronamespace OPERATOR(pg_catalog.=) n.oid
               AND o.proname OPERATOR(pg_catalog.=) 'run_job') OPERATOR(pg_catalog.=) 1
     LIMIT 1);
END;
$$;
COMMENT ON FUNCTION broker._executor(name) IS
    'Internal: the executor function of a role (its own schema, SECURITY DEFINER, owned by it, unique), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._executor_jobs(p_exec)
--   The batch entry point run_jobs next to executor p_exec (same schema and
--   owner, SECURITY DEFINER, the one run_jobs there, signature (text[],
--   text[], text[], text)) as schema-qualified name, or NULL when it has none.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._executor_jobs(p_exec regprocedure)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- plpgsql, not sql: a SQL function with SET is planned again at every call
    RETURN (SELECT pg_catalog.format('%I.run_jobs', n.nspname)
      FROM pg_catalog.pg_proc AS e
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) e.pronamespace
      JOIN pg_catalog.pg_proc AS p
        ON p.pronamespace OPERATOR(pg_catalog.=) e.pronamespace
       AND p.proname OPERATOR(pg_catalog.=) 'run_jobs'
       AND p.proargtypes OPERATOR(pg_catalog.=) '1009 1009 1009 25'::pg_catalog.oidvector
       AND p.proowner OPERATOR(pg_catalog.=) e.proowner
       AND p.prosecdef
     WHERE e.oid OPERATOR(pg_catalog.=) p_exec
       AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc AS o
             WHERE o.pronamespace OPERATOR(pg_catalog.=) e.pronamespace
               AND o.proname OPERATOR(pg_catalog.=) 'run_jobs') OPERATOR(pg_catalog.=) 1);
END;
$$;
COMMENT ON FUNCTION broker._executor_jobs(regprocedure) IS
    'Internal: the batch entry point run_jobs next to a job executor (same schema and owner, SECURITY DEFINER, unique), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._executor_schema(p_role)
--   Creates (if missing) the executor schema of p_role: owned by the broker's
--   owner, CREATE and USAGE for p_role only. Returns its name. A schema of
--   that name owned by anyone else was not made here (another role can make
--   it before the broker does): it is never used.
-- Errors: 42704 unknown role; 42501 the schema exists with another owner.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._executor_schema(p_role name)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_oid    oid := (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role);
    v_schema text;
    v_owner  oid;
BEGIN
    IF v_oid IS NULL THEN
        RAISE EXCEPTION 'role % does not exist', pg_catalog.quote_ident(p_role) USING ERRCODE = 'undefined_object';
    END IF;
    v_schema := 'broker_exec_' OPERATOR(pg_catalog.||) v_oid::text;
    v_owner := (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.nspname OPERATOR(pg_catalog.=) v_schema);
    IF v_owner OPERATOR(pg_catalog.<>) (SELECT b.nspowner FROM pg_catalog.pg_namespace AS b
                                         WHERE b.nspname OPERATOR(pg_catalog.=) 'broker') THEN
        RAISE EXCEPTION 'schema % exists but is owned by %, not by % (the owner of schema broker): pgsql_broker did not make it',
            v_schema, v_owner::pg_catalog.regrole,
            (SELECT b.nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace AS b WHERE b.nspname OPERATOR(pg_catalog.=) 'broker')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = pg_catalog.format('Find out who made it and why, drop it (DROP SCHEMA %I CASCADE), then try again.', v_schema);
    END IF;
    IF v_owner IS NULL THEN
        BEGIN
            EXECUTE pg_catalog.format('CREATE SCHEMA %I', v_schema);
        EXCEPTION WHEN duplicate_schema OR unique_violation THEN
            NULL;  -- created concurrently
        END;
        EXECUTE pg_catalog.format('COMMENT ON SCHEMA %I IS %L', v_schema,
            pg_catalog.format('pgsql_broker: the job executor of role %s', p_role));
        EXECUTE pg_catalog.format('REVOKE ALL ON SCHEMA %I FROM PUBLIC', v_schema);
        EXECUTE pg_catalog.format('GRANT USAGE, CREATE ON SCHEMA %I TO %I', v_schema, p_role);
    END IF;
    RETURN v_schema;
END;
$$;
COMMENT ON FUNCTION broker._executor_schema(name) IS
    'Internal: create (if missing) the schema broker_exec_<role oid>, where only that role may create its executor.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_create_executor(p_role)
--   Creates (if missing) and returns the executor of p_role: run_job and the
--   batch entry point run_jobs (an executor without run_jobs gets
--   it here). Runs with the caller's rights: the caller must be p_role, an
--   (inheriting) member of it, or a superuser (for an executor without
--   run_jobs, anyone else just gets it back as it is). EXECUTE goes to the
--   broker's owner only.
-- Errors: 42704 unknown role; 42501 not allowed (the hint says what to do).
-- Example:
--   SELECT broker.broker_create_executor('reporting');   -- as a member of reporting
--   Calls: _executor, _executor_schema
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_create_executor(p_role name)
RETURNS regprocedure
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_owner  name := (SELECT n.nspowner::regrole::name FROM pg_catalog.pg_namespace AS n
                       WHERE n.nspname OPERATOR(pg_catalog.=) 'broker');
    v_exec   regprocedure := broker._executor(p_role);
    v_schema text;
    v_made   text[] := '{}';  -- the functions created here (signatures)
    v_fn     text;
BEGIN
    -- (a run_jobs there that fails _executor_jobs' checks is not used, nor replaced)
    IF v_exec IS NOT NULL AND EXISTS (SELECT 1 FROM pg_catalog.pg_proc AS e JOIN pg_catalog.pg_proc AS p
                                          ON p.pronamespace OPERATOR(pg_catalog.=) e.pronamespace
                                       WHERE e.oid OPERATOR(pg_catalog.=) v_exec
                                         AND p.proname OPERATOR(pg_catalog.=) 'run_jobs') THEN
        RETURN v_exec;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_role) THEN
        RAISE EXCEPTION 'broker_create_executor: role % does not exist', pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(CURRENT_USER, p_role, 'USAGE') THEN
        IF v_exec IS NOT NULL THEN
            RETURN v_exec;  -- as it is (without run_jobs, its jobs run one run_job call each)
        END IF;
        RAISE EXCEPTION 'broker_create_executor: % cannot act as %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_ident(p_role)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run it as that role, an inheriting member of it, or a superuser.';
    END IF;
    v_schema := broker._executor_schema(p_role);
    IF v_exec IS NULL THEN
        BEGIN
            EXECUTE pg_catalog.format($ddl$
CREATE FUNCTION %I.run_job(p_sql text, p_language text, p_search_path text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    v_rows bigint;
BEGIN
    -- the job's own search_path, with pg_temp explicitly last: temporary
    -- objects never shadow anything that exists elsewhere
    PERFORM pg_catalog.set_config('search_path',
        CASE WHEN pg_catalog.btrim(p_search_path) OPERATOR(pg_catalog.=) '' THEN 'pg_temp'
             ELSE p_search_path OPERATOR(pg_catalog.||) ', pg_temp' END, true);
    IF p_language OPERATOR(pg_catalog.=) 'plpgsql' THEN
        EXECUTE 'DO LANGUAGE plpgsql ' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(p_sql);
    ELSE
        EXECUTE p_sql;
        -- the rows of its last statement, for the attempt history (run_jobs reports them)
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        PERFORM pg_catalog.set_config('broker.job_rows', v_rows::text, true);
    END IF;
END;
$body$$ddl$, v_schema);
        EXCEPTION WHEN duplicate_function OR unique_violation THEN
            v_exec := broker._executor(p_role);
            IF v_exec IS NOT NULL THEN
                RETURN v_exec;  -- created concurrently
            END IF;
            RAISE EXCEPTION 'broker_create_executor: %.run_job exists but is not a valid executor of %', v_schema,
                pg_catalog.quote_ident(p_role)
                USING ERRCODE = 'insufficient_privilege',
                      HINT = pg_catalog.format('Drop it (as %I or a superuser): DROP FUNCTION %I.run_job(text, text, text);',
                                               p_role, v_schema);
        END;
        v_made := ARRAY['run_job(text, text, text)'];
    END IF;
    -- the batch entry point: each job through run_job (the one place a job's SQL runs), in a
    -- subtransaction of its own; everything here is schema-qualified all the same
    BEGIN
        EXECUTE pg_catalog.format($ddl$
CREATE FUNCTION %I.run_jobs(p_sqls text[], p_languages text[], p_search_paths text[], p_tenant_id text)
RETURNS TABLE (error_sqlstate text, error_message text, duration interval)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    v_started timestamptz;
    v_set     text;
    -- read before any job runs (broker_run_batch sets them for the call): the time after which no
    -- further job starts, and the job ids, named in application_name while each job runs
    v_deadline timestamptz := pg_catalog.to_timestamp(NULLIF(pg_catalog.current_setting('broker.batch_deadline', true), '')::float8);
    v_ids     bigint[] := NULLIF(pg_catalog.current_setting('broker.batch_job_ids', true), '')::bigint[];
BEGIN
    FOR i IN 1 .. COALESCE(pg_catalog.array_length(p_sqls, 1), 0) LOOP
        EXIT WHEN i OPERATOR(pg_catalog.>) 1 AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_deadline;
        IF v_ids IS NOT NULL THEN
            v_set := pg_catalog.set_config('application_name', 'pgsql_broker job ' OPERATOR(pg_catalog.||) v_ids[i], true);
        END IF;
        error_sqlstate := NULL;
        error_message := NULL;
        v_started := pg_catalog.clock_timestamp();
        BEGIN
            v_set := pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
            v_set := pg_catalog.set_config('broker.job_rows', '', true);
            v_set := pg_catalog.set_config('broker.job_output', '', true);
            PERFORM %I.run_job(p_sqls[i], p_languages[i], p_search_paths[i]);
            -- on success the message reports the run: rows of its last statement, chr(31), its output
            error_message := pg_catalog.current_setting('broker.job_rows', true) OPERATOR(pg_catalog.||) pg_catalog.chr(31)
                OPERATOR(pg_catalog.||) pg_catalog.current_setting('broker.job_output', true);
        EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
            GET STACKED DIAGNOSTICS error_sqlstate = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        END;
        duration := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_started;
        RETURN NEXT;
        -- under a batch budget, its statement_timeout ended this job: start no other
        EXIT WHEN v_deadline IS NOT NULL AND error_sqlstate OPERATOR(pg_catalog.=) '57014';
    END LOOP;
END;
$body$$ddl$, v_schema, v_schema);
        v_made := v_made OPERATOR(pg_catalog.||) 'run_jobs(text[], text[], text[], text)'::text;
    EXCEPTION WHEN duplicate_function OR unique_violation THEN
        NULL;  -- created concurrently, or not ours: _executor_jobs decides whether it is used
    END;
    FOREACH v_fn IN ARRAY v_made LOOP
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %I.%s IS %L', v_schema, v_fn,
            pg_catalog.format('pgsql_broker executor: runs jobs as role %s', p_role));
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I.%s FROM PUBLIC', v_schema, v_fn);
        EXECUTE pg_catalog.format('ALTER FUNCTION %I.%s OWNER TO %I', v_schema, v_fn, p_role);
        IF v_owner OPERATOR(pg_catalog.<>) p_role THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %I.%s TO %I', v_schema, v_fn, v_owner);
        END IF;
    END LOOP;
    v_exec := broker._executor(p_role);
    IF v_exec IS NULL THEN
        RAISE EXCEPTION 'broker_create_executor: the executor of % failed its checks (another run_job in %?)',
            pg_catalog.quote_ident(p_role), v_schema
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v_exec;
END;
$fn$;
COMMENT ON FUNCTION broker.broker_create_executor(name) IS
    'Creates (if missing) and returns the SECURITY DEFINER executor that runs jobs as p_role; the caller must be able to act as p_role.';

-- ---------------------------------------------------------------------------
-- Function: broker._executor_call(p_exec)
--   The statement that calls executor p_exec with a job's SQL, language and
--   search_path as $1, $2, $3 (NULL when p_exec is NULL).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._executor_call(p_exec regprocedure)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.format('SELECT %I.run_job($1, $2, $3)', n.nspname)
      FROM pg_catalog.pg_proc AS p
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE p.oid OPERATOR(pg_catalog.=) p_exec);
END;
$$;
COMMENT ON FUNCTION broker._executor_call(regprocedure) IS
    'Internal: the SELECT that calls a job executor with a job''s SQL, language and search_path ($1, $2, $3).';
-- source: sql/run/guard.sql
-- sql/run/guard.sql: the run guard: what a job may not leave behind when its executor returns.
-- ---------------------------------------------------------------------------
-- What a job may not leave behind when its executor returns.
-- Whoever runs jobs (broker_run, broker_run_batch) commits their transaction
-- afterwards, outside any security-definer context: code that PostgreSQL
-- runs at COMMIT runs as that caller's login, not as the job's run_as role.
-- Two kinds of job-created code run there: deferred constraint triggers
-- (queued by DML, fired by COMMIT) and WITH HOLD cursors (their query runs
-- to completion at COMMIT). SET CONSTRAINTS ALL IMMEDIATE cannot rule the
-- first out (a trigger it fires may defer again and queue more), and SQL
-- cannot see the trigger queue, so the run refuses what could queue such an
-- event at all: see _commit_time_code. The executor is owned by the job's
-- role (it may replace its body), so these checks run in the broker's
-- functions, after the executor returned, never inside it.
-- Session state a job sets (session-level settings that act on the
-- connection, session advisory locks, LISTEN, prepared statements) is
-- undone before the run returns, so that neither the caller's COMMIT nor
-- the time until its own reset runs with it (_session_state,
-- _restore_session).
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._guarded_settings()
--   The settings the run puts back when a job changed them: those that act on
--   the connection (timeouts that end the session or cancel the caller's next
--   statement, keepalives, client encoding and quoting), on the caller's rest
--   of the transaction and its next one, and the broker's own.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._guarded_settings()
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- plpgsql, not sql: a SQL function with SET is planned again at every call, and every run calls this
    RETURN ARRAY['idle_session_timeout', 'idle_in_transaction_session_timeout', 'statement_timeout',
                   'lock_timeout', 'tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count',
                   'tcp_user_timeout', 'client_connection_check_interval', 'client_encoding',
                   'standard_conforming_strings', 'client_min_messages', 'application_name', 'search_path',
                   'row_security', 'default_transaction_read_only', 'default_transaction_isolation',
                   'default_transaction_deferrable', 'DateStyle', 'IntervalStyle', 'TimeZone',
                   'extra_float_digits', 'bytea_output', 'work_mem', 'plan_cache_mode', 'broker.tenant_id']::text[];
END;
$$;
COMMENT ON FUNCTION broker._guarded_settings() IS
    'Internal: the settings a run puts back when a job changed them (connection timeouts, encoding, the broker''s own).';

-- ---------------------------------------------------------------------------
-- Function: broker._session_state()
--   The session state a run compares against afterwards: the values of
--   _guarded_settings, the advisory locks the session holds, its LISTEN
--   channels, its SQL-level prepared statements, its WITH HOLD cursors
--   (name and creation time), and the rows written so far to tables with
--   deferrable code (_deferrable_code: 'trigger oid/rows').
--   Calls: _guarded_settings, _advisory_locks, _written_tables
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._session_state(OUT settings text[], OUT advisory text[], OUT channels text[],
                                      OUT prepared text[], OUT cursors text[], OUT written text[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    settings := ARRAY(SELECT pg_catalog.current_setting(n.name, true)
                        FROM pg_catalog.unnest(broker._guarded_settings()) WITH ORDINALITY AS n(name, i) ORDER BY n.i);
    advisory := broker._advisory_locks();
    channels := ARRAY(SELECT pg_catalog.pg_listening_channels());
    prepared := ARRAY(SELECT p.name FROM pg_catalog.pg_prepared_statements AS p WHERE p.from_sql);
    cursors := ARRAY(SELECT c.name OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) c.creation_time::text
                       FROM pg_catalog.pg_cursors AS c WHERE c.is_holdable);
    written := broker._written_tables();
END;
$$;
COMMENT ON FUNCTION broker._session_state() IS
    'Internal: the session state a run compares against after its jobs (guarded settings, advisory locks, LISTEN, prepared statements, holdable cursors).';

-- ---------------------------------------------------------------------------
-- Function: broker._advisory_locks()
--   The advisory locks this session holds (session or transaction level:
--   pg_locks does not tell), as 'classid/objid/objsubid/mode'.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._advisory_locks()
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN ARRAY(SELECT pg_catalog.concat_ws('/', l.classid, l.objid, l.objsubid, l.mode)
                   FROM pg_catalog.pg_locks AS l
                  WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory'
                    AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid());
END;
$$;
COMMENT ON FUNCTION broker._advisory_locks() IS
    'Internal: the advisory locks this session holds, as classid/objid/objsubid/mode.';

-- ---------------------------------------------------------------------------
-- Function: broker._restore_session(p_settings, p_advisory, p_channels,
--     p_prepared)
--   After jobs ran: puts back every guarded setting whose value differs from
--   p_settings (at session level, as a job's SET does: a value the caller
--   had set for its transaction only becomes the session's; broker.tenant_id
--   goes back to none for the session and to the caller's value for its
--   transaction); releases the session
--   advisory locks taken since p_advisory (all of them when the session held
--   none before, the usual case of a runner's worker; else each new one,
--   without messages for the transaction-level ones, which stay until the
--   end of the transaction); stops listening when it listened to nothing
--   before (else to the channels it did not listen to); and deallocates the
--   SQL-level prepared statements that are new. A setting that cannot be put
--   back (say temp_buffers after use) is left.
--   Calls: _guarded_settings, _advisory_locks, _int4_key
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._restore_session(p_settings text[], p_advisory text[], p_channels text[], p_prepared text[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r     record;
    v_msg text;
    v_n   integer;
BEGIN
    FOR r IN SELECT n.name, p_settings[n.i] AS old
               FROM pg_catalog.unnest(broker._guarded_settings()) WITH ORDINALITY AS n(name, i)
              WHERE pg_catalog.current_setting(n.name, true) IS DISTINCT FROM p_settings[n.i]
    LOOP
        BEGIN
            IF r.name OPERATOR(pg_catalog.=) 'broker.tenant_id' THEN
                -- changed in every run (the executor sets the job's): the session's goes back to none (what
                -- broker_set_tenant leaves), and a tenant the caller set for its transaction stays that
                PERFORM pg_catalog.set_config(r.name, '', false);
                PERFORM pg_catalog.set_config(r.name, COALESCE(r.old, ''), true);
            ELSE
                PERFORM pg_catalog.set_config(r.name, COALESCE(r.old, ''), false);
            END IF;
        EXCEPTION WHEN OTHERS THEN
            NULL;  -- not settable by the broker (a superuser setting a superuser job changed)
        END;
    END LOOP;
    IF pg_catalog.cardinality(p_advisory) OPERATOR(pg_catalog.=) 0 THEN
        PERFORM pg_catalog.pg_advisory_unlock_all();
    ELSE
        v_msg := pg_catalog.set_config('client_min_messages', 'error', true);
        FOR r IN SELECT k[1]::bigint AS classid, k[2]::bigint AS objid, k[3] AS sub, k[4] AS mode
                   FROM pg_catalog.unnest(broker._advisory_locks()) AS a(lock),
                        LATERAL pg_catalog.string_to_array(a.lock, '/') AS k
                  WHERE NOT a.lock OPERATOR(pg_catalog.=) ANY (p_advisory)
        LOOP
            v_n := 0;
            LOOP
                v_n := v_n OPERATOR(pg_catalog.+) 1;
                EXIT WHEN v_n OPERATOR(pg_catalog.>) 1000 OR NOT CASE
                    WHEN r.sub OPERATOR(pg_catalog.=) '1' AND r.mode OPERATOR(pg_catalog.=) 'ExclusiveLock'
                        THEN pg_catalog.pg_advisory_unlock((r.classid OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) r.objid)
                    WHEN r.sub OPERATOR(pg_catalog.=) '1'
                        THEN pg_catalog.pg_advisory_unlock_shared((r.classid OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) r.objid)
                    WHEN r.mode OPERATOR(pg_catalog.=) 'ExclusiveLock'
                        THEN pg_catalog.pg_advisory_unlock(broker._int4_key(r.classid), broker._int4_key(r.objid))
                    ELSE pg_catalog.pg_advisory_unlock_shared(broker._int4_key(r.classid), broker._int4_key(r.objid)) END;
            END LOOP;
        END LOOP;
        v_msg := pg_catalog.set_config('client_min_messages', p_settings[pg_catalog.array_position(broker._guarded_settings(), 'client_min_messages')], true);
    END IF;
    IF pg_catalog.cardinality(p_channels) OPERATOR(pg_catalog.=) 0 THEN
        UNLISTEN *;  -- also a LISTEN of this transaction (not listed before COMMIT)
    ELSE
        FOR r IN SELECT c.ch FROM pg_catalog.pg_listening_channels() AS c(ch)
                  WHERE NOT c.ch OPERATOR(pg_catalog.=) ANY (p_channels)
        LOOP
            EXECUTE pg_catalog.format('UNLISTEN %I', r.ch);
        END LOOP;
    END IF;
    FOR r IN SELECT p.name FROM pg_catalog.pg_prepared_statements AS p
              WHERE p.from_sql AND NOT p.name OPERATOR(pg_catalog.=) ANY (p_prepared)
    LOOP
        EXECUTE pg_catalog.format('DEALLOCATE %I', r.name);
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._restore_session(text[], text[], text[], text[]) IS
    'Internal: undo the session state jobs left (guarded settings, session advisory locks, LISTEN, prepared statements).';

-- ---------------------------------------------------------------------------
-- Function: broker._int4_key(p_oid)
--   An advisory lock key half as pg_locks shows it (an oid), as the integer
--   pg_advisory_lock(int, int) took.
--   Calls: _written_tables
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._int4_key(p_oid bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (CASE WHEN p_oid OPERATOR(pg_catalog.>=) 2147483648 THEN p_oid OPERATOR(pg_catalog.-) 4294967296
                   ELSE p_oid END)::integer $$;
COMMENT ON FUNCTION broker._int4_key(bigint) IS
    'Internal: an advisory lock key half from pg_locks (oid) as the int4 it was taken with.';

-- ---------------------------------------------------------------------------
-- Function: broker._written_tables()
--   The tables with triggers that this transaction wrote so far, as
--   'oid/rows written' (its statistics counters), this session's temporary
--   ones with triggers included; empty at once when the database has no
--   DEFERRABLE trigger at all, the usual case. Work grows with the tables
--   that have triggers, not with how many triggers anyone created.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._written_tables()
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- plpgsql, not sql: a SQL function with SET is planned again at every call, and every run calls this
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger AS p WHERE p.tgdeferrable) THEN
        RETURN ARRAY[]::text[];
    END IF;
    RETURN ARRAY(
        SELECT w.oid::text OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) w.n::text
          FROM (SELECT c.oid, pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid)
                              OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_xact_tuples_updated(c.oid)
                              OPERATOR(pg_catalog.+) pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid) AS n
                  FROM pg_catalog.pg_class AS c
                 WHERE c.relhastriggers AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p']::"char"[])
                   AND (c.relpersistence OPERATOR(pg_catalog.<>) 't'
                        OR c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema())) AS w
         WHERE w.n OPERATOR(pg_catalog.>) 0
         ORDER BY w.oid);
END;
$$;
COMMENT ON FUNCTION broker._written_tables() IS
    'Internal: the tables with triggers this transaction wrote so far, as oid/rows (empty when no DEFERRABLE trigger exists).';

-- ---------------------------------------------------------------------------
-- Function: broker._deferrable_code(p_tables)
--   The DEFERRABLE constraint triggers on the tables p_tables that can run
--   code other than PostgreSQL's own, as (trigger oid, table, trigger name).
--   Foreign keys (their checks run as the table's owner) and unique,
--   primary key and exclusion constraints on plain columns are not listed;
--   a SECURITY DEFINER trigger function is (what it writes at COMMIT can
--   queue further events). Reads the triggers of those tables only (index
--   on tgrelid). Generic plans: a custom plan of the catalog join, made
--   again at every call (once per batch of jobs), cost more than running it;
--   no table, no query (the usual case: no DEFERRABLE trigger anywhere).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._deferrable_code(p_tables oid[], OUT trigger_oid oid, OUT rel regclass, OUT trigger_name name)
RETURNS SETOF record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF pg_catalog.cardinality(p_tables) OPERATOR(pg_catalog.=) 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT t.oid, t.tgrelid::regclass, t.tgname
      FROM pg_catalog.pg_trigger AS t
      JOIN pg_catalog.pg_proc AS f ON f.oid OPERATOR(pg_catalog.=) t.tgfoid
      LEFT JOIN pg_catalog.pg_constraint AS k ON k.oid OPERATOR(pg_catalog.=) t.tgconstraint
      LEFT JOIN pg_catalog.pg_index AS x ON x.indexrelid OPERATOR(pg_catalog.=) k.conindid
     WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY (p_tables)
       AND t.tgdeferrable
       AND NOT (t.tgisinternal AND f.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
                AND (f.proname OPERATOR(pg_catalog.~~) 'RI\_FKey\_%'
                     OR (f.proname OPERATOR(pg_catalog.=) 'unique_key_recheck'
                         AND x.indexprs IS NULL AND x.indpred IS NULL)))
     ORDER BY t.tgrelid, t.tgname;
END;
$$;
COMMENT ON FUNCTION broker._deferrable_code(oid[]) IS
    'Internal: the DEFERRABLE constraint triggers on the given tables that can run code at COMMIT.';

-- ---------------------------------------------------------------------------
-- Function: broker._commit_time_code(p_cursors, p_written)
--   What jobs left that would run at COMMIT, as the message of the refusal,
--   or NULL when nothing: a WITH HOLD cursor not in p_cursors (those the
--   session had before), or a trigger of _deferrable_code on a table the
--   jobs wrote (not in p_written, the _written_tables from before they ran,
--   with as many rows) or on one of this session's temporary tables; with
--   track_counts off, on any table with triggers.
--   Calls: _deferrable_code, _written_tables
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._commit_time_code(p_cursors text[], p_written text[])
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN COALESCE(
        (SELECT pg_catalog.format('the job left the WITH HOLD cursor %I open', c.name)
           FROM pg_catalog.pg_cursors AS c
          WHERE c.is_holdable
            AND NOT (c.name OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) c.creation_time::text)
                    OPERATOR(pg_catalog.=) ANY (p_cursors)
          LIMIT 1),
        (SELECT pg_catalog.format('the job modified table %s, which has the DEFERRABLE constraint trigger %I',
                                  d.rel, d.trigger_name)
           FROM broker._deferrable_code(CASE
                    WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger AS p WHERE p.tgdeferrable)
                        THEN ARRAY[]::oid[]
                    WHEN NOT pg_catalog.current_setting('track_counts')::boolean
                        THEN ARRAY(SELECT c.oid FROM pg_catalog.pg_class AS c WHERE c.relhastriggers
                                      AND (c.relpersistence OPERATOR(pg_catalog.<>) 't'
                                           OR c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()))
                    ELSE ARRAY(SELECT pg_catalog.split_part(w.t, '/', 1)::oid
                                 FROM pg_catalog.unnest(broker._written_tables()) AS w(t)
                                WHERE NOT w.t OPERATOR(pg_catalog.=) ANY (p_written)
                               UNION
                               SELECT c.oid FROM pg_catalog.pg_class AS c
                                WHERE c.relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
                                  AND c.relhastriggers) END) AS d
          LIMIT 1));
END;
$$;
COMMENT ON FUNCTION broker._commit_time_code(text[], text[]) IS
    'Internal: what jobs left that would run at COMMIT as the caller''s login (a new WITH HOLD cursor, a DEFERRABLE trigger on a table they wrote), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._run_guarded(p_call, p_sqls, p_languages, p_search_paths,
--     p_tenant_id)
--   Runs jobs through p_call (a run_jobs-shaped statement taking $1..$4, see
--   broker_run_batch) in a subtransaction, puts the session back
--   (_restore_session) and checks what they left for COMMIT
--   (_commit_time_code). Returns each job's error (NULL: success) and run
--   time, in order, and refused NULL; or, when they left code for COMMIT,
--   everything they did rolled back, the arrays NULL and refused the reason.
--   Under a batch budget (broker.batch_deadline set before the call: see
--   broker_run_batch), the budget's statement_timeout can also fire outside
--   every job (between two of them, or while the session is put back): then
--   everything they did is rolled back too, and the arrays and refused are
--   all NULL (none of them ran; the caller passes them again). The handler
--   names query_canceled: WHEN OTHERS does not catch it.
--   Calls: _session_state, _restore_session, _commit_time_code
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._run_guarded(p_call text, p_sqls text[], p_languages text[], p_search_paths text[],
    p_tenant_id text, OUT states text[], OUT messages text[], OUT durations interval[], OUT refused text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_before record := broker._session_state();
    v_budget boolean := COALESCE(pg_catalog.current_setting('broker.batch_deadline', true), '') OPERATOR(pg_catalog.<>) '';
BEGIN
    BEGIN
        EXECUTE p_call INTO states, messages, durations USING p_sqls, p_languages, p_search_paths, p_tenant_id;
        PERFORM broker._restore_session(v_before.settings, v_before.advisory, v_before.channels, v_before.prepared);
        refused := broker._commit_time_code(v_before.cursors, v_before.written);
        IF refused IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'PB001', MESSAGE = refused;
        END IF;
    EXCEPTION
        WHEN SQLSTATE 'PB001' THEN
            states := NULL;
            messages := NULL;
            durations := NULL;
            refused := SQLERRM;
        WHEN query_canceled THEN
            IF NOT v_budget THEN
                RAISE;
            END IF;
            -- (what a rollback leaves: session advisory locks, prepared statements; the timer fired already)
            PERFORM broker._restore_session(v_before.settings, v_before.advisory, v_before.channels, v_before.prepared);
            states := NULL;
            messages := NULL;
            durations := NULL;
            refused := NULL;
    END;
END;
$$;
COMMENT ON FUNCTION broker._run_guarded(text, text[], text[], text[], text) IS
    'Internal: run jobs through their executor, undo the session state they left, and roll them back when they left code for COMMIT.';

-- ---------------------------------------------------------------------------
-- Function: broker._refusal(p_reason, p_run_as)
--   The stored message of a job refused for code it left for COMMIT
--   (p_reason from _commit_time_code), with what to do; NULL for NULL.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._refusal(p_reason text, p_run_as name)
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.format('refused: %s; code left for COMMIT would run as the login that runs the jobs, '
                             'not as %I, so nothing of the job was kept. Close WITH HOLD cursors before the job '
                             'ends, and make constraint triggers of tables that jobs write NOT DEFERRABLE', p_reason, p_run_as)
     WHERE p_reason IS NOT NULL
$$;
COMMENT ON FUNCTION broker._refusal(text, name) IS
    'Internal: the message of a job refused because it left code for COMMIT (what, and what to do instead).';
-- source: sql/run/attempts.sql
-- sql/run/attempts.sql: the attempt history (broker_job_attempts) and a job's output.

-- ---------------------------------------------------------------------------
-- Function: broker._command_status(p_sql, p_language, p_rows)
--   The command status of a job's last statement, as psql shows it: the
--   first keyword of the text after the job's last semicolon, with the rows
--   it processed where PostgreSQL's tag has them (INSERT 0 5, UPDATE 3,
--   SELECT 1, DO; the keyword alone when the row count is unknown, as for
--   an executor made by 0.1.0). PL/pgSQL gives the row count of an EXECUTE (GET
--   DIAGNOSTICS ROW_COUNT, which run_job leaves in broker.job_rows) but not
--   its command tag, hence the keyword: a
--   last statement that starts with WITH is shown as WITH <rows>. NULL when
--   no keyword is found.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._command_status(p_sql text, p_language text, p_rows bigint)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_last text := pg_catalog.rtrim(p_sql, E' \t\r\n;');
    v_word text;
    v_n    integer := pg_catalog.strpos(pg_catalog.reverse(v_last), ';');
BEGIN
    IF p_language OPERATOR(pg_catalog.=) 'plpgsql' THEN
        RETURN 'DO';
    END IF;
    IF p_language OPERATOR(pg_catalog.=) 'task' THEN
        RETURN NULL;  -- (its text is its arguments)
    END IF;
    -- string functions, not regular expressions over the whole text: a third of the cost, once per job
    IF v_n OPERATOR(pg_catalog.>) 0 THEN
        v_last := pg_catalog.right(v_last, v_n OPERATOR(pg_catalog.-) 1);
    END IF;
    LOOP  -- past blanks and -- comments
        v_last := pg_catalog.ltrim(v_last, E' \t\r\n');
        EXIT WHEN NOT pg_catalog.starts_with(v_last, '--');
        v_n := pg_catalog.strpos(v_last, E'\n');
        v_last := CASE WHEN v_n OPERATOR(pg_catalog.=) 0 THEN '' ELSE pg_catalog.substr(v_last, v_n OPERATOR(pg_catalog.+) 1) END;
    END LOOP;
    v_word := pg_catalog.upper(pg_catalog.substring(v_last, '^[A-Za-z]+'));
    RETURN CASE WHEN v_word IS NULL OR p_rows IS NULL THEN v_word
                WHEN v_word OPERATOR(pg_catalog.=) 'INSERT' THEN 'INSERT 0 ' OPERATOR(pg_catalog.||) p_rows::text
                WHEN v_word OPERATOR(pg_catalog.=) ANY (ARRAY['UPDATE', 'DELETE', 'SELECT', 'MERGE', 'COPY', 'FETCH', 'MOVE',
                                                              'WITH', 'VALUES', 'TABLE'])
                    THEN v_word OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) p_rows::text
                ELSE v_word END;
END;
$$;
COMMENT ON FUNCTION broker._command_status(text, text, bigint) IS
    'Internal: the command status of a job''s last statement (its first keyword, with the row count where PostgreSQL''s tag has one).';

-- ---------------------------------------------------------------------------
-- Function: broker._record_attempts(p_job_ids, p_outcome, p_sqlstates,
--     p_messages, p_outputs)
--   Appends one attempt row per job to broker_job_attempts, from the job's
--   row as it is before its outcome is written (attempt number, claim time,
--   instance), with outcome p_outcome and, by position, SQLSTATE, message
--   and, for a completed attempt, the executor's report of the run
--   (p_outputs: '<rows>' || chr(31) || '<broker.job_output>'; anything else
--   is ignored, never an error: run_jobs is the job role's own function).
--   Messages and outputs are capped like error messages (_error_text).
--   Calls: _error_text, _command_status
--   Tables: reads broker_jobs, writes broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._record_attempts(p_job_ids bigint[], p_outcome text, p_sqlstates text[] DEFAULT NULL,
    p_messages text[] DEFAULT NULL, p_outputs text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO broker.broker_job_attempts AS a
           (job_id, tenant_id, attempt, instance_id, started_at, outcome, error_sqlstate, error_message,
            command_status, rows_affected, output)
    SELECT j.job_id, j.tenant_id, j.attempts, j.lease_instance_id, j.started_at, p_outcome, u.state,
           CASE WHEN u.msg IS NOT NULL THEN broker._error_text(u.msg) END,
           CASE WHEN p_outcome OPERATOR(pg_catalog.=) 'completed'
                THEN broker._command_status(j.execute_str, j.job_language, r.n) END,
           r.n, CASE WHEN r.o OPERATOR(pg_catalog.<>) '' THEN broker._error_text(r.o) END
      FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_sqlstates), pg_catalog.unnest(p_messages),
                      pg_catalog.unnest(p_outputs)) WITH ORDINALITY AS u(id, state, msg, raw, ord)
      JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) u.id
      CROSS JOIN LATERAL (
          SELECT CASE WHEN pg_catalog.split_part(u.raw, pg_catalog.chr(31), 1) OPERATOR(pg_catalog.~) '^[0-9]{1,18}$'
                      THEN pg_catalog.split_part(u.raw, pg_catalog.chr(31), 1)::bigint END AS n,
                 CASE WHEN pg_catalog.strpos(u.raw, pg_catalog.chr(31)) OPERATOR(pg_catalog.>) 0
                      THEN pg_catalog.substr(u.raw, pg_catalog.strpos(u.raw, pg_catalog.chr(31)) OPERATOR(pg_catalog.+) 1) END AS o
      ) AS r
     WHERE u.id IS NOT NULL
     ORDER BY u.ord;
END;
$$;
COMMENT ON FUNCTION broker._record_attempts(bigint[], text, text[], text[], text[]) IS
    'Internal: append attempt rows (outcome, SQLSTATE, message, output) for jobs, read before their outcome is written.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_output(p_value)
--   Called by a job: the small value its attempt returns, kept in
--   broker_job_attempts.output when the attempt completes (at most 2,000
--   characters, then a truncation marker; the last call wins). It sets the
--   transaction-local setting broker.job_output, which a job whose role may
--   not use schema broker can set itself:
--   SELECT set_config('broker.job_output', '...', true). NULL clears it.
-- Example:
--   SELECT broker.broker_set_output(format('%s rows archived', 1200));   -- inside the job's SQL
--   Calls: _error_text
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_set_output(p_value text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN pg_catalog.set_config('broker.job_output', COALESCE(broker._error_text(p_value), ''), true);
END;
$$;
COMMENT ON FUNCTION broker.broker_set_output(text) IS
    'Called by a job: the small value (at most 2,000 characters) its completed attempt records as output.';
-- source: sql/run/finish.sql
-- sql/run/finish.sql: completing jobs.
-- ---------------------------------------------------------------------------
-- Function: broker._complete_job(p_job_id)
--   Marks a running job completed and releases its dependents.
--   Calls: _release_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._complete_job(p_job_id bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job broker.broker_jobs;
BEGIN
    UPDATE broker.broker_jobs AS j
       SET complete_status = broker._state('completed'),
           finished_at = pg_catalog.clock_timestamp(),
           lease_token = NULL, lease_expires_at = NULL
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        PERFORM broker._release_dependents(v_job.tenant_id, v_job.job_id, v_job.job_group);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._complete_job(bigint) IS
    'Internal: mark a job completed (status 2) and release the jobs waiting on it.';

-- ---------------------------------------------------------------------------
-- Function: broker._complete_jobs(p_job_ids)
--   _complete_job for many jobs at once (broker_run_batch, after its jobs
--   ran): one UPDATE, and one release of dependents per tenant. Generic
--   plans: a custom plan of the UPDATE was made again at every call.
--   Calls: _release_dependents_of
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._complete_jobs(p_job_ids bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        WITH done AS (
            UPDATE broker.broker_jobs AS j
               SET complete_status = broker._state('completed'),
                   finished_at = pg_catalog.clock_timestamp(),
                   lease_token = NULL, lease_expires_at = NULL
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
            RETURNING j.tenant_id, j.job_id, j.job_group
        )
        SELECT d.tenant_id, pg_catalog.array_agg(d.job_id ORDER BY d.job_id) AS ids,
               pg_catalog.array_agg(d.job_group ORDER BY d.job_id) AS groups
          FROM done AS d
         GROUP BY d.tenant_id
         ORDER BY d.tenant_id
    LOOP
        PERFORM broker._release_dependents_of(r.tenant_id, r.ids, r.groups);
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._complete_jobs(bigint[]) IS
    'Internal: mark jobs completed (status 2) in one statement and release the jobs waiting on them.';
-- source: sql/run/fail.sql
-- sql/run/fail.sql: failing an attempt: error text, retry delay, final failure.
-- ---------------------------------------------------------------------------
-- Function: broker._error_text(p_message)
--   A job's error message as it is stored and returned: at most 2,000
--   characters. A longer one is cut so that, with ' [truncated from <n>
--   characters]' appended, it is 2,000 characters (so capping twice changes
--   nothing). Error messages carry text of the job's choosing (and row data)
--   of any length: whole, 20 failing jobs with 16 MB messages filled the
--   runner's memory and its dashboard.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._error_text(p_message text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN pg_catalog.length(p_message) OPERATOR(pg_catalog.<=) 2000 THEN p_message
                ELSE pg_catalog.left(p_message, 2000 OPERATOR(pg_catalog.-) pg_catalog.length(m.marker)) OPERATOR(pg_catalog.||) m.marker END
      FROM (SELECT ' [truncated from ' OPERATOR(pg_catalog.||) pg_catalog.length(p_message)::text
                   OPERATOR(pg_catalog.||) ' characters]' AS marker) AS m
$$;
COMMENT ON FUNCTION broker._error_text(text) IS
    'Internal: a job error message as stored and returned: at most 2,000 characters, a longer one cut and ending in '' [truncated from <n> characters]''.';

-- ---------------------------------------------------------------------------
-- Function: broker._retry_delay(p_attempts)
--   Backoff before the next attempt after p_attempts attempts failed:
--   retry_base_seconds * 2^(p_attempts - 1), at most retry_max_seconds.
--   Calls: _setting_int
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._retry_delay(p_attempts integer)
RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_base integer := broker._setting_int('retry_base_seconds', 5, 0);
    v_max  integer := broker._setting_int('retry_max_seconds', 3600, 1);
    v_exp  integer := LEAST(GREATEST(p_attempts OPERATOR(pg_catalog.-) 1, 0), 30);
BEGIN
    RETURN pg_catalog.make_interval(secs =>
        LEAST(v_base::double precision OPERATOR(pg_catalog.*) pg_catalog.power(2::double precision, v_exp::double precision),
              v_max::double precision));
END;
$$;
COMMENT ON FUNCTION broker._retry_delay(integer) IS
    'Internal: retry backoff after n failed attempts: retry_base_seconds * 2^(n-1), capped at retry_max_seconds.';

-- ---------------------------------------------------------------------------
-- Function: broker._fail_job(p_job_id, p_sqlstate, p_message)
--   Fails a running job for good (3), whatever attempts it has left, with
--   p_sqlstate and p_message, and cancels its dependents. Returns 3 (NULL: no
--   such job). _fail_attempt's last attempt, and a job refused at run time.
--   Calls: _error_text, _cancel_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._fail_job(p_job_id bigint, p_sqlstate text, p_message text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job record;
BEGIN
    UPDATE broker.broker_jobs AS j
       SET complete_status = broker._state('failed'),
           finished_at = pg_catalog.clock_timestamp(),
           lease_token = NULL, lease_expires_at = NULL,
           last_error_sqlstate = p_sqlstate, last_error_message = broker._error_text(p_message)
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
    RETURNING j.tenant_id, j.job_id, j.job_group, j.job_name INTO v_job;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM broker._cancel_dependents(v_job.tenant_id, v_job.job_id, v_job.job_group,
        pg_catalog.format('dependency job %s (%s) failed', v_job.job_id, v_job.job_name));
    RETURN broker._state('failed');
END;
$$;
COMMENT ON FUNCTION broker._fail_job(bigint, text, text) IS
    'Internal: fail a job for good (status 3) whatever attempts it has left, and cancel its dependents.';

-- ---------------------------------------------------------------------------
-- Function: broker._fail_attempt(p_job_id, p_sqlstate, p_message)
--   Records a failed attempt of a running job (in the attempt history:
--   failed, or lost when p_sqlstate is NULL, as lease recovery passes it).
--   While attempts < max_attempts the job returns to pending with run_after =
--   now + backoff, unless a cancel request was made for this attempt
--   (broker_cancel_job while it ran): then it ends cancelled instead of
--   running again. With no attempts left it is failed (3) and its dependents
--   are cancelled (_fail_job). Returns the new status.
--   Calls: _record_attempts, _cancel_requested, _end_cancelled, _count_pending_deps, _retry_delay, _error_text, _fail_job
--   Tables: reads broker_jobs, writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._fail_attempt(p_job_id bigint, p_sqlstate text, p_message text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job broker.broker_jobs;
BEGIN
    SELECT * INTO v_job FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM broker._record_attempts(ARRAY[p_job_id], CASE WHEN p_sqlstate IS NULL THEN 'lost' ELSE 'failed' END,
                                    ARRAY[p_sqlstate], ARRAY[p_message]);
    IF v_job.attempts OPERATOR(pg_catalog.<) v_job.max_attempts
       AND broker._cancel_requested(p_job_id) IS NOT NULL THEN
        RETURN broker._end_cancelled(p_job_id, broker._cancel_requested(p_job_id));
    END IF;
    IF v_job.attempts OPERATOR(pg_catalog.<) v_job.max_attempts THEN
        -- Back to pending: count again what it waits on. Jobs that joined one of
        -- its groups while it was running were not counted for it then.
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'),
               pending_deps = broker._count_pending_deps(v_job.tenant_id, v_job.job_id),
               run_after = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) broker._retry_delay(v_job.attempts),
               lease_token = NULL, lease_expires_at = NULL, lease_instance_id = NULL,
               last_error_sqlstate = p_sqlstate, last_error_message = broker._error_text(p_message)
         WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
        RETURN broker._state('pending');
    END IF;
    RETURN broker._fail_job(p_job_id, p_sqlstate, p_message);
END;
$$;
COMMENT ON FUNCTION broker._fail_attempt(bigint, text, text) IS
    'Internal: record a failed attempt; retry with exponential backoff while attempts < max_attempts, else fail and cancel dependents.';
-- source: sql/run/pause.sql
-- sql/run/pause.sql: paused queues (broker_queue_pause): pausing and resuming, and what claims skip.

-- ---------------------------------------------------------------------------
-- Function: broker._paused_tenants(p_job_queue)
--   For the claim: the tenants whose jobs of queue p_job_queue are paused,
--   NULL when none is. An element NULL means the queue is paused for every
--   tenant. One lookup per claim; the claim filters on the array.
--   Calls: none
--   Tables: reads broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._paused_tenants(p_job_queue integer)
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT pg_catalog.array_agg(p.tenant_id) FROM broker.broker_queue_pause AS p
             WHERE p.job_queue OPERATOR(pg_catalog.=) p_job_queue);
END;
$$;
COMMENT ON FUNCTION broker._paused_tenants(integer) IS
    'Internal: the tenants whose jobs of a queue are paused (an element NULL: every tenant), or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._paused_for(p_paused, p_tenant_id)
--   Whether a tenant's jobs are paused, given the tenants paused in their
--   queue (p_paused, what broker._paused_tenants returns): the queue is
--   paused for every tenant, or for this one.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._paused_for(p_paused text[], p_tenant_id text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_paused IS NOT NULL
           AND (pg_catalog.array_position(p_paused, NULL) IS NOT NULL OR p_tenant_id OPERATOR(pg_catalog.=) ANY (p_paused))
$$;
COMMENT ON FUNCTION broker._paused_for(text[], text) IS
    'Internal: whether a tenant''s jobs are paused, given the tenants paused in their queue (_paused_tenants).';

-- ---------------------------------------------------------------------------
-- Function: broker._pause(p_fn, p_job_queue, p_paused)
--   Pauses (p_paused true) or resumes queue p_job_queue, a queue of SQL jobs
--   or a task name's (broker_pause_queue, broker_pause_task, named p_fn in
--   errors): a tenant pauses and resumes only its own jobs there (the
--   current tenant); an administrator (superuser or broker_admin) pauses it
--   for every tenant, and resuming as one lifts every pause of it. A resume
--   wakes the queue's runners or task workers. Returns whether anything
--   changed. SECURITY INVOKER: the table's policies decide what the caller
--   may write.
-- Errors: 42501 the caller may not act for the current tenant (strict
--   tenancy).
--   Calls: _is_broker_admin, broker_current_tenant, _tenant_allowed, _notify_queues
--   Tables: writes broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._pause(p_fn text, p_job_queue integer, p_paused boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_admin  boolean := broker._is_broker_admin(CURRENT_USER);
    v_tenant text := broker.broker_current_tenant();
    v_n      integer;
BEGIN
    IF NOT v_admin AND NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION '%: role % may not act for tenant %', p_fn, pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant) USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_paused THEN
        IF v_admin THEN
            INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (p_job_queue, NULL) ON CONFLICT DO NOTHING;
        ELSE
            INSERT INTO broker.broker_queue_pause (job_queue) VALUES (p_job_queue) ON CONFLICT DO NOTHING;
        END IF;
        GET DIAGNOSTICS v_n = ROW_COUNT;
    ELSE
        DELETE FROM broker.broker_queue_pause AS p
         WHERE p.job_queue OPERATOR(pg_catalog.=) p_job_queue
           AND (v_admin OR p.tenant_id OPERATOR(pg_catalog.=) v_tenant);
        GET DIAGNOSTICS v_n = ROW_COUNT;
        PERFORM broker._notify_queues(ARRAY[p_job_queue]);  -- its workers claim again at once
    END IF;
    RETURN v_n OPERATOR(pg_catalog.>) 0;
END;
$$;
COMMENT ON FUNCTION broker._pause(text, integer, boolean) IS
    'Internal: pauses or resumes a queue (of SQL jobs or a task name''s) for the current tenant, or for every tenant as an administrator; returns whether anything changed.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_pause_queue(p_job_queue, p_paused)
--   Pauses (p_paused true, the default) or resumes queue p_job_queue: claims
--   skip the jobs of a paused queue, running jobs finish, enqueueing goes on.
--   A tenant pauses and resumes only its own jobs in that queue (the current
--   tenant); an administrator (superuser or broker_admin) pauses it for
--   every tenant, and resuming as one lifts every pause of that queue.
--   Returns whether anything changed. Paused queues show in
--   broker_queue_stats (paused). Tasks: broker_pause_task.
-- Errors: 22004 NULL argument; 22023 queue outside 1..1000; 42501 the
--   caller may not act for the current tenant (strict tenancy).
-- Example:
--   SELECT broker.broker_pause_queue(3);          -- pause queue 3
--   SELECT broker.broker_pause_queue(3, false);   -- resume it
--   Calls: _pause
--   Tables: writes broker_queue_pause (through _pause)
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_pause_queue(p_job_queue integer, p_paused boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_job_queue IS NULL OR p_paused IS NULL THEN
        RAISE EXCEPTION 'broker_pause_queue: p_job_queue and p_paused must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_job_queue OPERATOR(pg_catalog.<) 1 OR p_job_queue OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_pause_queue: queues are 1 to 1000, got %', p_job_queue USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN broker._pause('broker_pause_queue', p_job_queue, p_paused);
END;
$$;
COMMENT ON FUNCTION broker.broker_pause_queue(integer, boolean) IS
    'Pauses or resumes a queue: claims skip it, running jobs finish; a tenant pauses its own jobs there, an administrator the queue for everyone. Returns whether anything changed.';
-- source: sql/flow/weights.sql
-- sql/flow/weights.sql: tenants' weights in the fair share of a queue's claims.

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_tenant_weight(p_tenant_id, p_weight)
--   Sets tenant p_tenant_id's weight in the fair share of every queue's
--   claims (broker_get): each claim serves the tenants that have claimable
--   jobs in proportion to their weights. A tenant without a weight weighs 1;
--   p_weight NULL removes the weight (back to 1). Administrators only.
--   Returns the weight now in force.
-- Errors: 22004 NULL tenant; 22023 blank tenant or over 200 characters, a
--   weight outside 1..1000; 42501 the caller is not an administrator.
-- Example:
--   SELECT broker.broker_set_tenant_weight('premium', 3);
--   Calls: _is_broker_admin
--   Tables: writes broker_tenant_weight
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_tenant_weight(p_tenant_id text, p_weight integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT broker._is_broker_admin(CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: only administrators (broker_admin) set tenants'' weights'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_tenant_id IS NULL THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: p_tenant_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_tenant_id) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_tenant_id) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: tenant id must be 1 to 200 characters and not blank'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_weight OPERATOR(pg_catalog.<) 1 OR p_weight OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_set_tenant_weight: weights are 1 to 1000, got %', p_weight
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'NULL removes the weight (a tenant without one weighs 1).';
    END IF;
    IF p_weight IS NULL THEN
        DELETE FROM broker.broker_tenant_weight AS w WHERE w.tenant_id OPERATOR(pg_catalog.=) p_tenant_id;
        RETURN 1;
    END IF;
    INSERT INTO broker.broker_tenant_weight AS w (tenant_id, weight) VALUES (p_tenant_id, p_weight)
        ON CONFLICT (tenant_id) DO UPDATE
           SET weight = EXCLUDED.weight, set_by = CURRENT_USER, set_at = pg_catalog.now();
    RETURN p_weight;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_tenant_weight(text, integer) IS
    'Sets a tenant''s weight (1 to 1000; NULL: back to 1) in the fair share of every queue''s claims. Administrators only.';
-- source: sql/flow/limits.sql
-- sql/flow/limits.sql: limits on concurrency keys (caps and rates) and what a claim checks against them.

-- ---------------------------------------------------------------------------
-- Function: broker._unpark_key(p_tenant_id, p_key, p_limit)
--   Puts up to p_limit (NULL: all) jobs parked by a limit on concurrency key
--   p_key back into the claim index, first in claim order: the tenant's
--   (p_tenant_id), or every tenant's (p_tenant_id NULL). A claim parks them
--   again if the limit still holds them back, so unparking is never unsafe;
--   it wakes the runners of their queues. Returns how many.
--   Calls: _parked, _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._unpark_key(p_tenant_id text, p_key text, p_limit integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_queues integer[];
BEGIN
    WITH unparked AS (
        UPDATE broker.broker_jobs AS j
           SET parked = broker._parked('none')
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                   SELECT p.job_id FROM broker.broker_jobs AS p
                    WHERE p.concurrency_key OPERATOR(pg_catalog.=) p_key
                      AND (p_tenant_id IS NULL OR p.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
                      AND p.complete_status OPERATOR(pg_catalog.=) 0
                      AND p.parked OPERATOR(pg_catalog.>=) 2
                    ORDER BY p.concurrency_key, p.tenant_id, p.job_priority DESC, p.run_after, p.job_id
                    LIMIT p_limit
                      FOR NO KEY UPDATE SKIP LOCKED))
           AND j.parked OPERATOR(pg_catalog.>=) 2
        RETURNING j.job_queue)
    SELECT pg_catalog.array_agg(DISTINCT u.job_queue) INTO v_queues FROM unparked AS u;
    IF v_queues IS NOT NULL THEN
        PERFORM broker._notify_queues(v_queues);
    END IF;
    RETURN COALESCE(pg_catalog.cardinality(v_queues), 0);
END;
$$;
COMMENT ON FUNCTION broker._unpark_key(text, text, integer) IS
    'Internal: puts up to p_limit jobs parked by a limit on a key back into the claim index (a tenant''s, or every tenant''s with NULL) and wakes their queues.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_limit(p_key, p_max_running, p_per_second, p_burst, p_all_tenants)
--   Sets the limit on concurrency key p_key for the current tenant's jobs:
--   at most p_max_running of them claimed at once (from the claim to the
--   job's end: lease recovery, autonomous jobs and every queue and runner
--   included) and at most p_per_second starts per second (a token bucket
--   that holds p_burst tokens, default p_per_second rounded up). NULL means
--   no limit of that kind; both NULL remove the limit. With p_all_tenants
--   (administrators only) the limit holds for the key's jobs of every tenant
--   together, on top of each tenant's own. A job over a limit is parked: out
--   of the claim index, so that it holds up neither the other jobs of its
--   queue nor the claim's cost; a freed slot or a new token puts it back.
--   Returns whether a limit is now in force.
-- Errors: 22004 NULL key; 22023 blank key or over 200 characters, a cap
--   below 1, a rate not above 0 (or above 1,000,000), a burst below 1 or
--   without a rate; 42501 p_all_tenants by a non-administrator, or the
--   caller may not act for the current tenant (strict tenancy).
-- Example:
--   SELECT broker.broker_set_limit('stripe', 2, NULL);        -- 2 at once
--   SELECT broker.broker_set_limit('geocoder', NULL, 10);     -- 10 starts a second
--   SELECT broker.broker_set_limit('stripe', NULL, NULL);     -- no limit
--   Calls: _is_broker_admin, broker_current_tenant, _tenant_allowed
--   Tables: writes broker_key_limit (its trigger unparks the key's jobs)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_limit(
    p_key          text,
    p_max_running  integer,
    p_per_second   double precision,
    p_burst        integer DEFAULT NULL,
    p_all_tenants  boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_admin  boolean := broker._is_broker_admin(CURRENT_USER);
    v_tenant text := CASE WHEN COALESCE(p_all_tenants, false) THEN NULL ELSE broker.broker_current_tenant() END;
    v_burst  integer := COALESCE(p_burst, pg_catalog.ceil(p_per_second)::integer);
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'broker_set_limit: p_key must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_key) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_key) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'broker_set_limit: p_key must be 1 to 200 characters and not blank' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_running OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_set_limit: p_max_running must be at least 1 (NULL: no cap), got %', p_max_running
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'To hold a key''s jobs back altogether, pause their queue (broker_pause_queue).';
    END IF;
    IF p_per_second OPERATOR(pg_catalog.<=) 0 OR p_per_second OPERATOR(pg_catalog.>) 1000000 OR p_per_second = 'NaN' THEN
        RAISE EXCEPTION 'broker_set_limit: p_per_second must be above 0 and at most 1000000 (NULL: no rate), got %', p_per_second
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_burst IS NOT NULL AND (p_per_second IS NULL OR p_burst OPERATOR(pg_catalog.<) 1) THEN
        RAISE EXCEPTION 'broker_set_limit: p_burst must be at least 1, and only with p_per_second, got %', p_burst
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF COALESCE(p_all_tenants, false) AND NOT v_admin THEN
        RAISE EXCEPTION 'broker_set_limit: only administrators (broker_admin) set a limit across tenants'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT v_admin AND NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_set_limit: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant) USING ERRCODE = 'insufficient_privilege';
    END IF;

    IF p_max_running IS NULL AND p_per_second IS NULL THEN
        DELETE FROM broker.broker_key_limit AS l
         WHERE l.concurrency_key OPERATOR(pg_catalog.=) p_key
           AND l.tenant_id IS NOT DISTINCT FROM v_tenant;
    ELSE
        INSERT INTO broker.broker_key_limit AS l (tenant_id, concurrency_key, max_running, per_second, burst, tokens, tokens_at)
        VALUES (v_tenant, p_key, p_max_running, p_per_second, CASE WHEN p_per_second IS NOT NULL THEN v_burst END,
                CASE WHEN p_per_second IS NOT NULL THEN v_burst END, pg_catalog.statement_timestamp())
        ON CONFLICT (concurrency_key, tenant_id) DO UPDATE
           SET max_running = EXCLUDED.max_running, per_second = EXCLUDED.per_second, burst = EXCLUDED.burst,
               tokens = LEAST(COALESCE(l.tokens, EXCLUDED.tokens), EXCLUDED.burst), tokens_at = EXCLUDED.tokens_at,
               wake_at = NULL, set_by = CURRENT_USER, set_at = pg_catalog.now();
    END IF;
    RETURN p_max_running IS NOT NULL OR p_per_second IS NOT NULL;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_limit(text, integer, double precision, integer, boolean) IS
    'Sets the limit on a concurrency key for the current tenant (or, p_all_tenants, administrators: every tenant together): jobs claimed at once and starts per second; NULLs remove it.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._key_limit_changed()
--   AFTER INSERT, DELETE, or UPDATE of a limit's cap, rate or burst on
--   broker_key_limit: the jobs the key's limit parked (the row's tenant's, or
--   every tenant's for a limit across tenants) go back into the claim index,
--   and the next claims look at them under the limit as it is now. A trigger,
--   so that whoever may write the row (row-level security: a tenant its own,
--   administrators any) unparks that row's jobs and no one else's; the token
--   bookkeeping the claim writes does not fire it.
--   Calls: _unpark_key
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_limit_changed()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        PERFORM broker._unpark_key(OLD.tenant_id, OLD.concurrency_key);
    ELSE
        PERFORM broker._unpark_key(NEW.tenant_id, NEW.concurrency_key);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._key_limit_changed() IS
    'Internal trigger: a limit was set, changed or removed; the jobs it parked go back into the claim index.';

CREATE TRIGGER broker_key_limit_changed_trg
    AFTER INSERT OR DELETE OR UPDATE OF max_running, per_second, burst ON broker.broker_key_limit
    FOR EACH ROW EXECUTE FUNCTION broker._key_limit_changed();
COMMENT ON TRIGGER broker_key_limit_changed_trg ON broker.broker_key_limit IS
    'A limit set, changed or removed: the jobs it parked go back into the claim index.';
-- source: sql/flow/keys.sql
-- sql/flow/keys.sql: what a claim may take of jobs with a concurrency key, and parking the rest.

-- ---------------------------------------------------------------------------
-- Type: broker._claim_candidate
--   A job a claim looked at (in claim order) before it locks any: its id,
--   its concurrency key, its run_after (where the next look starts) and the
--   row version it saw (row_tid: the lock fetches that version directly,
--   with no index descent; a version updated since is skipped, or rechecked
--   when it was updated after the lock's snapshot).
-- ---------------------------------------------------------------------------
CREATE TYPE broker._claim_candidate AS (
    job_id          bigint,
    concurrency_key text,
    run_after       timestamptz,
    row_tid         tid
);
COMMENT ON TYPE broker._claim_candidate IS
    'Internal: a job a claim looked at before locking it (id, concurrency key, run_after and the row version seen).';

-- ---------------------------------------------------------------------------
-- Type: broker._claim_keys
--   What a claim did under the keys' limits so far, across its tenants: the
--   capped keys it took a job of (taken, once per job), and how many jobs it
--   parked (parked: at most 1,000 a claim).
-- ---------------------------------------------------------------------------
CREATE TYPE broker._claim_keys AS (
    taken  text[],
    parked integer
);
COMMENT ON TYPE broker._claim_keys IS
    'Internal: a claim''s dealings with the keys'' limits so far (capped keys it took a job of, jobs it parked).';

-- ---------------------------------------------------------------------------
-- Function: broker._admit_keyed(p_tenant_id, p_candidates, p_keys, p_now, p_want)
--   For a claim of tenant p_tenant_id's jobs: which of p_candidates (in claim
--   order) it may take under the limits on their concurrency keys
--   (broker_key_limit: the tenant's, and the one across tenants). A job
--   without a key, or whose key has no limit, is taken. For a key with a
--   limit the claim first takes the key's lock (_key_lock_key) without
--   waiting; when another claim or a job's end holds it, the key's jobs are
--   left for a later claim. Then:
--   * a cap: at most one job of the key per claim (a claim's jobs run one
--     after the other, so a second would hold a slot idle), and only while
--     fewer than the cap are claimed (running);
--   * a rate: one token per job, the bucket refilled at per_second up to
--     burst since it was last read.
--   The key's other pending jobs of the tenant (up to 1,000, first in claim
--   order) are parked when the cap is reached (parked cap) or the tokens are
--   spent (parked rate, and wake_at is set to when the bucket is full again,
--   which the runners hear of: _notify_due):
--   out of the claim index, so that neither the claim's cost nor the other
--   jobs of the queue wait on them. A candidate locked by
--   someone else is neither taken nor parked. At most p_want of a key are
--   taken (and charged). p_keys (in and out) is what the claim did under the
--   limits so far, across its tenants (broker._claim_keys): it parks at most
--   1,000 jobs in all.
--   Returns the ids taken, in claim order.
--   Calls: _key_lock_key, _parked, _notify_due
--   Tables: reads broker_key_limit, broker_jobs; writes broker_key_limit (tokens), broker_jobs (parked)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._admit_keyed(
    p_tenant_id  text,
    p_candidates broker._claim_candidate[],
    INOUT p_keys broker._claim_keys,
    p_now        timestamptz,
    p_want       integer,
    OUT p_ids    bigint[])
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_key      text;
    v_cap      integer;     -- slots left under the caps (NULL: no cap)
    v_tokens   double precision;  -- whole tokens left under the rates (NULL: no rate)
    v_ok       boolean;
    v_take     integer;
    v_park     smallint;
    v_limit    record;
    v_running  integer;
    v_parked   integer;
    v_key_ids  bigint[];
    v_allowed  text[] := '{}';   -- keys whose candidates are taken without a limit
    v_quota    integer[] := '{}';
    v_keys     text[] := '{}';
    c          broker._claim_candidate;
    i          integer;
BEGIN
    p_ids := '{}';
    -- the limits of each key among the candidates, once per key
    FOR v_key IN SELECT DISTINCT x.concurrency_key FROM pg_catalog.unnest(p_candidates) AS x
                  WHERE x.concurrency_key IS NOT NULL LOOP
        v_cap := NULL;
        v_tokens := NULL;
        v_ok := true;
        v_park := NULL;
        FOR v_limit IN SELECT l.tenant_id, l.max_running, l.per_second, l.burst, l.tokens, l.tokens_at
                         FROM broker.broker_key_limit AS l
                        WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_key
                          AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
                        ORDER BY l.tenant_id NULLS FIRST LOOP
            IF NOT pg_catalog.pg_try_advisory_xact_lock(broker._key_lock_key(v_limit.tenant_id, v_key)) THEN
                v_ok := false;   -- another claim, or a job's end, is at this key: a later claim takes it
                EXIT;
            END IF;
            IF v_limit.max_running IS NOT NULL THEN
                SELECT pg_catalog.count(*)::integer INTO v_running FROM broker.broker_jobs AS j
                 WHERE j.concurrency_key OPERATOR(pg_catalog.=) v_key
                   AND (v_limit.tenant_id IS NULL OR j.tenant_id OPERATOR(pg_catalog.=) v_limit.tenant_id)
                   AND j.complete_status OPERATOR(pg_catalog.=) 1;
                -- (and the key's jobs this claim took already count: they are claimed at its end)
                v_cap := LEAST(COALESCE(v_cap, 2147483647), v_limit.max_running OPERATOR(pg_catalog.-) v_running
                               OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*)::integer FROM pg_catalog.unnest(p_keys.taken) AS t(k)
                                                        WHERE t.k OPERATOR(pg_catalog.=) v_key));
            END IF;
            IF v_limit.per_second IS NOT NULL THEN
                v_tokens := LEAST(COALESCE(v_tokens, 'Infinity'),
                                  pg_catalog.floor(LEAST(v_limit.burst::double precision,
                                      COALESCE(v_limit.tokens, v_limit.burst) OPERATOR(pg_catalog.+)
                                      (GREATEST(pg_catalog.date_part('epoch', p_now OPERATOR(pg_catalog.-) COALESCE(v_limit.tokens_at, p_now)), 0)
                                       OPERATOR(pg_catalog.*) v_limit.per_second))));
            END IF;
        END LOOP;
        IF NOT v_ok THEN
            v_take := 0;
        ELSIF v_cap IS NULL AND v_tokens IS NULL THEN
            v_allowed := v_allowed OPERATOR(pg_catalog.||) v_key;
            CONTINUE;
        ELSE
            v_take := LEAST(COALESCE(v_cap, 2147483647), COALESCE(v_tokens, 2147483647)::integer);
            IF v_cap IS NOT NULL THEN
                v_take := LEAST(v_take, CASE WHEN v_key OPERATOR(pg_catalog.=) ANY (p_keys.taken) THEN 0 ELSE 1 END);
            END IF;
            v_take := GREATEST(LEAST(v_take, p_want), 0);   -- (no more tokens spent than the claim wants)
            -- park the key's other candidates when the limit, not this claim, holds them back
            IF v_cap IS NOT NULL AND v_cap OPERATOR(pg_catalog.<=) v_take THEN
                v_park := broker._parked('cap');
            ELSIF v_tokens IS NOT NULL AND v_tokens OPERATOR(pg_catalog.<=) v_take THEN
                v_park := broker._parked('rate');
            END IF;
        END IF;
        IF v_ok AND v_tokens IS NOT NULL THEN
            -- the tokens this claim spends (a job it then finds locked by another claim spends one too)
            UPDATE broker.broker_key_limit AS l
               SET tokens = LEAST(l.burst::double precision, COALESCE(l.tokens, l.burst) OPERATOR(pg_catalog.+)
                                  (GREATEST(pg_catalog.date_part('epoch', p_now OPERATOR(pg_catalog.-) COALESCE(l.tokens_at, p_now)), 0)
                                   OPERATOR(pg_catalog.*) l.per_second)) OPERATOR(pg_catalog.-) v_take,
                   tokens_at = p_now
             WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_key
               AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
               AND l.per_second IS NOT NULL;
            IF v_park OPERATOR(pg_catalog.=) broker._parked('rate') THEN
                -- when the bucket is full again: the claim that comes then unparks a burst of them
                -- (broker._unpark_due), and the runner's poll comes then (broker_next_due)
                UPDATE broker.broker_key_limit AS l
                   SET wake_at = p_now OPERATOR(pg_catalog.+) pg_catalog.make_interval(
                           secs => GREATEST(l.burst OPERATOR(pg_catalog.-) l.tokens, 0) OPERATOR(pg_catalog./) l.per_second)
                 WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_key
                   AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
                   AND l.per_second IS NOT NULL
                   AND l.tokens OPERATOR(pg_catalog.<) 1;
                IF FOUND THEN
                    PERFORM broker._notify_due();   -- (a time the runner's poll did not know yet)
                END IF;
            END IF;
        END IF;
        v_key_ids := ARRAY(SELECT x.job_id FROM pg_catalog.unnest(p_candidates) WITH ORDINALITY AS x(job_id, concurrency_key, run_after, row_tid, o)
                            WHERE x.concurrency_key OPERATOR(pg_catalog.=) v_key ORDER BY x.o);
        IF v_park IS NOT NULL AND p_keys.parked OPERATOR(pg_catalog.<) 1000 THEN
            -- the key's other pending jobs of this tenant, not only this window's, in claim order, up
            -- to 1,000 a claim: the claims that follow then do not meet them level by level (rows
            -- another transaction holds are left as they are: SKIP LOCKED)
            UPDATE broker.broker_jobs AS j
               SET parked = v_park
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                       SELECT p.job_id FROM broker.broker_jobs AS p
                        WHERE p.concurrency_key OPERATOR(pg_catalog.=) v_key
                          AND p.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                          AND p.complete_status OPERATOR(pg_catalog.=) 0
                          AND p.parked OPERATOR(pg_catalog.=) 0
                          AND p.job_id OPERATOR(pg_catalog.<>) ALL (v_key_ids[1 : v_take])
                        ORDER BY p.concurrency_key, p.tenant_id, p.job_priority DESC, p.run_after, p.job_id
                        LIMIT 1000 OPERATOR(pg_catalog.-) p_keys.parked
                          FOR NO KEY UPDATE SKIP LOCKED));
            GET DIAGNOSTICS v_parked = ROW_COUNT;
            p_keys.parked := p_keys.parked OPERATOR(pg_catalog.+) v_parked;
        END IF;
        IF v_cap IS NOT NULL AND v_take OPERATOR(pg_catalog.>) 0 THEN
            p_keys.taken := p_keys.taken OPERATOR(pg_catalog.||) v_key;
        END IF;
        v_keys := v_keys OPERATOR(pg_catalog.||) v_key;
        v_quota := v_quota OPERATOR(pg_catalog.||) v_take;
    END LOOP;

    -- the candidates taken, in claim order
    FOREACH c IN ARRAY p_candidates LOOP
        IF c.concurrency_key IS NULL OR c.concurrency_key OPERATOR(pg_catalog.=) ANY (v_allowed) THEN
            p_ids := p_ids OPERATOR(pg_catalog.||) c.job_id;
        ELSE
            i := pg_catalog.array_position(v_keys, c.concurrency_key);
            IF v_quota[i] OPERATOR(pg_catalog.>) 0 THEN
                p_ids := p_ids OPERATOR(pg_catalog.||) c.job_id;
                v_quota[i] := v_quota[i] OPERATOR(pg_catalog.-) 1;
            END IF;
        END IF;
    END LOOP;
    RETURN;
END;
$$;
COMMENT ON FUNCTION broker._admit_keyed(text, broker._claim_candidate[], broker._claim_keys, timestamptz, integer) IS
    'Internal: which candidates a claim may take under their keys'' limits; parks the key''s others when its cap or tokens hold them back.';
-- source: sql/flow/parking.sql
-- sql/flow/parking.sql: parked jobs: out of the claim index until their time comes or their key's limit frees up.

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_park_later()
--   BEFORE INSERT of a pending job dated later (run_after after the
--   write's time, broker._due_time) that is not parked: it parks it (parked later), so that
--   jobs scheduled ahead and jobs dated 'infinity' are outside the claim index
--   and cost a claim nothing. broker._unpark_due puts them back once due; the
--   runners hear of it (_notify_due), so that their poll comes then.
--   Calls: _state, _parked, _notify_due
--   Tables: none (sets NEW.parked of broker_jobs)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_park_later()
RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.complete_status OPERATOR(pg_catalog.=) broker._state('pending') AND NEW.parked OPERATOR(pg_catalog.=) broker._parked('none') THEN
        NEW.parked := broker._parked('later');
        PERFORM broker._notify_due();
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._jobs_park_later() IS
    'Internal trigger: a pending row version dated later is parked (parked later) until it is due.';

CREATE TRIGGER broker_jobs_park_later_trg
    BEFORE INSERT ON broker.broker_jobs
    FOR EACH ROW
    -- (the rest of the condition is in the function: every INSERT statement prepares this WHEN
    -- from its stored text, and a short one costs a one-job enqueue less; docs/benchmarks.md)
    -- (broker._due_time() written out; tests_py/integration/test_enqueue_notifies_on_commit.py enqueues after
    -- a procedure's COMMIT, where it is later than statement_timestamp())
    WHEN (NEW.run_after OPERATOR(pg_catalog.>) GREATEST(pg_catalog.statement_timestamp(), pg_catalog.transaction_timestamp()))
    EXECUTE FUNCTION broker._jobs_park_later();
COMMENT ON TRIGGER broker_jobs_park_later_trg ON broker.broker_jobs IS
    'A job enqueued for later is parked until due (out of the claim index).';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_park_again()
--   BEFORE UPDATE of a job that becomes pending (a retry's backoff, a
--   hand-back, a recovered lease, an operator's retry) or whose run_after
--   moves while it is pending, unless the write sets parked itself (a claim
--   or an unpark does): parked later when it is dated later, else not parked.
--   So a job never comes back pending still parked by a limit that may be
--   gone (a cancelled job retried), and a backoff is spent outside the claim
--   index. A job parked later is told to the runners (_notify_due).
--   Calls: _parked, _notify_due, _due_time
--   Tables: none (sets NEW.parked of broker_jobs)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_park_again()
RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.run_after OPERATOR(pg_catalog.>) broker._due_time() THEN
        NEW.parked := broker._parked('later');
        PERFORM broker._notify_due();
    ELSE
        NEW.parked := broker._parked('none');
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._jobs_park_again() IS
    'Internal trigger: a job that becomes pending, or whose run_after moves while pending, is parked later if dated later, else not parked.';

-- (named to fire before broker_jobs_ready_xid_trg, which sees the parked it sets)
CREATE TRIGGER broker_jobs_park_again_trg
    BEFORE UPDATE ON broker.broker_jobs
    FOR EACH ROW
    WHEN (NEW.complete_status OPERATOR(pg_catalog.=) 0 AND NEW.parked OPERATOR(pg_catalog.=) OLD.parked
          AND (OLD.complete_status OPERATOR(pg_catalog.<>) 0 OR OLD.run_after OPERATOR(pg_catalog.<>) NEW.run_after))
    EXECUTE FUNCTION broker._jobs_park_again();
COMMENT ON TRIGGER broker_jobs_park_again_trg ON broker.broker_jobs IS
    'A job that becomes pending, or whose run_after moves while pending, is parked later if dated later, else not parked.';

-- ---------------------------------------------------------------------------
-- Function: broker._unpark_due(p_job_queue)
--   For the claim: puts back into the claim index up to 1,000 jobs of queue
--   p_job_queue parked until a run_after that has come (oldest first), and
--   the jobs of every key whose next token is due (broker_key_limit.wake_at:
--   up to the key's burst; a claim parks again what is still over the
--   limit). Rows another transaction holds are left to a later claim (SKIP
--   LOCKED): it never waits. The rows it unparks become ready in this
--   transaction (their ready_xid), so the claim finds them.
--   Calls: _parked, _unpark_key
--   Tables: writes broker_jobs, broker_key_limit
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._unpark_due(p_job_queue integer)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_now timestamptz := pg_catalog.statement_timestamp();
    r     record;
BEGIN
    IF EXISTS (SELECT FROM broker.broker_jobs AS j
                WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                  AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                  AND j.run_after OPERATOR(pg_catalog.<=) v_now) THEN
        UPDATE broker.broker_jobs AS j
           SET parked = broker._parked('none')
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                   SELECT p.job_id FROM broker.broker_jobs AS p
                    WHERE p.job_queue OPERATOR(pg_catalog.=) p_job_queue
                      AND p.complete_status OPERATOR(pg_catalog.=) 0 AND p.parked OPERATOR(pg_catalog.=) 1
                      AND p.run_after OPERATOR(pg_catalog.<=) v_now
                    ORDER BY p.job_queue, p.run_after
                    LIMIT 1000
                      FOR NO KEY UPDATE SKIP LOCKED))
           AND j.parked OPERATOR(pg_catalog.=) 1;
    END IF;
    IF EXISTS (SELECT FROM broker.broker_key_limit AS l WHERE l.wake_at OPERATOR(pg_catalog.<=) v_now) THEN
        FOR r IN SELECT l.tenant_id, l.concurrency_key, l.burst FROM broker.broker_key_limit AS l
                  WHERE l.wake_at OPERATOR(pg_catalog.<=) v_now
                  ORDER BY l.wake_at
                  LIMIT 100
                    FOR NO KEY UPDATE SKIP LOCKED LOOP
            UPDATE broker.broker_key_limit AS l SET wake_at = NULL
             WHERE l.concurrency_key OPERATOR(pg_catalog.=) r.concurrency_key
               AND l.tenant_id IS NOT DISTINCT FROM r.tenant_id;
            PERFORM broker._unpark_key(r.tenant_id, r.concurrency_key, r.burst);
        END LOOP;
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._unpark_due(integer) IS
    'Internal: for the claim, puts back the jobs of a queue parked until a time that has come, and those of keys whose next token is due.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_key_slot_freed()
--   AFTER UPDATE on broker_jobs of a job with a concurrency key that leaves
--   running (completed, failed, cancelled, handed back, recovered): a slot
--   of its key is free, so the key's jobs parked at its cap go back into the
--   claim index (up to the largest cap on the key; a claim parks again what
--   is still over it) and their runners are woken, without waiting for a
--   poll. It first takes the key's lock shared (_key_lock_key): a claim that
--   was parking the key's jobs has then committed, and this sees them.
--   Shared, so that jobs' ends never wait on each other; claims take it
--   only when free, so no two wait on each other either.
--   Calls: _key_lock_key, _unpark_key
--   Tables: reads broker_key_limit; writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._jobs_key_slot_freed()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_all    integer;
    v_tenant integer;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(broker._key_lock_key(NULL, OLD.concurrency_key));
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(broker._key_lock_key(OLD.tenant_id, OLD.concurrency_key));
    SELECT pg_catalog.max(l.max_running) FILTER (WHERE l.tenant_id IS NULL),
           pg_catalog.max(l.max_running) FILTER (WHERE l.tenant_id IS NOT NULL)
      INTO v_all, v_tenant
      FROM broker.broker_key_limit AS l
     WHERE l.concurrency_key OPERATOR(pg_catalog.=) OLD.concurrency_key
       AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) OLD.tenant_id);
    IF v_all IS NOT NULL THEN
        PERFORM broker._unpark_key(NULL, OLD.concurrency_key, v_all);
    END IF;
    -- (also with no limit left: jobs parked under a limit since removed go back)
    PERFORM broker._unpark_key(OLD.tenant_id, OLD.concurrency_key, COALESCE(v_tenant, v_all, 1000));
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._jobs_key_slot_freed() IS
    'Internal trigger: a job with a concurrency key left running; the key''s jobs parked at its cap go back into the claim index.';

CREATE TRIGGER broker_jobs_key_slot_freed_trg
    AFTER UPDATE ON broker.broker_jobs
    FOR EACH ROW
    WHEN (OLD.complete_status OPERATOR(pg_catalog.=) 1 AND NEW.complete_status OPERATOR(pg_catalog.<>) 1
          AND OLD.concurrency_key IS NOT NULL)
    EXECUTE FUNCTION broker._jobs_key_slot_freed();
COMMENT ON TRIGGER broker_jobs_key_slot_freed_trg ON broker.broker_jobs IS
    'A job with a concurrency key left running: its key''s jobs parked at the cap go back into the claim index.';
-- source: sql/flow/stats.sql
-- sql/flow/stats.sql: seeing flow control: each tenant's share of a queue, each key's limit and use, and why a job waits.
-- A tenant (broker_enqueue) reads these through row-level security: its own jobs, limits and weight,
-- and of the other tenants only the totals its share and the limits across tenants are measured
-- against (_queue_totals, _key_totals). The monitoring roles (broker_runtime, administrators) read
-- every tenant, as broker_queue_stats does. Each reads through the indexes that hold what it counts
-- (enable_seqscan off: with many finished jobs the planner would otherwise read the whole table for a
-- few thousand ready ones; tests_sql/flow/statistics_read_what_they_count_not_the_whole_table.sql).

-- ---------------------------------------------------------------------------
-- Function: broker._queue_totals(p_window)
--   Per queue, across every tenant: the jobs running now, the jobs served in
--   the last p_window (running, or claimed and finished since), and the sum
--   of the weights of the tenants with running jobs there. Totals only, no
--   tenant's own numbers: what a tenant's share is measured against.
--   Reads the running jobs (broker_jobs_lease_idx) and the jobs finished
--   within the window (broker_jobs_finished_idx).
--   Calls: _state
--   Tables: reads broker_jobs, broker_tenant_weight
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._queue_totals(p_window interval)
RETURNS TABLE (job_queue integer, running bigint, served bigint, running_weight bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_since timestamptz := pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) p_window;
BEGIN
    RETURN QUERY
    WITH run AS (
        SELECT j.job_queue, j.tenant_id, pg_catalog.count(*) AS n
          FROM broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) 1
         GROUP BY j.job_queue, j.tenant_id
    ), fin AS (
        SELECT j.job_queue, pg_catalog.count(*) AS n
          -- (a state at a time, as purge reads them: the planner drops the index predicate's own
          -- condition from the scan, so without the state's equality it would read the whole index
          -- for the finish times of the window)
          FROM pg_catalog.unnest(ARRAY[2, 3, 4]::smallint[]) AS st(state), broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[])
           AND j.complete_status OPERATOR(pg_catalog.=) st.state
           AND j.finished_at OPERATOR(pg_catalog.>=) v_since
           AND j.started_at IS NOT NULL
         GROUP BY j.job_queue
    ), q AS (
        SELECT r.job_queue, pg_catalog.sum(r.n) AS running,
               pg_catalog.sum(COALESCE(w.weight, 1)) AS running_weight
          FROM run AS r LEFT JOIN broker.broker_tenant_weight AS w ON w.tenant_id OPERATOR(pg_catalog.=) r.tenant_id
         GROUP BY r.job_queue
    )
    SELECT COALESCE(q.job_queue, f.job_queue), COALESCE(q.running, 0)::bigint,
           (COALESCE(q.running, 0) OPERATOR(pg_catalog.+) COALESCE(f.n, 0))::bigint, COALESCE(q.running_weight, 0)::bigint
      FROM q FULL JOIN fin AS f ON f.job_queue OPERATOR(pg_catalog.=) q.job_queue;
END;
$$;
COMMENT ON FUNCTION broker._queue_totals(interval) IS
    'Internal: per queue across tenants, the jobs running, served in a window and the running tenants'' weights (totals only).';

-- ---------------------------------------------------------------------------
-- Function: broker._key_totals(p_key)
--   For a concurrency key with a limit across tenants: its running and
--   pending jobs across every tenant (NULL, NULL for a key without one).
--   Totals only, through broker_jobs_key_running_idx and
--   broker_jobs_key_pending_idx.
--   Calls: none
--   Tables: reads broker_key_limit, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_totals(p_key text, OUT running bigint, OUT waiting bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM broker.broker_key_limit AS l
                    WHERE l.concurrency_key OPERATOR(pg_catalog.=) p_key AND l.tenant_id IS NULL) THEN
        RETURN;
    END IF;
    running := (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS j
                 WHERE j.concurrency_key OPERATOR(pg_catalog.=) p_key
                   AND j.complete_status OPERATOR(pg_catalog.=) 1 AND j.concurrency_key IS NOT NULL);
    waiting := (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS j
                 WHERE j.concurrency_key OPERATOR(pg_catalog.=) p_key
                   AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.concurrency_key IS NOT NULL);
END;
$$;
COMMENT ON FUNCTION broker._key_totals(text) IS
    'Internal: the running and pending jobs across tenants of a key with a limit across tenants (NULLs otherwise).';

-- ---------------------------------------------------------------------------
-- Function: broker._tenant_stats_rows(p_window)
--   broker_tenant_stats over the jobs the caller reads (row-level security),
--   each tenant's share measured against its queue's totals (_queue_totals).
--   Ready: claimable now (_claimable, run_after reached) and not paused for
--   the tenant (_paused_for), through the claim index; running: claimed;
--   served: running, or claimed and finished within p_window.
--   Calls: _claimable, _paused_tenants, _paused_for, _queue_totals
--   Tables: reads broker_jobs, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._tenant_stats_rows(p_window interval)
RETURNS TABLE (job_queue integer, tenant_id text, weight integer, ready bigint, running bigint, served bigint,
               share_served double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_now   timestamptz := pg_catalog.statement_timestamp();
    v_since timestamptz := pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) p_window;
BEGIN
    RETURN QUERY
    WITH s AS (
        SELECT j.job_queue, j.tenant_id, pg_catalog.count(*) AS ready, 0::bigint AS running, 0::bigint AS finished
          FROM broker.broker_jobs AS j
         WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
           AND j.run_after OPERATOR(pg_catalog.<=) v_now
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT j.job_queue, j.tenant_id, 0, pg_catalog.count(*), 0
          FROM broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) 1
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT j.job_queue, j.tenant_id, 0, 0, pg_catalog.count(*)
          -- (a state at a time: see _queue_totals)
          FROM pg_catalog.unnest(ARRAY[2, 3, 4]::smallint[]) AS st(state), broker.broker_jobs AS j
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[])
           AND j.complete_status OPERATOR(pg_catalog.=) st.state
           AND j.finished_at OPERATOR(pg_catalog.>=) v_since
           AND j.started_at IS NOT NULL
         GROUP BY j.job_queue, j.tenant_id
    ), t AS (
        SELECT s.job_queue, s.tenant_id, pg_catalog.sum(s.ready)::bigint AS ready, pg_catalog.sum(s.running)::bigint AS running,
               (pg_catalog.sum(s.running) OPERATOR(pg_catalog.+) pg_catalog.sum(s.finished))::bigint AS served
          FROM s
         GROUP BY s.job_queue, s.tenant_id
    )
    SELECT t.job_queue, t.tenant_id, COALESCE(w.weight, 1),
           CASE WHEN broker._paused_for(broker._paused_tenants(t.job_queue), t.tenant_id) THEN 0::bigint ELSE t.ready END,
           t.running, t.served,
           t.served::double precision OPERATOR(pg_catalog./) NULLIF(q.served, 0)::double precision
      FROM t
      LEFT JOIN broker.broker_tenant_weight AS w ON w.tenant_id OPERATOR(pg_catalog.=) t.tenant_id
      LEFT JOIN broker._queue_totals(p_window) AS q ON q.job_queue OPERATOR(pg_catalog.=) t.job_queue
     ORDER BY t.job_queue, t.tenant_id;
END;
$$;
COMMENT ON FUNCTION broker._tenant_stats_rows(interval) IS
    'Internal: broker_tenant_stats over the jobs the caller reads (row-level security).';

-- ---------------------------------------------------------------------------
-- Function: broker._key_stats_rows()
--   broker_key_stats over the limits and jobs the caller reads (row-level
--   security): a row per limit, with its key's running and pending jobs (of
--   its tenant; across tenants for a limit across tenants, _key_totals), and
--   a row per key and tenant with running or pending jobs and no limit.
--   Through broker_jobs_key_running_idx and broker_jobs_key_pending_idx.
--   Calls: _key_totals
--   Tables: reads broker_key_limit, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_stats_rows()
RETURNS TABLE (concurrency_key text, tenant_id text, running bigint, max_running integer, per_second double precision,
               burst integer, waiting bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    WITH c AS (
        SELECT j.concurrency_key, j.tenant_id, pg_catalog.sum(j.running)::bigint AS running, pg_catalog.sum(j.waiting)::bigint AS waiting
          FROM (SELECT r.concurrency_key, r.tenant_id, pg_catalog.count(*) AS running, 0::bigint AS waiting
                  FROM broker.broker_jobs AS r
                 WHERE r.complete_status OPERATOR(pg_catalog.=) 1 AND r.concurrency_key IS NOT NULL
                 GROUP BY r.concurrency_key, r.tenant_id
                UNION ALL
                SELECT p.concurrency_key, p.tenant_id, 0, pg_catalog.count(*)
                  FROM broker.broker_jobs AS p
                 WHERE p.complete_status OPERATOR(pg_catalog.=) 0 AND p.concurrency_key IS NOT NULL
                 GROUP BY p.concurrency_key, p.tenant_id) AS j
         GROUP BY j.concurrency_key, j.tenant_id
    )
    SELECT l.concurrency_key, l.tenant_id,
           COALESCE(CASE WHEN l.tenant_id IS NULL THEN (broker._key_totals(l.concurrency_key)).running ELSE c.running END, 0),
           l.max_running, l.per_second, l.burst,
           COALESCE(CASE WHEN l.tenant_id IS NULL THEN (broker._key_totals(l.concurrency_key)).waiting ELSE c.waiting END, 0)
      FROM broker.broker_key_limit AS l
      LEFT JOIN c ON c.concurrency_key OPERATOR(pg_catalog.=) l.concurrency_key
                 AND c.tenant_id OPERATOR(pg_catalog.=) l.tenant_id
    UNION ALL
    SELECT c.concurrency_key, c.tenant_id, c.running, NULL::integer, NULL::double precision, NULL::integer, c.waiting
      FROM c
     WHERE NOT EXISTS (SELECT FROM broker.broker_key_limit AS l
                        WHERE l.concurrency_key OPERATOR(pg_catalog.=) c.concurrency_key
                          AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) c.tenant_id))
     ORDER BY 1, 2 NULLS FIRST;
END;
$$;
COMMENT ON FUNCTION broker._key_stats_rows() IS
    'Internal: broker_key_stats over the limits and jobs the caller reads (row-level security).';

-- ---------------------------------------------------------------------------
-- Function: broker._tenant_stats_every_tenant(p_window), broker._key_stats_every_tenant()
--   The same rows across every tenant, for the monitoring roles
--   (broker_runtime, administrators): what broker_tenant_stats and
--   broker_key_stats return to them.
--   Calls: _tenant_stats_rows, _key_stats_rows
--   Tables: reads broker_jobs, broker_key_limit, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._tenant_stats_every_tenant(p_window interval)
RETURNS TABLE (job_queue integer, tenant_id text, weight integer, ready bigint, running bigint, served bigint,
               share_served double precision)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM broker._tenant_stats_rows(p_window)
$$;
COMMENT ON FUNCTION broker._tenant_stats_every_tenant(interval) IS
    'Internal: broker_tenant_stats across every tenant, for the monitoring roles.';

CREATE FUNCTION broker._key_stats_every_tenant()
RETURNS TABLE (concurrency_key text, tenant_id text, running bigint, max_running integer, per_second double precision,
               burst integer, waiting bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM broker._key_stats_rows()
$$;
COMMENT ON FUNCTION broker._key_stats_every_tenant() IS
    'Internal: broker_key_stats across every tenant, for the monitoring roles.';

-- ---------------------------------------------------------------------------
-- Function: broker._sees_every_tenant()
--   Whether the caller reads every tenant's statistics: an administrator
--   (broker_admin, superuser) or a monitoring role (a member of
--   broker_runtime); else it reads its own tenant's, by row-level security.
--   Called by the SECURITY INVOKER functions below, so CURRENT_USER is the
--   caller (a job's SQL runs as its run_as role, never as the runner).
--   Calls: _is_broker_admin
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._sees_every_tenant()
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_runtime oid := pg_catalog.to_regrole('broker_runtime');
BEGIN
    RETURN broker._is_broker_admin(CURRENT_USER)
        OR (v_runtime IS NOT NULL AND pg_catalog.pg_has_role(CURRENT_USER, v_runtime, 'USAGE'));
END;
$$;
COMMENT ON FUNCTION broker._sees_every_tenant() IS
    'Internal: whether the caller reads every tenant''s statistics (administrators, broker_runtime members).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_tenant_stats(p_window)
--   Each tenant's part of each queue: its weight (broker_set_tenant_weight,
--   default 1), its jobs ready (claimable now and not paused for it),
--   running, and served (running, or claimed and finished in the last
--   p_window), and share_served: its served over the queue's served across
--   every tenant (NULL when the queue served none), to set beside its weight.
--   One row per queue and tenant with ready, running or served jobs. A
--   tenant sees its own rows; administrators and broker_runtime every
--   tenant's. Index-backed: the claim index, running and finished jobs.
-- Errors: 22023 p_window NULL or negative.
-- Example:
--   SELECT * FROM broker.broker_tenant_stats('5 minutes') WHERE job_queue = 1;
--   Calls: _sees_every_tenant, _tenant_stats_every_tenant, _tenant_stats_rows
--   Tables: reads broker_jobs, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_tenant_stats(p_window interval DEFAULT '1 minute')
RETURNS TABLE (job_queue integer, tenant_id text, weight integer, ready bigint, running bigint, served bigint,
               share_served double precision)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window OPERATOR(pg_catalog.<) interval '0' THEN
        RAISE EXCEPTION 'broker_tenant_stats: p_window must be an interval of 0 or more (say ''1 minute''), got %',
            COALESCE(p_window::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF broker._sees_every_tenant() THEN
        RETURN QUERY SELECT * FROM broker._tenant_stats_every_tenant(p_window);
    ELSE
        RETURN QUERY SELECT * FROM broker._tenant_stats_rows(p_window);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_tenant_stats(interval) IS
    'Per queue and tenant: weight, ready, running and served jobs in a window, and the share of the queue''s served jobs (a tenant: its own rows; monitoring: all).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_key_stats()
--   Each concurrency key's limits and use: one row per limit (tenant_id
--   NULL: the limit across tenants) with its cap, rate and burst, its jobs
--   running and pending (waiting; across tenants for a limit across
--   tenants), and one row per key and tenant with running or pending jobs
--   and no limit (cap and rate NULL). A tenant sees its own limits and jobs
--   and the limits across tenants; administrators and broker_runtime all.
-- Example:
--   SELECT * FROM broker.broker_key_stats() WHERE running >= max_running;
--   Calls: _sees_every_tenant, _key_stats_every_tenant, _key_stats_rows
--   Tables: reads broker_key_limit, broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_key_stats()
RETURNS TABLE (concurrency_key text, tenant_id text, running bigint, max_running integer, per_second double precision,
               burst integer, waiting bigint)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF broker._sees_every_tenant() THEN
        RETURN QUERY SELECT * FROM broker._key_stats_every_tenant();
    ELSE
        RETURN QUERY SELECT * FROM broker._key_stats_rows();
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_key_stats() IS
    'Per concurrency key (and tenant, NULL: across tenants): running jobs, cap, rate, burst and pending jobs.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_job_waiting(p_job_id)
--   Why pending job p_job_id is not running, as an operator reads it; NULL
--   when it is running or finished, or the caller does not see it (row-level
--   security). In this order, the first that holds:
--   * 'waiting: dependencies (N left)': N jobs or groups it waits on;
--   * 'waiting: queue paused': its queue is paused for its tenant;
--   * 'waiting: due at <run_after>': dated later (parked later, or not yet due);
--   * 'waiting: limit <key> (R of C running)': its key at its cap (parked
--     cap): C the cap in force (the smaller of its tenant's and the limit
--     across tenants), R the jobs running under it;
--   * 'waiting: limit <key> (rate N per second)': its key out of tokens
--     (parked rate), N the rate in force (the smaller);
--   * 'waiting: tenant share': ready, other tenants' jobs of its queue run,
--     and its tenant runs at least its weighted share of the queue's
--     running jobs (weight over the weights of the tenants running there and
--     its own): the claims serve the others first;
--   * else 'waiting: a free worker'.
-- Example:
--   SELECT broker.broker_job_waiting(42);   -- 'waiting: limit stripe (2 of 2 running)'
--   Calls: _parked, _state, _paused_tenants, _paused_for, _key_totals, _queue_totals
--   Tables: reads broker_jobs, broker_key_limit, broker_tenant_weight, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_job_waiting(p_job_id bigint)
RETURNS text
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_job     record;
    v_limit   record;
    v_running bigint;
    v_weight  bigint;
    v_queue   record;
BEGIN
    SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.parked, j.run_after, j.concurrency_key
      INTO v_job FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
    IF NOT FOUND OR v_job.complete_status OPERATOR(pg_catalog.<>) broker._state('pending') THEN
        RETURN NULL;
    END IF;
    IF v_job.pending_deps OPERATOR(pg_catalog.>) 0 THEN
        RETURN pg_catalog.format('waiting: dependencies (%s left)', v_job.pending_deps);
    END IF;
    IF broker._paused_for(broker._paused_tenants(v_job.job_queue), v_job.tenant_id) THEN
        RETURN 'waiting: queue paused';
    END IF;
    IF v_job.parked OPERATOR(pg_catalog.=) broker._parked('later')
       OR v_job.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp() THEN
        RETURN pg_catalog.format('waiting: due at %s', v_job.run_after);
    END IF;
    IF v_job.parked OPERATOR(pg_catalog.>=) broker._parked('cap') THEN
        -- the limits in force on its key: its tenant's and the one across tenants (the smaller binds)
        SELECT pg_catalog.min(l.max_running) AS cap,
               pg_catalog.min(l.max_running) FILTER (WHERE l.tenant_id IS NULL) AS cap_all,
               pg_catalog.min(l.per_second) AS rate
          INTO v_limit
          FROM broker.broker_key_limit AS l
         WHERE l.concurrency_key OPERATOR(pg_catalog.=) v_job.concurrency_key
           AND (l.tenant_id IS NULL OR l.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id);
        IF v_job.parked OPERATOR(pg_catalog.=) broker._parked('rate') AND v_limit.rate IS NOT NULL THEN
            RETURN pg_catalog.format('waiting: limit %s (rate %s per second)', v_job.concurrency_key, v_limit.rate);
        END IF;
        IF v_job.parked OPERATOR(pg_catalog.=) broker._parked('cap') AND v_limit.cap IS NOT NULL THEN
            v_running := CASE WHEN v_limit.cap OPERATOR(pg_catalog.=) v_limit.cap_all
                              THEN (broker._key_totals(v_job.concurrency_key)).running
                              ELSE (SELECT pg_catalog.count(*) FROM broker.broker_jobs AS j
                                     WHERE j.concurrency_key OPERATOR(pg_catalog.=) v_job.concurrency_key
                                       AND j.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id
                                       AND j.complete_status OPERATOR(pg_catalog.=) 1 AND j.concurrency_key IS NOT NULL) END;
            RETURN pg_catalog.format('waiting: limit %s (%s of %s running)', v_job.concurrency_key, v_running, v_limit.cap);
        END IF;
        RETURN pg_catalog.format('waiting: limit %s', v_job.concurrency_key);
    END IF;
    -- ready: is its tenant at or over its weighted share of the queue's running jobs, others running?
    SELECT q.running, q.running_weight INTO v_queue
      FROM broker._queue_totals(interval '0') AS q WHERE q.job_queue OPERATOR(pg_catalog.=) v_job.job_queue;
    SELECT pg_catalog.count(*) INTO v_running FROM broker.broker_jobs AS j
     WHERE j.complete_status OPERATOR(pg_catalog.=) 1
       AND j.job_queue OPERATOR(pg_catalog.=) v_job.job_queue AND j.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id;
    v_weight := COALESCE((SELECT w.weight FROM broker.broker_tenant_weight AS w
                           WHERE w.tenant_id OPERATOR(pg_catalog.=) v_job.tenant_id), 1);
    IF v_running OPERATOR(pg_catalog.>) 0 AND COALESCE(v_queue.running, 0) OPERATOR(pg_catalog.>) v_running
       AND v_running::numeric OPERATOR(pg_catalog.>=)
           ((v_queue.running OPERATOR(pg_catalog.*) v_weight)::numeric OPERATOR(pg_catalog./) v_queue.running_weight) THEN
        RETURN 'waiting: tenant share';
    END IF;
    RETURN 'waiting: a free worker';
END;
$$;
COMMENT ON FUNCTION broker.broker_job_waiting(bigint) IS
    'Why a pending job waits (dependencies, queue paused, due later, a key''s cap or rate, its tenant''s share, a free worker); NULL when it is not pending or not seen.';
-- source: sql/run/claim_hint.sql
-- sql/run/claim_hint.sql: what lets a claim start at its queue's hint: ready_xid kept by a trigger, and writing the hint.

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_ready_xid()
--   BEFORE UPDATE on broker_jobs of a row version that becomes pending,
--   unblocked and unparked (a retry, a hand-back, an interrupted run, a
--   recovered lease, an operator retry, a job whose last dependency
--   finished, one unparked: due, or its key's limit freed) or moves in
--   claim order while it is: it records the transaction that made it so
--   (ready_xid), so that a claim that starts at its queue's hint
--   (broker_claim_hint) finds it. A write that leaves a ready job where it
--   was keeps its ready_xid: the hint's position covers it as before. And
--   BEFORE INSERT of a row that names another ready_xid than the column's
--   default (a data-only restore, COPY, archived rows inserted again): an
--   old one would hide the job from every claim that starts at a hint.
--   Calls: none
--   Tables: none (sets NEW.ready_xid of broker_jobs)
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._jobs_ready_xid()
RETURNS trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.ready_xid := pg_catalog.pg_current_xact_id();
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._jobs_ready_xid() IS
    'Internal trigger: a row version that becomes or stays pending and unblocked records its transaction in ready_xid.';

-- (broker._claimable written out, as the claim index's predicate is: every UPDATE statement on
-- broker_jobs prepares this WHEN, and a function call in it is inlined there each time, parsing the
-- function's body; tests_sql/run/ready_xid_trigger_condition_is_claimable_written_out.sql holds the
-- two to the same rows)
CREATE OR REPLACE TRIGGER broker_jobs_ready_xid_trg
    BEFORE UPDATE ON broker.broker_jobs
    FOR EACH ROW
    WHEN (NEW.complete_status OPERATOR(pg_catalog.=) 0 AND NEW.pending_deps OPERATOR(pg_catalog.=) 0
          AND NEW.parked OPERATOR(pg_catalog.=) 0
          AND (NOT (OLD.complete_status OPERATOR(pg_catalog.=) 0 AND OLD.pending_deps OPERATOR(pg_catalog.=) 0
                    AND OLD.parked OPERATOR(pg_catalog.=) 0)
               OR NEW.job_queue OPERATOR(pg_catalog.<>) OLD.job_queue OR NEW.job_priority OPERATOR(pg_catalog.<>) OLD.job_priority
               OR NEW.tenant_id OPERATOR(pg_catalog.<>) OLD.tenant_id
               OR NEW.run_after OPERATOR(pg_catalog.<>) OLD.run_after))
    EXECUTE FUNCTION broker._jobs_ready_xid();
COMMENT ON TRIGGER broker_jobs_ready_xid_trg ON broker.broker_jobs IS
    'Row versions that become pending and unblocked, or move in claim order while they are, record the transaction that wrote them (ready_xid), for claims that start at a hint.';

CREATE OR REPLACE TRIGGER broker_jobs_ready_xid_insert_trg
    BEFORE INSERT ON broker.broker_jobs
    FOR EACH ROW
    WHEN (NEW.ready_xid OPERATOR(pg_catalog.<>) pg_catalog.pg_current_xact_id())
    EXECUTE FUNCTION broker._jobs_ready_xid();
COMMENT ON TRIGGER broker_jobs_ready_xid_insert_trg ON broker.broker_jobs IS
    'A row inserted with a ready_xid of its own (a restore, COPY) records the inserting transaction instead, as the column''s default does.';

-- ---------------------------------------------------------------------------
-- Function: broker._save_claim_hint(p_job_queue, p_snapshot, p_positions)
--   For broker_get: every pending, unblocked, unparked job of queue
--   p_job_queue that p_snapshot sees is at or after its tenant's position in
--   p_positions (a tenant missing had none). Writes it as the queue's hint
--   (broker_claim_hint), unless another claim is writing one (any true hint
--   will do: it does not wait for that claim), or the transaction cannot (a
--   REPEATABLE READ caller that would fail to serialise); a claim never
--   fails for it.
--   Calls: none
--   Tables: writes broker_claim_hint
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._save_claim_hint(p_job_queue integer, p_snapshot pg_snapshot, p_positions broker._claim_position[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM FROM broker.broker_claim_hint AS h
      WHERE h.job_queue OPERATOR(pg_catalog.=) p_job_queue
        FOR NO KEY UPDATE SKIP LOCKED;
    IF FOUND THEN
        UPDATE broker.broker_claim_hint AS h
           SET started_at = pg_catalog.pg_postmaster_start_time(), snapshot = p_snapshot, positions = p_positions
         WHERE h.job_queue OPERATOR(pg_catalog.=) p_job_queue;
    ELSIF NOT EXISTS (SELECT FROM broker.broker_claim_hint AS h WHERE h.job_queue OPERATOR(pg_catalog.=) p_job_queue) THEN
        -- (the queue's first hint; a row another claim has locked is left to it: inserting
        -- beside it would wait for that claim to end)
        INSERT INTO broker.broker_claim_hint (job_queue, started_at, snapshot, positions)
        VALUES (p_job_queue, pg_catalog.pg_postmaster_start_time(), p_snapshot, p_positions)
        ON CONFLICT (job_queue) DO NOTHING;
    END IF;
EXCEPTION WHEN serialization_failure OR lock_not_available THEN
    NULL;   -- the hint in place is true too
END;
$$;
COMMENT ON FUNCTION broker._save_claim_hint(integer, pg_snapshot, broker._claim_position[]) IS
    'Internal: write the queue''s claim hint (broker_claim_hint) for broker_get, never waiting for another claim and never failing the claim.';
-- source: sql/run/claim_lane.sql
-- sql/run/claim_lane.sql: one tenant's part of a claim (broker._claim_lane).
-- ---------------------------------------------------------------------------
-- Function: broker._claim_lane(p_job_queue, p_tenant_id, p_want, p_now,
--     p_hxmin, p_hxmax, p_hxip, p_hint, p_keys)
--   For broker_get: locks up to p_want claimable jobs of tenant p_tenant_id
--   in queue p_job_queue, in the tenant's claim order (highest priority
--   first, then earliest run_after, then lowest job_id), and returns their
--   ids (p_ids). It also returns where the tenant's ready jobs start (p_first,
--   its first probe, job_id NULL when it has none), for the queue's hint;
--   p_want 0 only probes.
--   The claim index holds only pending, unblocked, unparked jobs, by queue
--   and tenant. The probe finds the tenant's first of them in claim order
--   (a level whose first job is for later, which only a row written without
--   the triggers can be, is skipped whole), and the claim reads that level
--   from there. With a hint (p_hxmin, p_hxmax, p_hxip: its snapshot; p_hint:
--   the tenant's position in it, job_id NULL when the snapshot saw none of
--   the tenant's) it starts there, and adds the jobs made ready since, found
--   by the transaction that made them ready (ready_xid); levels below the
--   position are read from their start (sql/tables/broker_claim_hint.sql).
--   It reads at most 16 levels a claim (a tenant whose levels give nothing
--   now costs a claim no more), each in windows of what is still wanted plus 16, without
--   locks, at most 4 windows a level: the jobs of a window under a limit on
--   their concurrency key go through broker._admit_keyed (which parks those
--   its limit holds back), then the rest are locked, skipping those another
--   transaction holds. So a claim steps over at most a few windows of rows
--   locked elsewhere, whoever holds them.
--   Each statement is an index descent with LIMIT or an index range, no
--   join, planned with enable_seqscan off and kept as a generic plan
--   (tests_sql/run/claim_is_index_backed.sql).
--   Calls: _claimable, _claimable_by_xid, _claimable_by_id, _admit_keyed
--   Tables: reads broker_jobs (and, through _admit_keyed, writes its parked and broker_key_limit)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claim_lane(
    p_job_queue  integer,
    p_tenant_id  text,
    p_want       integer,
    p_now        timestamptz,
    p_hxmin      xid8,
    p_hxmax      xid8,
    p_hxip       xid8[],
    p_hint       broker._claim_position,
    INOUT p_keys broker._claim_keys,
    OUT p_ids    bigint[],
    OUT p_first  broker._claim_position)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_left     integer := p_want;
    v_bound    bigint := 2147483648;  -- above every integer priority
    v_priority integer;
    v_from_at  timestamptz;   -- the level's claimable jobs start after (v_from_at, v_from_id)
    v_from_id  bigint;
    v_src      text;          -- new: made ready since the hint; from: the hint's level; scan: below it
    v_hxmin    xid8 := p_hxmin;
    v_hxmax    xid8 := p_hxmax;
    v_hxip     xid8[] := p_hxip;
    v_hp       integer;
    v_hr       timestamptz;
    v_hid      bigint;
    v_cands    broker._claim_candidate[];
    v_tids     tid[];
    v_keyed    boolean;       -- a candidate has a concurrency key: its limits decide
    v_admit    record;
    v_got      bigint[];
    v_windows  integer;
    v_levels   integer := 0;   -- levels probed
    v_window   integer;       -- rows a window reads: what is still wanted, and 16 more
    v_last     broker._claim_candidate;
BEGIN
    p_ids := '{}';
    IF v_hxmin IS NOT NULL THEN
        -- (a tenant the hint's snapshot saw no ready job of: a position past every job)
        v_hp := COALESCE(p_hint.job_priority, -2147483648);
        v_hr := COALESCE(p_hint.run_after, 'infinity');
        v_hid := COALESCE(p_hint.job_id, 9223372036854775807);
    END IF;
    LOOP
        -- <priority-probe> The tenant's first pending, unblocked, unparked job below v_bound in
        -- claim order: the least of the first job made ready since the hint above where it
        -- starts (a range of broker_jobs_ready_xid_idx from the snapshot's xmin), the first of
        -- the hint's level from where it starts, and the first of the levels below it. Each an
        -- index descent with LIMIT 1 (no join: no statistics can make it a hash join over every
        -- ready job); without a hint, only the last one, over every level.
        SELECT c.p, c.r, c.id, c.src
          INTO v_priority, v_from_at, v_from_id, v_src
          FROM ((SELECT j.job_priority AS p, j.run_after AS r, j.job_id AS id, 'new' AS src
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND broker._claimable_by_xid(j.complete_status, j.pending_deps, j.parked)
                    AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                    AND (j.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR j.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))
                    AND j.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                    AND j.job_priority OPERATOR(pg_catalog.<) v_bound
                    AND (j.job_priority OPERATOR(pg_catalog.>) v_hp
                         OR (j.job_priority OPERATOR(pg_catalog.=) v_hp
                             AND (j.run_after, j.job_id) OPERATOR(pg_catalog.<) (v_hr, v_hid)))
                  ORDER BY j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                (SELECT j.job_priority, j.run_after, j.job_id, 'from'
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND j.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                    AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                    AND j.job_priority OPERATOR(pg_catalog.=) v_hp AND v_hp OPERATOR(pg_catalog.<) v_bound
                    AND (j.run_after, j.job_id) OPERATOR(pg_catalog.>=) (v_hr, v_hid)
                  ORDER BY j.job_queue, j.tenant_id, j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                (SELECT j.job_priority, j.run_after, j.job_id, 'scan'
                   FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND j.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                    AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                    AND j.job_priority OPERATOR(pg_catalog.<) LEAST(v_bound, COALESCE(v_hp, v_bound))
                  ORDER BY j.job_queue, j.tenant_id, j.job_priority DESC, j.run_after, j.job_id
                  LIMIT 1)
                UNION ALL
                SELECT NULL, NULL, NULL, 'none') AS c   -- (a row even when there is no job)
         ORDER BY c.p DESC NULLS LAST, c.r, c.id
         LIMIT 1
        -- </priority-probe>
        ;
        IF v_bound OPERATOR(pg_catalog.=) 2147483648 THEN
            p_first := ROW(p_tenant_id, v_priority, v_from_at, v_from_id)::broker._claim_position;
        END IF;
        v_levels := v_levels OPERATOR(pg_catalog.+) 1;
        -- (at most 16 levels a claim: a tenant whose levels give nothing now, say each holds one
        -- job of a key this claim already took one of, costs a claim no more than that)
        EXIT WHEN v_priority IS NULL OR v_left OPERATOR(pg_catalog.<=) 0 OR v_levels OPERATOR(pg_catalog.>) 16;
        IF v_from_at OPERATOR(pg_catalog.>) p_now THEN
            -- the level's earliest job is for later, and so is all of it: the level below
            v_bound := v_priority;
            CONTINUE;
        END IF;

        -- the level in windows: the jobs made ready since the hint before where it starts (new),
        -- then, at the hint's level or below it, the level's jobs from where they start
        v_windows := 0;
        v_from_id := v_from_id OPERATOR(pg_catalog.-) 1;   -- (a range starts after (v_from_at, v_from_id))
        LOOP
            v_windows := v_windows OPERATOR(pg_catalog.+) 1;
            v_window := v_left OPERATOR(pg_catalog.+) 16;
            -- (the window, its tids and whether a key is among them in one statement; an aggregate
            -- over a subquery takes its rows in the order the subquery gives them)
            IF v_src OPERATOR(pg_catalog.=) 'new' THEN
                SELECT COALESCE(pg_catalog.array_agg(w.cand), '{}'), pg_catalog.array_agg(w.row_tid), pg_catalog.bool_or(w.keyed)
                  INTO v_cands, v_tids, v_keyed
                  FROM (
                    -- <claim-new> the level's jobs made ready since the hint, before where it starts
                    SELECT ROW(r.job_id, r.concurrency_key, r.run_after, r.ctid)::broker._claim_candidate AS cand,
                           r.ctid AS row_tid, r.concurrency_key IS NOT NULL AS keyed
                      FROM broker.broker_jobs AS r
                     WHERE r.job_queue OPERATOR(pg_catalog.=) p_job_queue
                       AND broker._claimable_by_xid(r.complete_status, r.pending_deps, r.parked)
                       AND r.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                       AND (r.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR r.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))
                       AND r.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                       AND r.job_priority OPERATOR(pg_catalog.=) v_priority
                       AND (v_priority OPERATOR(pg_catalog.>) v_hp OR (r.run_after, r.job_id) OPERATOR(pg_catalog.<) (v_hr, v_hid))
                       AND r.run_after OPERATOR(pg_catalog.<=) p_now
                     ORDER BY r.run_after, r.job_id
                     LIMIT v_window
                    -- </claim-new>
                    ) AS w;
            ELSE
                SELECT COALESCE(pg_catalog.array_agg(w.cand), '{}'), pg_catalog.array_agg(w.row_tid), pg_catalog.bool_or(w.keyed)
                  INTO v_cands, v_tids, v_keyed
                  FROM (
                    -- <claim-range> a window of the level's jobs from where they start, not locked
                    SELECT ROW(r.job_id, r.concurrency_key, r.run_after, r.ctid)::broker._claim_candidate AS cand,
                           r.ctid AS row_tid, r.concurrency_key IS NOT NULL AS keyed
                      FROM broker.broker_jobs AS r
                     WHERE r.job_queue OPERATOR(pg_catalog.=) p_job_queue
                       AND r.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
                       AND broker._claimable(r.complete_status, r.pending_deps, r.parked)
                       AND r.job_priority OPERATOR(pg_catalog.=) v_priority
                       AND (r.run_after, r.job_id) OPERATOR(pg_catalog.>) (v_from_at, v_from_id)
                       AND r.run_after OPERATOR(pg_catalog.<=) p_now
                     ORDER BY r.job_queue, r.tenant_id, r.job_priority DESC, r.run_after, r.job_id
                     LIMIT v_window
                    -- </claim-range>
                    ) AS w;
            END IF;
            IF pg_catalog.cardinality(v_cands) OPERATOR(pg_catalog.>) 0 THEN
                -- what the keys' limits let this claim take (jobs without a key pass as they are)
                IF v_keyed THEN
                    SELECT a.p_keys, a.p_ids INTO v_admit
                      FROM broker._admit_keyed(p_tenant_id, v_cands, p_keys, p_now, v_left) AS a;
                    p_keys := v_admit.p_keys;
                    v_tids := ARRAY(SELECT c.row_tid FROM pg_catalog.unnest(v_cands) AS c
                                     WHERE c.job_id OPERATOR(pg_catalog.=) ANY (v_admit.p_ids));
                END IF;
                v_got := ARRAY(
                    -- <claim-lock> those locked, skipping rows another transaction holds: the row
                    -- versions the window read, fetched by their tids (no index descent); one updated
                    -- since is not found, or, updated after this statement's snapshot, rechecked as
                    -- its latest version (the ids as an array, not a join: a join's generic plan can
                    -- be a hash join over the table)
                    SELECT r.job_id
                      FROM broker.broker_jobs AS r
                     WHERE r.ctid OPERATOR(pg_catalog.=) ANY (v_tids)
                       AND broker._claimable_by_id(r.complete_status, r.pending_deps, r.parked)
                     ORDER BY r.job_priority DESC, r.run_after, r.job_id
                     LIMIT v_left
                       FOR NO KEY UPDATE SKIP LOCKED
                    -- </claim-lock>
                    );
                p_ids := p_ids OPERATOR(pg_catalog.||) v_got;
                v_left := v_left OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_got);
            END IF;
            EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
            IF v_src OPERATOR(pg_catalog.=) 'new' THEN
                EXIT WHEN v_priority OPERATOR(pg_catalog.<>) v_hp;
                -- then the hint's level from where it starts
                v_src := 'from';
                v_from_at := v_hr;
                v_from_id := v_hid OPERATOR(pg_catalog.-) 1;
                CONTINUE;
            END IF;
            -- a window not full: the level has no more; at most 4 windows a level
            EXIT WHEN pg_catalog.cardinality(v_cands) OPERATOR(pg_catalog.<) v_window OR v_windows OPERATOR(pg_catalog.>=) 4;
            v_last := v_cands[pg_catalog.cardinality(v_cands)];
            v_from_at := v_last.run_after;
            v_from_id := v_last.job_id;
        END LOOP;
        EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
        -- This level is drained (or what is left of it is locked elsewhere or held back by
        -- its keys' limits): continue below it.
        v_bound := v_priority;
    END LOOP;
    IF p_first IS NULL THEN
        p_first := ROW(p_tenant_id, NULL, NULL, NULL)::broker._claim_position;
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._claim_lane(integer, text, integer, timestamptz, xid8, xid8, xid8[], broker._claim_position, broker._claim_keys) IS
    'Internal: one tenant''s part of a claim: locks up to p_want of its claimable jobs of a queue in claim order; returns them and where its ready jobs start.';
-- source: sql/run/claim.sql
-- sql/run/claim.sql: claiming jobs (broker_get).
-- ---------------------------------------------------------------------------
-- Function: broker._claim_job_token(p_claim_token, p_job_id)
--   The lease token of job p_job_id in a claim whose claimer chose the token
--   p_claim_token (broker_get p_lease_token): an md5 of both, so that it is
--   unique per job and tells nothing of the claim's token.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claim_job_token(p_claim_token uuid, p_job_id bigint)
RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- (no SET clause, so that it is inlined into the claim's UPDATE, which computes it for each job it
-- claims; everything in it is qualified: sql/pgspot-no-search-path.txt)
AS $$
    SELECT pg_catalog.md5(p_claim_token::pg_catalog.text OPERATOR(pg_catalog.||) ':'
                          OPERATOR(pg_catalog.||) p_job_id::pg_catalog.text)::pg_catalog.uuid
$$;
COMMENT ON FUNCTION broker._claim_job_token(uuid, bigint) IS
    'Internal: a job''s lease token in a claim whose claimer chose its token (an md5 of the claim token and the job id).';

-- ---------------------------------------------------------------------------
-- Function: broker._claim(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size, p_lease_token, p_tenant_id)
--   The claim of broker_get (below, where the claim is told) and of
--   broker_claim_tasks (sql/tasks/claim.sql), with arguments its callers
--   checked. A claim for one tenant (p_tenant_id) serves that tenant alone
--   and writes no hint. Each row also carries the job's execute_str (a task's
--   arguments) and traceparent, which broker_claim_tasks returns without
--   reading the rows again, and its enqueued_by and run_as, with which it
--   checks that the enqueuer may still have the task run.
--   Calls: _paused_tenants, _paused_for, _unpark_due, _claimable, _claimable_by_xid, _claim_lane, _state, _save_claim_hint, _claim_job_token
--   Tables: reads broker_claim_hint, broker_tenant_weight; writes broker_jobs (and broker_claim_hint, through _save_claim_hint)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._claim(
    p_job_queue     integer,
    p_instance_id   bigint,
    p_lease_seconds integer,
    p_batch_size    integer,
    p_lease_token   uuid,
    p_tenant_id     text)
RETURNS TABLE (
    job_id           bigint,
    job_name         text,
    job_queue        integer,
    job_priority     integer,
    job_language     text,
    tenant_id        text,
    attempts         integer,
    max_attempts     integer,
    job_timeout      interval,
    lease_token      uuid,
    lease_expires_at timestamptz,
    autonomous       boolean,
    execute_str      text,
    traceparent      text,
    enqueued_by      name,
    run_as           name)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    v_lease    integer := p_lease_seconds;
    v_left     integer := p_batch_size;
    v_now      timestamptz := pg_catalog.statement_timestamp();
    v_paused   text[] := broker._paused_tenants(p_job_queue);  -- NULL: nothing paused in this queue
    -- the hint: every ready job of a tenant its snapshot saw is at or after the tenant's position
    v_hxmin    xid8;          -- its snapshot: ready_xid >= v_hxmax or in v_hxip (all >= v_hxmin):
    v_hxmax    xid8;          -- made ready since
    v_hxip     xid8[];
    v_hint     broker._claim_position[];
    v_snap     pg_snapshot := CASE WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NULL
                                   THEN pg_catalog.pg_current_snapshot() END;  -- for a new hint
    v_tenants  text[];
    v_weights  integer[];
    v_done     boolean[];     -- a tenant that gave fewer than its share has no more now
    v_first    broker._claim_position[] := '{}';
    v_keys     broker._claim_keys := ROW('{}', 0);   -- what it did under the keys' limits
    v_round_ids bigint[];
    v_got      bigint[];
    v_share    integer[];
    v_wsum     bigint;
    v_point    bigint;
    v_turn     bigint;
    v_step     double precision;
    v_extra    integer;
    v_acc      bigint;
    v_round    integer := 0;
    v_lane     record;
    v_pos      broker._claim_position;   -- a tenant's position in the hint
    i          integer;
    k          integer;
BEGIN
    IF v_paused IS NOT NULL AND pg_catalog.array_position(v_paused, NULL) IS NOT NULL THEN
        RETURN;  -- paused for every tenant (broker_pause_queue)
    END IF;

    SELECT pg_catalog.pg_snapshot_xmin(h.snapshot), pg_catalog.pg_snapshot_xmax(h.snapshot),
           ARRAY(SELECT pg_catalog.pg_snapshot_xip(h.snapshot)), h.positions
      INTO v_hxmin, v_hxmax, v_hxip, v_hint
      FROM broker.broker_claim_hint AS h
     WHERE h.job_queue OPERATOR(pg_catalog.=) p_job_queue
       AND h.started_at OPERATOR(pg_catalog.=) pg_catalog.pg_postmaster_start_time()
       AND pg_catalog.pg_snapshot_xmax(h.snapshot)
           OPERATOR(pg_catalog.<=) pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot());
    -- (two IFs: without a hint, the count is not even started)
    IF v_hxmin IS NOT NULL THEN
        IF (SELECT pg_catalog.count(*) FROM (SELECT FROM broker.broker_jobs AS j
             WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
               AND broker._claimable_by_xid(j.complete_status, j.pending_deps, j.parked)
               AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
             LIMIT 100) AS x) OPERATOR(pg_catalog.>=) 100 THEN
            -- 100 or more made ready since the hint (a bulk enqueue): reading them all at every
            -- claim would cost more than the hint saves; this claim reads from the start of the
            -- index and writes a new hint
            v_hxmin := NULL;
            v_hxmax := NULL;
            v_hint := NULL;
        END IF;
    END IF;

    -- jobs parked until now, or until a token of their key now due, are claimable again (after
    -- the snapshot above: they are made ready by this transaction, which it does not see)
    IF EXISTS (SELECT FROM broker.broker_jobs AS j
                WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                  AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                  AND j.run_after OPERATOR(pg_catalog.<=) v_now)
       OR EXISTS (SELECT FROM broker.broker_key_limit AS l WHERE l.wake_at OPERATOR(pg_catalog.<=) v_now) THEN
        PERFORM broker._unpark_due(p_job_queue);
    END IF;

    IF v_hxmin IS NOT NULL THEN
        -- the hint's tenants, and those of the jobs made ready since (fewer than 100: above)
        v_tenants := ARRAY(
            SELECT DISTINCT t.tenant_id FROM (
                SELECT x.tenant_id FROM pg_catalog.unnest(v_hint) AS x WHERE x.job_id IS NOT NULL
                UNION ALL
                SELECT j.tenant_id FROM broker.broker_jobs AS j
                 WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                   AND broker._claimable_by_xid(j.complete_status, j.pending_deps, j.parked)
                   AND j.ready_xid OPERATOR(pg_catalog.>=) v_hxmin
                   AND (j.ready_xid OPERATOR(pg_catalog.>=) v_hxmax OR j.ready_xid OPERATOR(pg_catalog.=) ANY (v_hxip))) AS t
             ORDER BY 1);
    ELSIF p_tenant_id IS NOT NULL THEN
        v_tenants := ARRAY[p_tenant_id];
    ELSE
        -- the tenants of the claim index in this queue: one descent each
        v_tenants := ARRAY(
            -- <claim-tenants>
            WITH RECURSIVE t (tenant) AS (
                (SELECT j.tenant_id FROM broker.broker_jobs AS j
                  WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                    AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                  ORDER BY j.job_queue, j.tenant_id LIMIT 1)
                UNION ALL
                SELECT (SELECT j.tenant_id FROM broker.broker_jobs AS j
                         WHERE j.job_queue OPERATOR(pg_catalog.=) p_job_queue
                           AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                           AND j.tenant_id OPERATOR(pg_catalog.>) t.tenant
                         ORDER BY j.job_queue, j.tenant_id LIMIT 1)
                  FROM t WHERE t.tenant IS NOT NULL)
            SELECT t.tenant FROM t WHERE t.tenant IS NOT NULL
            -- </claim-tenants>
            );
    END IF;
    IF p_tenant_id IS NOT NULL AND v_hxmin IS NOT NULL THEN
        -- a claim for one tenant (broker_claim_tasks) serves that tenant alone
        v_tenants := ARRAY(SELECT t FROM pg_catalog.unnest(v_tenants) AS t WHERE t OPERATOR(pg_catalog.=) p_tenant_id);
    END IF;
    k := COALESCE(pg_catalog.cardinality(v_tenants), 0);
    IF k OPERATOR(pg_catalog.=) 0 THEN
        v_first := '{}';
    ELSE
        IF k OPERATOR(pg_catalog.=) 1 THEN
            -- one tenant: the whole claim is its (no weight, no point to share from)
            v_weights := ARRAY[1];
            v_done := ARRAY[broker._paused_for(v_paused, v_tenants[1])];
            v_point := 0;
        ELSE
            v_weights := ARRAY(SELECT COALESCE(w.weight, 1) FROM pg_catalog.unnest(v_tenants) WITH ORDINALITY AS t(tenant, o)
                                 LEFT JOIN broker.broker_tenant_weight AS w ON w.tenant_id OPERATOR(pg_catalog.=) t.tenant
                                ORDER BY t.o);
            -- paused tenants take no share (their lanes are only probed, for the hint)
            v_done := ARRAY(SELECT broker._paused_for(v_paused, t.tenant)
                              FROM pg_catalog.unnest(v_tenants) WITH ORDINALITY AS t(tenant, o) ORDER BY t.o);
            -- where the remainder of each round's shares starts: moves from claim to claim
            -- (and from claim to claim of one transaction: its turn)
            v_turn := COALESCE(NULLIF(pg_catalog.current_setting('broker.claim_turn', true), '')::bigint, 0) OPERATOR(pg_catalog.+) 1;
            PERFORM pg_catalog.set_config('broker.claim_turn', v_turn::text, true);
            v_point := ((pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint OPERATOR(pg_catalog.+) v_turn)
                        OPERATOR(pg_catalog.*) 2654435761) OPERATOR(pg_catalog.%) 4294967296;
        END IF;
        LOOP
            v_round := v_round OPERATOR(pg_catalog.+) 1;
            -- this round's shares: floor(left * weight / sum of weights), the remainder by weight
            -- at evenly spaced points from v_point (systematic sampling)
            v_wsum := 0;
            FOR i IN 1 .. k LOOP
                IF NOT v_done[i] THEN v_wsum := v_wsum OPERATOR(pg_catalog.+) v_weights[i]; END IF;
            END LOOP;
            v_share := pg_catalog.array_fill(0, ARRAY[k]);
            v_round_ids := '{}';
            IF v_wsum OPERATOR(pg_catalog.>) 0 THEN
                v_extra := v_left;
                FOR i IN 1 .. k LOOP
                    IF NOT v_done[i] THEN
                        v_share[i] := (v_left::bigint OPERATOR(pg_catalog.*) v_weights[i] OPERATOR(pg_catalog./) v_wsum)::integer;
                        v_extra := v_extra OPERATOR(pg_catalog.-) v_share[i];
                    END IF;
                END LOOP;
                v_step := v_wsum::double precision OPERATOR(pg_catalog./) GREATEST(v_extra, 1);
                FOR e IN 0 .. v_extra OPERATOR(pg_catalog.-) 1 LOOP
                    v_acc := ((v_point OPERATOR(pg_catalog.%) v_wsum)
                              OPERATOR(pg_catalog.+) pg_catalog.floor(e OPERATOR(pg_catalog.*) v_step)::bigint)
                             OPERATOR(pg_catalog.%) v_wsum;
                    FOR i IN 1 .. k LOOP
                        CONTINUE WHEN v_done[i];
                        IF v_acc OPERATOR(pg_catalog.<) v_weights[i] THEN
                            v_share[i] := v_share[i] OPERATOR(pg_catalog.+) 1;
                            EXIT;
                        END IF;
                        v_acc := v_acc OPERATOR(pg_catalog.-) v_weights[i];
                    END LOOP;
                END LOOP;
            END IF;
            FOR i IN 1 .. k LOOP
                -- the first round probes every tenant (the hint needs each one's position)
                CONTINUE WHEN v_round OPERATOR(pg_catalog.>) 1 AND (v_done[i] OR v_share[i] OPERATOR(pg_catalog.=) 0);
                v_pos := NULL;
                IF v_hint IS NOT NULL THEN
                    v_pos := (SELECT x FROM pg_catalog.unnest(v_hint) AS x WHERE x.tenant_id OPERATOR(pg_catalog.=) v_tenants[i]);
                END IF;
                -- (a call, not a query over the function: no executor to start for it)
                v_lane := broker._claim_lane(p_job_queue, v_tenants[i], CASE WHEN v_done[i] THEN 0 ELSE v_share[i] END,
                                             v_now, v_hxmin, v_hxmax, v_hxip, v_pos, v_keys);
                v_keys := v_lane.p_keys;
                IF v_round OPERATOR(pg_catalog.=) 1 THEN
                    v_first := v_first OPERATOR(pg_catalog.||) v_lane.p_first;
                END IF;
                CONTINUE WHEN v_done[i];
                v_got := v_lane.p_ids;
                v_round_ids := v_round_ids OPERATOR(pg_catalog.||) v_got;
                v_left := v_left OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_got);
                IF pg_catalog.cardinality(v_got) OPERATOR(pg_catalog.<) v_share[i] THEN
                    v_done[i] := true;   -- no more of this tenant's jobs can be had now
                END IF;
            END LOOP;
            -- this round's jobs are claimed now: the next round's reads no longer see them as claimable
            IF pg_catalog.cardinality(v_round_ids) OPERATOR(pg_catalog.>) 0 THEN
                RETURN QUERY
                -- <claim-query> (tests_sql/run/claim_is_index_backed.sql EXPLAINs the text between these markers)
                -- (the ids as an array, not a join: a join's generic plan can be a hash join over the table)
                WITH claimed AS (
                    UPDATE broker.broker_jobs AS j
                       SET complete_status = broker._state('running'),
                           attempts = j.attempts OPERATOR(pg_catalog.+) 1,
                           started_at = v_now,
                           lease_token = CASE WHEN p_lease_token IS NULL THEN pg_catalog.gen_random_uuid()
                                              ELSE broker._claim_job_token(p_lease_token, j.job_id) END,
                           lease_instance_id = p_instance_id,
                           lease_expires_at = v_now OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_lease)
                     WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_round_ids)
                    RETURNING j.job_id, j.job_name, j.job_queue, j.job_priority, j.job_language, j.tenant_id,
                              j.attempts, j.max_attempts, j.job_timeout, j.lease_token, j.lease_expires_at, j.run_after, j.autonomous,
                              j.execute_str, j.traceparent, j.enqueued_by, j.run_as
                )
                SELECT c.job_id, c.job_name, c.job_queue, c.job_priority, c.job_language, c.tenant_id,
                       c.attempts, c.max_attempts, c.job_timeout, c.lease_token, c.lease_expires_at, c.autonomous,
                       c.execute_str, c.traceparent, c.enqueued_by, c.run_as
                  FROM claimed AS c
                 -- (tenant by tenant, each in its claim order: the order the lanes took them in)
                 ORDER BY pg_catalog.array_position(v_tenants, c.tenant_id), c.job_priority DESC, c.run_after, c.job_id
                -- </claim-query>
                ;
            END IF;
            EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0 OR NOT (false OPERATOR(pg_catalog.=) ANY (v_done)) OR v_round OPERATOR(pg_catalog.>=) 8;
        END LOOP;
    END IF;


    -- a new hint once the one used is 100 transactions old (or there was none, or too many
    -- jobs were made ready since), from the snapshot taken before this transaction had an id
    -- of its own (its later writes then have ids the snapshot does not see, so they count as
    -- made ready since) and each tenant's first probe, all made after that snapshot
    -- (not by a claim for one tenant: its hint would lack the other tenants' positions)
    IF v_snap IS NOT NULL AND p_tenant_id IS NULL
       AND (v_hxmax IS NULL OR pg_catalog.pg_snapshot_xmax(v_snap)::text::bigint
                               OPERATOR(pg_catalog.-) v_hxmax::text::bigint OPERATOR(pg_catalog.>) 100) THEN
        PERFORM broker._save_claim_hint(p_job_queue, v_snap,
                                        ARRAY(SELECT x FROM pg_catalog.unnest(v_first) AS x WHERE x.job_id IS NOT NULL));
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._claim(integer, bigint, integer, integer, uuid, text) IS
    'Internal: the claim of broker_get and broker_claim_tasks (fair share, lanes, the hint), for a queue, a lease (seconds, checked by the caller), a batch size, a claim token and optionally one tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_get(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size, p_lease_token)
--   Claims up to p_batch_size ready jobs of queue p_job_queue: pending, no
--   unfinished dependency (pending_deps = 0), run_after reached, not held
--   back by a limit on their concurrency key. Each claimed job becomes
--   running (1) with a lease of p_lease_seconds (default: setting
--   lease_seconds, else 60) and one more attempt. Rows locked by another
--   transaction are skipped. Each job's lease token is random, or, when the
--   claimer gives the claim a token of its own (p_lease_token, as hard to
--   guess as a random uuid), derived from it and the job id
--   (_claim_job_token): a claimer that may lose the claim's answer (its
--   connection dies while the claim commits) can then hand back the claim it
--   never saw (broker_release_claim), while no job's token tells the claim's
--   token or another job's (a claim holds several tenants' jobs). Returns
--   one row per claimed job, none when idle; an autonomous job (autonomous =
--   true) is run with broker_autonomous_begin/_end outside a transaction,
--   not broker_run. It does no other work (deferred dependency releases are
--   the runner's maintenance, broker_apply_deferred_releases): a claim's
--   cost is its own queue's, whatever any tenant left to release.
--
--   Fair share: the claim serves the tenants that have claimable jobs in the
--   queue in proportion to their weights (broker_tenant_weight, default 1):
--   each gets the share of the batch its weight gives (floor), and the
--   remainder goes by weight from a point that moves from claim to claim
--   (the snapshot's xmax), so that over claims every tenant gets its share
--   even of batches of one. A tenant with fewer jobs than its share leaves
--   the rest to the others. Priority orders a tenant's own jobs (then age);
--   it never puts one tenant ahead of another's share. With one tenant the
--   order is priority, then age. Jobs are returned tenant by tenant, each in
--   its claim order.
--   A paused queue (broker_pause_queue) claims nothing; a tenant's pause
--   leaves that tenant out (broker._paused_tenants, one lookup per claim).
--   Parked jobs are out of the claim index: jobs dated later (until due;
--   broker._unpark_due, run first, puts back those that are), and jobs over
--   a limit on their key (until a slot frees or a token is due). So a claim
--   costs the same however many jobs of any tenant are dated later, paused,
--   over a limit or waiting on dependencies, and jobs locked elsewhere cost
--   it at most a few windows (broker._claim_lane).
--   Each tenant's part is broker._claim_lane. Under a snapshot held
--   elsewhere (a long REPEATABLE READ transaction, pg_dump, a replication
--   slot, hot_standby_feedback) the index entries of claimed jobs cannot be
--   removed and sit before the ready ones; so a claim starts each tenant at
--   its position in the queue's hint (broker_claim_hint) and adds the jobs
--   made ready since. The tenants are those of the hint and those of the
--   jobs made ready since it; without a usable hint, those of the claim
--   index (one descent per tenant). A claim that has no transaction id yet
--   when it starts writes a new hint, from its snapshot then and each
--   tenant's first probe, once the hint is 100 transactions old, or 100 jobs
--   or more were made ready since, so that a hint spans few claimed jobs and
--   few new ones.
--   A claim names the active instance (broker_register_instance) when there
--   is one, and its lease is at most an hour: whoever claims jobs it will
--   not run (a stray or hostile session of the runner's login) holds them
--   visibly and for a bounded time.
-- Errors: 22023 queue < 1, lease < 1 second or > 3600 seconds, batch size
--   < 1; 55000 p_instance_id is not the active instance, or NULL while one
--   is active.
-- Example:
--   SELECT job_id, lease_token FROM broker.broker_get(1, p_instance_id => 7, p_lease_seconds => 60, p_batch_size => 10);
--   broker_get checks its arguments and the instance; broker._claim, which
--   broker_claim_tasks shares (sql/tasks/claim.sql), does the rest. A claim
--   for one tenant (p_tenant_id) serves that tenant alone and writes no hint.
--   Calls: _setting_int, _check_lease_seconds, _active_instance, _claim (_paused_tenants, _paused_for, _unpark_due, _claimable, _claimable_by_xid, _claim_lane, _state, _save_claim_hint, _claim_job_token)
--   Tables: reads broker_claim_hint, broker_tenant_weight; writes broker_jobs (and broker_claim_hint, through _save_claim_hint)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_get(
    p_job_queue     integer DEFAULT 1,
    p_instance_id   bigint  DEFAULT NULL,
    p_lease_seconds integer DEFAULT NULL,
    p_batch_size    integer DEFAULT 1,
    p_lease_token   uuid    DEFAULT NULL)
RETURNS TABLE (
    job_id           bigint,
    job_name         text,
    job_queue        integer,
    job_priority     integer,
    job_language     text,
    tenant_id        text,
    attempts         integer,
    max_attempts     integer,
    job_timeout      interval,
    lease_token      uuid,
    lease_expires_at timestamptz,
    autonomous       boolean)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
BEGIN
    IF p_job_queue IS NULL OR p_job_queue OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_job_queue must be >= 1, got %', COALESCE(p_job_queue::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._check_lease_seconds('broker_get', v_lease,
        'A lease only bounds how long a crashed claimer holds its jobs; a job that runs longer keeps it.');
    IF p_instance_id IS DISTINCT FROM broker._active_instance() THEN
        RAISE EXCEPTION 'broker_get: %', CASE WHEN p_instance_id IS NULL
                THEN 'claims name the active instance ' OPERATOR(pg_catalog.||) broker._active_instance()
                ELSE pg_catalog.format('instance %s is not the active instance', p_instance_id) END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Claim as the runner does: with the id broker_register_instance returned.';
    END IF;
    IF p_batch_size IS NULL OR p_batch_size OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_get: p_batch_size must be >= 1, got %', COALESCE(p_batch_size::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.job_id, c.job_name, c.job_queue, c.job_priority, c.job_language, c.tenant_id,
           c.attempts, c.max_attempts, c.job_timeout, c.lease_token, c.lease_expires_at, c.autonomous
      FROM broker._claim(p_job_queue, p_instance_id, v_lease, p_batch_size, p_lease_token, NULL) AS c;
END;
$$;
COMMENT ON FUNCTION broker.broker_get(integer, bigint, integer, integer, uuid) IS
    'Claims up to p_batch_size ready jobs of a queue, tenants served in proportion to their weights, each tenant''s by priority then age, with a lease; returns them with their lease_token (derived from p_lease_token, the claim''s token, when given). Skips blocked, parked and locked jobs.';
-- source: sql/run/claim_batches.sql
-- sql/run/claim_batches.sql: which claimed jobs may share a transaction (broker_claim_batches).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_claim_batches(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size, p_budget, p_alone, p_per_transaction, p_lease_token)
--   Claims as broker_get does (same arguments, same order, same errors;
--   p_lease_token, the claim's token, last) and
--   says which of the claimed jobs may share a transaction: the rule of
--   batching in one place. Consecutive jobs share a batch (batch_no) while
--   they have the tenant and the run_as role of the batch's first job, none
--   of them runs alone, none after the first has a timeout (broker_run_batch
--   runs one only as the first of a call), and the batch has fewer than
--   p_per_transaction jobs (default 50: each job's subtransaction may take a
--   subtransaction id, and PostgreSQL caches 64 per transaction). A job runs
--   alone (alone true, a batch of its own) when it is autonomous, marked
--   run_alone (it ran past a batch's budget), its timeout is shorter than
--   p_budget (the runner's batch budget; NULL: none), or p_alone is true
--   (a queue whose jobs each run in a transaction of their own). The runner
--   sends each batch to broker_run_batch as given; broker_run_batch still
--   stops at another tenant or role (its own guarantee). traceparent: the
--   enqueuer's trace context (broker_jobs.traceparent), the parent of the
--   runner's span of the attempt.
-- Errors: those of broker_get; 22023 p_per_transaction < 1, p_budget not
--   above 0.
-- Example:
--   SELECT job_id, batch_no, alone FROM broker.broker_claim_batches(1, 7, 60, 10, interval '200 ms');
--   Calls: broker_get
--   Tables: reads broker_jobs (run_as, run_alone, traceparent of the claimed jobs)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_claim_batches(
    p_job_queue       integer  DEFAULT 1,
    p_instance_id     bigint   DEFAULT NULL,
    p_lease_seconds   integer  DEFAULT NULL,
    p_batch_size      integer  DEFAULT 1,
    p_budget          interval DEFAULT NULL,
    p_alone           boolean  DEFAULT false,
    p_per_transaction integer  DEFAULT 50,
    p_lease_token     uuid     DEFAULT NULL)
RETURNS TABLE (
    job_id           bigint,
    job_name         text,
    job_queue        integer,
    job_priority     integer,
    job_language     text,
    tenant_id        text,
    attempts         integer,
    max_attempts     integer,
    job_timeout      interval,
    lease_token      uuid,
    lease_expires_at timestamptz,
    autonomous       boolean,
    alone            boolean,
    batch_no         integer,
    traceparent      text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r          record;
    v_batch    integer := 0;
    v_in_batch integer := 0;
    v_tenant   text;
    v_run_as   name;
    v_prev_alone boolean := false;
    v_job_run_as name;
    v_job_alone  boolean;
BEGIN
    IF p_per_transaction IS NULL OR p_per_transaction OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_claim_batches: p_per_transaction must be >= 1, got %', COALESCE(p_per_transaction::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_budget OPERATOR(pg_catalog.<=) interval '0' THEN
        RAISE EXCEPTION 'broker_claim_batches: p_budget must be above 0 (or NULL), got %', p_budget
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- (the claimed versions are read by a statement of their own: a join in the claim's statement
    -- would read that statement's snapshot, which misses a job made ready after it began)
    FOR r IN SELECT * FROM broker.broker_get(p_job_queue, p_instance_id, p_lease_seconds, p_batch_size,
                                                     p_lease_token) LOOP
        SELECT j.run_as, j.run_alone, j.traceparent INTO v_job_run_as, v_job_alone, traceparent
          FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) r.job_id;
        job_id := r.job_id; job_name := r.job_name; job_queue := r.job_queue; job_priority := r.job_priority;
        job_language := r.job_language; tenant_id := r.tenant_id; attempts := r.attempts;
        max_attempts := r.max_attempts; job_timeout := r.job_timeout; lease_token := r.lease_token;
        lease_expires_at := r.lease_expires_at; autonomous := r.autonomous;
        alone := COALESCE(p_alone, false) OR r.autonomous OR v_job_alone
                 OR COALESCE(r.job_timeout OPERATOR(pg_catalog.<) p_budget, false);
        IF v_batch OPERATOR(pg_catalog.=) 0 OR alone OR v_prev_alone
           OR r.tenant_id OPERATOR(pg_catalog.<>) v_tenant OR v_job_run_as OPERATOR(pg_catalog.<>) v_run_as
           OR r.job_timeout IS NOT NULL OR v_in_batch OPERATOR(pg_catalog.>=) p_per_transaction THEN
            v_batch := v_batch OPERATOR(pg_catalog.+) 1;
            v_in_batch := 0;
            v_tenant := r.tenant_id;
            v_run_as := v_job_run_as;
        END IF;
        v_in_batch := v_in_batch OPERATOR(pg_catalog.+) 1;
        v_prev_alone := alone;
        batch_no := v_batch;
        RETURN NEXT;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_claim_batches(integer, bigint, integer, integer, interval, boolean, integer, uuid) IS
    'Claims as broker_get does and numbers the claimed jobs by the transaction they may share (batch_no; alone: a transaction of its own).';
-- source: sql/run/run.sql
-- sql/run/run.sql: running one claimed job (broker_run).
-- ---------------------------------------------------------------------------
-- Function: broker._run_begin(p_job_id, p_lease_token)
--   Locks a claimed job for execution (FOR NO KEY UPDATE, held until the
--   caller's transaction ends: this lock is what marks the job as executing,
--   and broker_recover_stale_jobs never takes a locked job) and returns it.
-- Errors: P0002 unknown job; 55000 job not running, or lease token mismatch.
--   Calls: broker_get
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._run_begin(p_job_id bigint, p_lease_token uuid)
RETURNS broker.broker_jobs
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job broker.broker_jobs;
BEGIN
    SELECT * INTO v_job FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_run: job % does not exist', p_job_id
            USING ERRCODE = 'no_data_found';
    END IF;
    IF v_job.complete_status OPERATOR(pg_catalog.<>) broker._state('running') THEN
        RAISE EXCEPTION 'broker_run: job % is %, not running', p_job_id,
            CASE v_job.complete_status WHEN 0 THEN 'pending' WHEN 2 THEN 'completed'
                                       WHEN 3 THEN 'failed' ELSE 'cancelled' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Claim jobs with broker.broker_get() and run the ones it returns.';
    END IF;
    IF p_lease_token IS NOT NULL AND v_job.lease_token OPERATOR(pg_catalog.<>) p_lease_token THEN
        RAISE EXCEPTION 'broker_run: the lease on job % is no longer yours', p_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'The lease expired, the job was recovered and claimed again.';
    END IF;
    RETURN v_job;
END;
$$;
COMMENT ON FUNCTION broker._run_begin(bigint, uuid) IS
    'Internal: lock a running job for execution and check its lease token.';

-- ---------------------------------------------------------------------------
-- Function: broker._grant_hint(p_role, p_message)
--   For a permission error raised while a job ran as p_role: the GRANT that
--   would let it through (for tables and sequences: the privileges the role
--   lacks there), or NULL when the message names no object.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._grant_hint(p_role name, p_message text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_m    text[] := pg_catalog.regexp_match(p_message, '^permission denied for (table|sequence|view|materialized view|schema|function|procedure) (.+)$');
    v_kind text := v_m[1];
    v_obj  text := v_m[2];
    v_privs text;
BEGIN
    IF v_m IS NULL THEN
        RETURN NULL;
    ELSIF v_kind OPERATOR(pg_catalog.=) 'schema' THEN
        RETURN pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %I', v_obj, p_role);
    ELSIF v_kind OPERATOR(pg_catalog.=) ANY (ARRAY['function', 'procedure']) THEN
        RETURN pg_catalog.format('GRANT EXECUTE ON %s %s TO %I', pg_catalog.upper(v_kind), v_obj, p_role);
    END IF;
    -- the message names the relation without its schema: list what the role lacks on each match
    SELECT pg_catalog.string_agg(pg_catalog.format('GRANT %s ON %s %s TO %I',
               (SELECT pg_catalog.string_agg(x.p, ', ')
                  FROM pg_catalog.unnest(CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN ARRAY['USAGE', 'SELECT', 'UPDATE']
                                              ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE'] END) AS x(p)
                 WHERE NOT pg_catalog.has_table_privilege(p_role, c.oid, x.p)),
               CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
               c.oid::regclass, p_role), '; ')
      INTO v_privs
      FROM pg_catalog.pg_class AS c
     WHERE c.relname OPERATOR(pg_catalog.=) v_obj;
    RETURN v_privs;
END;
$$;
COMMENT ON FUNCTION broker._grant_hint(name, text) IS
    'Internal: for a "permission denied for <object>" error of a job, the GRANT the run_as role needs.';

-- ---------------------------------------------------------------------------
-- Function: broker._job_error(p_run_as, p_exec, p_sqlstate, p_message)
--   The message stored for a failed attempt of a job of role p_run_as whose
--   executor is p_exec: p_message (capped by _error_text), and for a
--   permission error (42501) the GRANT the role needs; for SQL that commits
--   or cannot run in a transaction (2D000, 25001) the opt-in that runs it
--   (autonomous jobs). With p_exec NULL (the role has no executor) the
--   message says how to create one.
--   Calls: _error_text, broker_create_executor, _grant_hint
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._job_error(p_run_as name, p_exec regprocedure, p_sqlstate text, p_message text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_hint text;
BEGIN
    p_message := broker._error_text(p_message);  -- returned to the caller as stored
    IF p_exec IS NULL THEN
        RETURN pg_catalog.format('role %I has no job executor; run SELECT broker.broker_create_executor(%L) as that role or a superuser',
                                 p_run_as, p_run_as);
    ELSIF p_sqlstate OPERATOR(pg_catalog.=) ANY (ARRAY['2D000', '25001']) THEN
        -- (what the enqueue-time check could not see: a procedure's COMMIT, a statement in EXECUTE)
        RETURN p_message OPERATOR(pg_catalog.||) ' (a job runs inside a transaction: SQL that commits, or that cannot run in one, '
                                                 'runs as an autonomous job: p_autonomous => true, docs/jobs.md)';
    ELSIF p_sqlstate OPERATOR(pg_catalog.<>) '42501' THEN
        RETURN p_message;
    END IF;
    v_hint := CASE WHEN p_message OPERATOR(pg_catalog.~) '^permission denied for (function run_job|schema broker_exec_)'
                   THEN pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', p_exec, CURRENT_USER)
                   ELSE broker._grant_hint(p_run_as, p_message) END;
    RETURN p_message OPERATOR(pg_catalog.||) pg_catalog.format(' (the job runs as role %I', p_run_as)
        OPERATOR(pg_catalog.||) COALESCE('; needed: ' OPERATOR(pg_catalog.||) v_hint, '') OPERATOR(pg_catalog.||) ')';
END;
$$;
COMMENT ON FUNCTION broker._job_error(name, regprocedure, text, text) IS
    'Internal: the stored message of a failed job attempt (for a permission error, with the GRANT its run_as role needs; for SQL that commits, the opt-in).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_run(p_job_id, p_lease_token)
--   Executes a claimed (running) job inside the caller's transaction:
--   * the job's SQL runs in a subtransaction, inside the SECURITY DEFINER
--     executor owned by its run_as role (see executors.sql), with its own
--     search_path (pg_temp last) and broker.tenant_id set to the job's
--     tenant; sql jobs via EXECUTE, plpgsql jobs as a DO block;
--   * the job can change session state (SET, LISTEN, temporary objects,
--     session advisory locks) that outlives its transaction: the run undoes
--     what acts on the connection before it returns (guarded settings,
--     session advisory locks, LISTEN, prepared statements: run_guard.sql),
--     but whoever runs jobs must still reset the session after each
--     transaction that ran jobs (DISCARD ALL; the runner does all of it but
--     DISCARD PLANS), and must not run jobs on the session holding the
--     instance lock;
--   * a job that leaves code for the caller's COMMIT (a WITH HOLD cursor, a
--     deferrable constraint trigger that runs code on a table it wrote: see
--     _commit_time_code) is refused: 42501, its effects rolled back;
--   * success: the job's effects and its completion (status 2) commit
--     together, and its dependents are released;
--   * failure (any error, including a statement_timeout cancel): the job's
--     effects roll back, SQLSTATE and message are kept (a permission error
--     gets the GRANT it needs appended), and the job is retried after a
--     backoff or, with no attempts left, failed with its dependents cancelled;
--   * not run when its enqueuer may no longer have it run (role dropped,
--     tenant or run_as right revoked since, see _authority_lost): failed at
--     once (3, whatever attempts are left) with 42501 and the reason, and its
--     dependents cancelled: losing a right is no passing fault, and a retry
--     would run it as soon as any role of that name had the right again;
--   * not run when a cancel request for it came before the call
--     (broker_cancel_job on a claimed job that waited): cancelled (4) with
--     the request's reason, 57014, its dependents cancelled.
--   Returns the outcome. Without p_lease_token any running job may be run.
--   Per-job timeout: SET LOCAL statement_timeout to job_timeout before the
--   call (the runner does this); a timeout inside the job fails the attempt.
-- Errors: P0002 unknown job; 55000 job not running or lease lost.
-- Example:
--   SELECT r.* FROM broker.broker_get(1, p_instance_id => 7) AS g,
--                 LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;   -- then COMMIT
--   Calls: _run_begin, _authority_lost, _cancel_requested, _executor, _run_guarded, _run_jobs_compat, _executor_call, _refusal, _record_attempts, _complete_job, _fail_job, _job_error, _cancel_running, _fail_attempt
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_run(p_job_id bigint, p_lease_token uuid DEFAULT NULL)
RETURNS TABLE (
    job_id          bigint,
    complete_status smallint,
    attempts        integer,
    error_sqlstate  text,
    error_message   text,
    duration        interval)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_caller  text := pg_catalog.current_setting('broker.tenant_id', true);
    v_job     broker.broker_jobs;
    v_exec    regprocedure;
    v_run     record;
    v_status  smallint;
    v_message text;
    v_denied  text;    -- why the job's enqueuer may no longer have it run (_authority_lost)
    v_guard   record;  -- _run_guarded's outcome
BEGIN
    v_job := broker._run_begin(p_job_id, p_lease_token);
    v_denied := broker._authority_lost(v_job.enqueued_by, v_job.tenant_id, v_job.run_as, 'enqueuer');
    v_exec := CASE WHEN v_denied IS NULL THEN broker._executor(v_job.run_as) END;
    IF v_denied IS NULL AND broker._cancel_requested(p_job_id) IS NOT NULL THEN
        -- not run: its cancel request came first; it ends cancelled below (_cancel_running)
        SELECT '57014'::text AS error_sqlstate,
               pg_catalog.format('broker_run: job %s was cancelled before it started', p_job_id) AS error_message,
               interval '0' AS duration INTO v_run;
    ELSIF v_denied IS NOT NULL THEN
        -- not run: its enqueuer may no longer have it run (it fails for good below)
        SELECT '42501'::text AS error_sqlstate, v_denied AS error_message, interval '0' AS duration INTO v_run;
    ELSIF v_exec IS NULL THEN
        SELECT '42501'::text AS error_sqlstate, NULL::text AS error_message, interval '0' AS duration INTO v_run;
    ELSE
        -- as broker_run_batch runs a batch with an executor that has only run_job (one job: one call
        -- of run_job, fewer steps than a batch), guarded as it is (run_guard.sql)
        v_guard := broker._run_guarded(
            pg_catalog.format('SELECT pg_catalog.array_agg(r.s), pg_catalog.array_agg(r.m), pg_catalog.array_agg(r.d) '
                              'FROM broker._run_jobs_compat(%L, $1, $2, $3, $4) AS r(s, m, d)',
                              broker._executor_call(v_exec)),
            ARRAY[v_job.execute_str], ARRAY[v_job.job_language], ARRAY[v_job.job_search_path], v_job.tenant_id);
        SELECT COALESCE(v_guard.states[1], CASE WHEN v_guard.refused IS NOT NULL THEN '42501' END) AS error_sqlstate,
               COALESCE(v_guard.messages[1], broker._refusal(v_guard.refused, v_job.run_as)) AS error_message,
               COALESCE(v_guard.durations[1], interval '0') AS duration
          INTO v_run;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_caller, ''), true);
    END IF;
    IF v_run.error_sqlstate IS NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'completed', NULL, NULL, ARRAY[v_run.error_message]);
        PERFORM broker._complete_job(p_job_id);
        v_status := broker._state('completed');
    ELSIF v_denied IS NOT NULL THEN
        v_message := v_denied;
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY[v_run.error_sqlstate], ARRAY[v_message]);
        v_status := broker._fail_job(p_job_id, v_run.error_sqlstate, v_message);
    ELSE
        v_message := broker._job_error(v_job.run_as, v_exec, v_run.error_sqlstate, v_run.error_message);
        -- cancelled by its cancel request (57014 with a request: broker_cancel_job), else failed
        v_status := COALESCE(broker._cancel_running(p_job_id, v_run.error_sqlstate, v_message),
                             broker._fail_attempt(p_job_id, v_run.error_sqlstate, v_message));
    END IF;
    RETURN QUERY SELECT p_job_id, v_status, v_job.attempts, v_run.error_sqlstate, v_message, v_run.duration;
END;
$$;
COMMENT ON FUNCTION broker.broker_run(bigint, uuid) IS
    'Executes a claimed job as its run_as role; its effects and its completion commit in the caller''s transaction, a failure rolls its effects back and retries or fails it. Returns the outcome.';
-- source: sql/run/run_batch.sql
-- sql/run/run_batch.sql: running claimed jobs in one transaction (broker_run_batch).
-- ---------------------------------------------------------------------------
-- Function: broker._lock_batch(p_job_ids, p_lease_tokens)
--   For broker_run_batch: locks the jobs p_job_ids with one statement, in
--   job_id order, in the caller's transaction (held until it ends: what marks
--   them as executing, see _run_begin), and returns, in the order given, each
--   id with its token and what broker_run_batch needs of the job (found NULL:
--   no such job). Generic plans: custom ones were made again at every call.
--   Calls: none
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._lock_batch(p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (id bigint, token uuid, found bigint, status smallint, lease_token uuid, run_as name, enqueued_by name,
               tenant_id text, job_timeout interval, attempts integer, execute_str text, job_language text, job_search_path text,
               run_alone boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    PERFORM FROM broker.broker_jobs AS j
      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
      ORDER BY j.job_id
        FOR NO KEY UPDATE;
    RETURN QUERY
        SELECT u.id, u.token, j.job_id, j.complete_status, j.lease_token, j.run_as, j.enqueued_by, j.tenant_id,
               j.job_timeout, j.attempts, j.execute_str, j.job_language, j.job_search_path, j.run_alone
          FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) WITH ORDINALITY AS u(id, token, ord)
          LEFT JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) u.id
         ORDER BY u.ord;
END;
$$;
COMMENT ON FUNCTION broker._lock_batch(bigint[], uuid[]) IS
    'Internal: lock the jobs of a batch (job_id order) and return them in the order given (broker_run_batch).';

-- ---------------------------------------------------------------------------
-- Type: broker._batch_row
--   One row of broker_run_batch's result while it is being built: a job it
--   took up, its outcome so far (status completed until the run says
--   otherwise) and its error.
-- ---------------------------------------------------------------------------
-- broker._batch_row: created by the base version (changes: ALTER TYPE in the manifest)
COMMENT ON TYPE broker._batch_row IS 'Internal: a row of broker_run_batch''s result while it is built (job, status, attempts, error).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_run_batch(p_job_ids, p_lease_tokens)
--   Runs several claimed jobs in the caller's transaction, one after the
--   other, each exactly as broker_run runs it: its SQL in a subtransaction of
--   its own inside its run_as role's executor, its effects and its completion
--   committing together with the caller's transaction, a failing job rolled
--   back alone and retried or failed. One round trip and one commit for many
--   short jobs.
--   Jobs of one transaction share the session, and a job can change session
--   state that outlives it (SET, temporary objects, SET CONSTRAINTS), so a
--   batch never mixes what must stay apart: it runs the jobs in order while
--   they have the run_as role and the tenant of the first one and no
--   timeout, and stops before the first job that differs (the caller resets
--   the session and passes the rest again). A job with a timeout only runs as
--   the first of a call, with statement_timeout set by the caller as for
--   broker_run. p_lease_tokens, when given, pairs with p_job_ids.
--   Returns one row per job it took up, in order: broker_run's outcome, or,
--   when the job could not be run (lease lost: 55000, unknown job: P0002),
--   complete_status NULL with that SQLSTATE and message; a completed job's
--   rows_affected (its last statement's row count, as broker_job_attempts
--   keeps it; NULL otherwise). Jobs after the stop get no row. A job whose enqueuer may no longer have it run (see
--   _authority_lost: role dropped, tenant or run_as right revoked) is not
--   run: it fails at once with 42501 and the reason, as in broker_run. Nor
--   is a job with a cancel request made before the call (broker_cancel_job
--   on a claimed job that waited): it ends cancelled, 57014, as a job whose
--   run its request cancelled. A job's own errors never abort the batch;
--   an error in the bookkeeping (e.g. a deadlock) aborts the caller's
--   transaction as it does for broker_run, and lease recovery takes the
--   jobs up again.
--   p_budget (a batch budget, say 200 ms): the caller runs the call under
--   statement_timeout = p_budget, set before this statement (a timeout set
--   inside a running statement is not armed), so that no job waits for the
--   commit of its transaction much beyond it. Then: no job starts once half
--   of the budget passed (broker.batch_deadline, read by run_jobs; the jobs
--   not started get no row); the job still running when the timeout fires
--   gets 57014 in its subtransaction (run_jobs names query_canceled: WHEN
--   OTHERS does not catch it), is rolled back alone, marked run_alone and
--   returned still claimed, attempt not counted, with error_sqlstate PB002:
--   the caller runs it in a transaction of its own; the others commit. A
--   job marked run_alone, or with a timeout shorter than p_budget, is never
--   run under a budget: its row says PB002 at once. A job with a longer
--   timeout may run under a budget (the budget ends it first). Should the
--   timeout fire outside every job (between two, or in the bookkeeping), no
--   job fails and none loses an attempt: the jobs of the executor's call get
--   no row (the caller passes them again), the bookkeeping is done again.
--   A job that catches the cancel itself only delays the jobs of its own
--   batch (one run_as role and tenant), up to the first job after it.
--   Keep batches at most 50 jobs: each job's subtransaction takes a
--   subtransaction id, and PostgreSQL caches 64 per transaction (the batches
--   broker_claim_batches numbers are).
--   Cost: the jobs are locked with one statement (in job_id order, what marks
--   them as executing, see _run_begin), run with one call of their role's
--   executor (run_jobs: each job still in a subtransaction of its own there),
--   and the jobs that succeeded are completed with one UPDATE. Failed jobs
--   are retried or failed after all of them ran, in order.
--   That call runs in a subtransaction (_run_guarded): the session state the
--   jobs left is undone, and when they left code for the caller's COMMIT
--   (see _commit_time_code) all of them are rolled back and run again one
--   per call, so that only the jobs that did are refused (42501).
-- Errors: 22004 p_job_ids NULL; 22023 p_lease_tokens of another length,
--   more than 1000 jobs, a job id given twice (it would run twice), or
--   p_budget not above 0 or not the statement_timeout in effect.
-- Example:
--   SELECT * FROM broker.broker_run_batch(ARRAY[41, 42], ARRAY['6f1c...'::uuid, '9a0b...'::uuid]);
--   BEGIN; SET LOCAL statement_timeout = '200ms';
--   SELECT * FROM broker.broker_run_batch(ARRAY[41, 42], ARRAY['6f1c...'::uuid, '9a0b...'::uuid], '200ms'); COMMIT;
--   Calls: _cancel_requests, _lock_batch, _authority_lost, _executor, _executor_jobs, _run_jobs_compat, _executor_call, _run_guarded, _refusal, broker_create_executor, _job_error, _fail_job, _fail_attempt, _complete_jobs, _record_attempts, _cancel_requested, _cancel_running
--   Tables: writes broker_jobs (run_alone)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_run_batch(p_job_ids bigint[], p_lease_tokens uuid[] DEFAULT NULL,
    p_budget interval DEFAULT NULL)
RETURNS TABLE (
    job_id          bigint,
    complete_status smallint,
    attempts        integer,
    error_sqlstate  text,
    error_message   text,
    duration        interval,
    rows_affected   bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_caller  text := pg_catalog.current_setting('broker.tenant_id', true);
    v_run_as  name;    -- run_as and tenant of the first job run
    v_tenant  text;
    v_enqueuer name;   -- the enqueuer last checked (_authority_lost), and why it may not
    v_denied  text;
    v_failed  boolean := false;  -- some job taken up failed or was not run
    x_pos     integer[] := '{}'; -- the positions of the jobs not run for their enqueuer
    v_job     record;
    o         broker._batch_row[] := '{}';  -- the rows returned, in order
    -- the jobs run, in order: their positions in o, and what the executor's run_jobs takes
    -- (three arrays: its signature)
    r_pos     integer[] := '{}';
    r_sqls    text[] := '{}';
    r_langs   text[] := '{}';
    r_paths   text[] := '{}';
    v_exec    regprocedure;
    v_states  text[];
    v_msgs    text[];
    v_durs    interval[];
    v_done    bigint[];
    v_done_msgs text[];
    v_call    text;    -- the statement that runs jobs through the executor
    v_guard   record;  -- _run_guarded's outcome
    v_ran     integer := 0; -- how many of r_pos the executor ran (fewer under a budget)
    v_cut     integer; -- the position (in o) of the job the budget's timeout ended, if any
    v_keep    integer; -- rows returned: those before the first job not started
    v_try     integer;
    v_status  smallint; -- the outcome being recorded for a failed job (o changes once it is)
    v_cancelled bigint[]; -- the jobs with a cancel request made before this call: not run
BEGIN
    IF p_job_ids IS NULL THEN
        RAISE EXCEPTION 'broker_run_batch: p_job_ids must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_lease_tokens IS NOT NULL
       AND pg_catalog.cardinality(p_lease_tokens) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(p_job_ids) THEN
        RAISE EXCEPTION 'broker_run_batch: % lease tokens for % jobs; pass one token per job, or NULL',
            pg_catalog.cardinality(p_lease_tokens), pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_run_batch: at most 1000 jobs per call, got %', pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_budget IS NOT NULL AND (p_budget OPERATOR(pg_catalog.<=) interval '0'
       OR pg_catalog.current_setting('statement_timeout')::interval OPERATOR(pg_catalog.<>) p_budget) THEN
        RAISE EXCEPTION 'broker_run_batch: p_budget % needs statement_timeout = % set before this statement, not %',
            p_budget, p_budget, pg_catalog.current_setting('statement_timeout')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1
       AND EXISTS (SELECT FROM pg_catalog.unnest(p_job_ids) AS u(id)
                    GROUP BY u.id HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1) THEN
        RAISE EXCEPTION 'broker_run_batch: job % is given more than once',
            (SELECT COALESCE(u.id::text, 'NULL') FROM pg_catalog.unnest(p_job_ids) AS u(id)
              GROUP BY u.id HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 ORDER BY u.id LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_cancelled := ARRAY(SELECT r.job_id FROM broker._cancel_requests(p_job_ids) AS r);
    -- which jobs run: in order, up to the first of another role or tenant, or with a timeout
    FOR v_job IN SELECT * FROM broker._lock_batch(p_job_ids, p_lease_tokens) AS b
    LOOP
        IF v_job.found IS NULL OR v_job.status OPERATOR(pg_catalog.<>) broker._state('running')
           OR (v_job.token IS NOT NULL AND v_job.lease_token OPERATOR(pg_catalog.<>) v_job.token) THEN
            o := o OPERATOR(pg_catalog.||) ROW(v_job.id, NULL::smallint, NULL::integer,
                CASE WHEN v_job.found IS NULL THEN 'P0002' ELSE '55000' END,
                CASE WHEN v_job.found IS NULL
                THEN pg_catalog.format('broker_run: job %s does not exist', COALESCE(v_job.id::text, 'NULL'))
                ELSE pg_catalog.format('broker_run: job %s is no longer running under this lease', v_job.id) END
                )::broker._batch_row;
            CONTINUE;
        END IF;
        IF v_job.id OPERATOR(pg_catalog.=) ANY (v_cancelled) THEN
            -- not run: its cancel request came first; it ends cancelled below (_cancel_running)
            o := o OPERATOR(pg_catalog.||) ROW(v_job.id, broker._state('completed')::smallint, v_job.attempts, '57014',
                pg_catalog.format('broker_run_batch: job %s was cancelled before it started', v_job.id))::broker._batch_row;
            v_failed := true;
            CONTINUE;
        END IF;
        IF p_budget IS NOT NULL AND (v_job.run_alone OR v_job.job_timeout OPERATOR(pg_catalog.<) p_budget) THEN
            -- never under a budget: it runs in a transaction of its own (a budget would not hold its timeout)
            o := o OPERATOR(pg_catalog.||) ROW(v_job.id, NULL::smallint, v_job.attempts, 'PB002',
                pg_catalog.format('broker_run_batch: job %s runs alone (%s)', v_job.id,
                    CASE WHEN v_job.run_alone THEN 'it ran past a batch''s budget before'
                         ELSE 'its timeout is shorter than the budget' END))::broker._batch_row;
            EXIT;
        END IF;
        IF v_run_as IS NULL THEN
            v_run_as := v_job.run_as;
            v_tenant := v_job.tenant_id;
        ELSIF v_job.run_as OPERATOR(pg_catalog.<>) v_run_as OR v_job.tenant_id OPERATOR(pg_catalog.<>) v_tenant
              OR (v_job.job_timeout IS NOT NULL AND p_budget IS NULL) THEN
            EXIT;  -- the caller resets the session and passes the rest again
        END IF;
        -- its enqueuer's rights, again now (once per enqueuer: a batch has one role and tenant)
        IF v_enqueuer IS DISTINCT FROM v_job.enqueued_by THEN
            v_enqueuer := v_job.enqueued_by;
            v_denied := broker._authority_lost(v_enqueuer, v_tenant, v_run_as, 'enqueuer');
        END IF;
        o := o OPERATOR(pg_catalog.||) ROW(v_job.id, broker._state('completed')::smallint, v_job.attempts,
                                           CASE WHEN v_denied IS NOT NULL THEN '42501' END, v_denied)::broker._batch_row;
        IF v_denied IS NOT NULL THEN  -- not run; it fails below
            x_pos := x_pos OPERATOR(pg_catalog.||) pg_catalog.cardinality(o);
            v_failed := true;
            CONTINUE;
        END IF;
        r_pos := r_pos OPERATOR(pg_catalog.||) pg_catalog.cardinality(o);
        r_sqls := r_sqls OPERATOR(pg_catalog.||) v_job.execute_str;
        r_langs := r_langs OPERATOR(pg_catalog.||) v_job.job_language;
        r_paths := r_paths OPERATOR(pg_catalog.||) v_job.job_search_path;
    END LOOP;

    IF pg_catalog.cardinality(r_pos) OPERATOR(pg_catalog.>) 0 THEN
        -- run them, as broker_run would, in one call of the role's executor (each job in a
        -- subtransaction of its own there); an executor without run_jobs runs them one call each
        v_exec := broker._executor(v_run_as);
        IF v_exec IS NULL THEN
            v_states := pg_catalog.array_fill('42501'::text, ARRAY[pg_catalog.cardinality(r_pos)]);
            v_durs := pg_catalog.array_fill('0'::interval, ARRAY[pg_catalog.cardinality(r_pos)]);
        ELSE
            v_call := pg_catalog.format(
                'SELECT pg_catalog.array_agg(r.s ORDER BY r.o), pg_catalog.array_agg(r.m ORDER BY r.o), '
                'pg_catalog.array_agg(r.d ORDER BY r.o) FROM %s AS r(s, m, d, o)',
                COALESCE(broker._executor_jobs(v_exec) OPERATOR(pg_catalog.||) '($1, $2, $3, $4) WITH ORDINALITY',
                         pg_catalog.format('broker._run_jobs_compat(%L, $1, $2, $3, $4) WITH ORDINALITY',
                                           broker._executor_call(v_exec))));
            -- the ids, for application_name while each runs; under a budget, when to start no more jobs
            -- (from the message's start: before the timeout, which starts with this statement, can fire)
            PERFORM pg_catalog.set_config('broker.batch_job_ids',
                ARRAY(SELECT (o[p]).job_id FROM pg_catalog.unnest(r_pos) AS p)::text, true);
            IF p_budget IS NOT NULL THEN
                PERFORM pg_catalog.set_config('broker.batch_deadline',
                    pg_catalog.date_part('epoch', pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) (p_budget OPERATOR(pg_catalog./) 2))::text,
                    true);
            END IF;
            -- in a subtransaction, the session put back, and rolled back when they left code for COMMIT
            -- (guard.sql); then each job alone, to refuse only the ones that did
            v_guard := broker._run_guarded(v_call, r_sqls, r_langs, r_paths, v_tenant);
            v_states := v_guard.states;
            v_msgs := v_guard.messages;
            v_durs := v_guard.durations;
            IF v_guard.refused IS NOT NULL THEN
                v_states := '{}';
                v_msgs := '{}';
                v_durs := '{}';
                FOR i IN 1 .. pg_catalog.cardinality(r_pos) LOOP
                    IF pg_catalog.cardinality(r_pos) OPERATOR(pg_catalog.>) 1 THEN
                        v_guard := broker._run_guarded(v_call, ARRAY[r_sqls[i]], ARRAY[r_langs[i]], ARRAY[r_paths[i]],
                                                       v_tenant);
                    END IF;
                    EXIT WHEN v_guard.refused IS NULL AND v_guard.states IS NULL;  -- the budget's timeout: not run
                    IF v_guard.refused IS NOT NULL THEN
                        v_states := v_states OPERATOR(pg_catalog.||) '42501'::text;
                        v_msgs := v_msgs OPERATOR(pg_catalog.||) broker._refusal(v_guard.refused, v_run_as);
                        v_durs := v_durs OPERATOR(pg_catalog.||) interval '0';
                    ELSE
                        v_states := v_states OPERATOR(pg_catalog.||) v_guard.states[1];
                        v_msgs := v_msgs OPERATOR(pg_catalog.||) v_guard.messages[1];
                        v_durs := v_durs OPERATOR(pg_catalog.||) v_guard.durations[1];
                    END IF;
                END LOOP;
            END IF;
            PERFORM pg_catalog.set_config('broker.batch_job_ids', '', true);
            PERFORM pg_catalog.set_config('broker.batch_deadline', '', true);
            v_ran := COALESCE(pg_catalog.array_length(v_states, 1), 0);  -- (fewer under a budget: the rest not started)
            IF v_ran OPERATOR(pg_catalog.>) pg_catalog.cardinality(r_pos)
               OR (v_ran OPERATOR(pg_catalog.<) pg_catalog.cardinality(r_pos) AND p_budget IS NULL) THEN
                RAISE EXCEPTION 'broker_run_batch: the executor of role % returned % outcomes for % jobs',
                    pg_catalog.quote_ident(v_run_as), COALESCE(pg_catalog.array_length(v_states, 1), 0),
                    pg_catalog.cardinality(r_pos)
                    USING ERRCODE = 'data_exception',
                          HINT = pg_catalog.format('Recreate it: SELECT broker.broker_create_executor(%L)', v_run_as);
            END IF;
        END IF;
        v_ran := COALESCE(pg_catalog.array_length(v_states, 1), 0);
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_caller, ''), true);
        -- under a budget, the last job run ended with 57014 once the budget passed: the budget's timeout
        -- ended it (a job cannot arm one of its own inside this statement); it was rolled back alone
        -- (unless a cancel request for it came in: then the cancel ended it, and it ends cancelled)
        IF p_budget IS NOT NULL AND v_ran OPERATOR(pg_catalog.>) 0 AND v_states[v_ran] OPERATOR(pg_catalog.=) '57014'
           AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) p_budget)
           AND broker._cancel_requested((o[r_pos[v_ran]]).job_id) IS NULL THEN
            v_cut := r_pos[v_ran];
            o[v_cut].complete_status := NULL;
            o[v_cut].error_sqlstate := 'PB002';
            o[v_cut].error_message := pg_catalog.format('broker_run_batch: job %s ran past the batch budget (%s): rolled '
                                                        'back, attempt not counted, it runs alone from now on',
                                                        (o[v_cut]).job_id, p_budget);
        END IF;
        FOR i IN 1 .. v_ran LOOP
            CONTINUE WHEN v_states[i] IS NULL OR r_pos[i] OPERATOR(pg_catalog.=) v_cut;
            v_failed := true;
            o[r_pos[i]].error_sqlstate := v_states[i];
            o[r_pos[i]].error_message := broker._job_error(v_run_as, v_exec, v_states[i], v_msgs[i]);
        END LOOP;
    END IF;
    -- the rows up to the first job not started (under a budget); the caller passes the rest again
    v_keep := CASE WHEN v_ran OPERATOR(pg_catalog.<) pg_catalog.cardinality(r_pos)
                   THEN r_pos[v_ran OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.-) 1 ELSE pg_catalog.cardinality(o) END;
    o := o[1:v_keep];
    -- the jobs that succeeded, completed together (their effects and their completion still commit
    -- together, their dependents released at once), with what the executor reported of each run
    v_done := ARRAY(SELECT (o[p.pos]).job_id
                      FROM ROWS FROM (pg_catalog.unnest(r_pos[1:v_ran]), pg_catalog.unnest(v_states)) AS p(pos, state)
                     WHERE p.state IS NULL AND p.pos IS DISTINCT FROM v_cut);
    v_done_msgs := ARRAY(SELECT p.msg
                           FROM ROWS FROM (pg_catalog.unnest(r_pos[1:v_ran]), pg_catalog.unnest(v_states),
                                           pg_catalog.unnest(v_msgs)) AS p(pos, state, msg)
                          WHERE p.state IS NULL AND p.pos IS DISTINCT FROM v_cut);
    -- the bookkeeping, done again should the budget's timeout fire in it (it fires once)
    FOR v_try IN 1 .. 2 LOOP
        BEGIN
            -- the failed ones, retried or failed, and those not run for their enqueuer, failed; in
            -- order (rare; skipped, loop and all, when none)
            IF v_failed THEN
                FOR i IN 1 .. pg_catalog.cardinality(o) LOOP
                    CONTINUE WHEN (o[i]).complete_status IS NULL OR (o[i]).error_sqlstate IS NULL;
                    IF i OPERATOR(pg_catalog.=) ANY (x_pos) THEN
                        PERFORM broker._record_attempts(ARRAY[(o[i]).job_id], 'failed', ARRAY[(o[i]).error_sqlstate],
                                                        ARRAY[(o[i]).error_message]);
                        o[i].complete_status := broker._fail_job((o[i]).job_id, (o[i]).error_sqlstate, (o[i]).error_message);
                        CONTINUE;
                    END IF;
                    -- cancelled by its cancel request (57014 with a request: broker_cancel_job), else failed;
                    -- o[i] changes only once both are done, so that a second try records the job again
                    v_status := broker._cancel_running((o[i]).job_id, (o[i]).error_sqlstate, (o[i]).error_message);
                    IF v_status IS NULL THEN
                        v_status := broker._fail_attempt((o[i]).job_id, (o[i]).error_sqlstate, (o[i]).error_message);
                    END IF;
                    o[i].complete_status := v_status;
                END LOOP;
            END IF;
            IF v_cut IS NOT NULL THEN
                UPDATE broker.broker_jobs AS j SET run_alone = true WHERE j.job_id OPERATOR(pg_catalog.=) (o[v_cut]).job_id;
            END IF;
            IF pg_catalog.cardinality(v_done) OPERATOR(pg_catalog.>) 0 THEN
                PERFORM broker._record_attempts(v_done, 'completed', NULL, NULL, v_done_msgs);
                PERFORM broker._complete_jobs(v_done);
            END IF;
            EXIT;
        EXCEPTION WHEN query_canceled THEN
            IF p_budget IS NULL OR v_try OPERATOR(pg_catalog.=) 2 THEN
                RAISE;
            END IF;
        END;
    END LOOP;

    RETURN QUERY
        SELECT b.id, b.status, b.att, b.state, b.msg,
               COALESCE(r.dur, CASE WHEN b.status IS NOT NULL THEN interval '0' END),
               -- a completed job's rows, as the executor reported them ('<rows>' chr(31) '<output>')
               CASE WHEN b.status OPERATOR(pg_catalog.=) 2 AND r.state IS NULL
                         AND pg_catalog.split_part(r.msg, pg_catalog.chr(31), 1) OPERATOR(pg_catalog.~) '^[0-9]{1,18}$'
                    THEN pg_catalog.split_part(r.msg, pg_catalog.chr(31), 1)::bigint END
          FROM pg_catalog.unnest(o) WITH ORDINALITY AS b(id, status, att, state, msg, n)
          LEFT JOIN ROWS FROM (pg_catalog.unnest(r_pos), pg_catalog.unnest(v_durs), pg_catalog.unnest(v_states),
                               pg_catalog.unnest(v_msgs)) AS r(pos, dur, state, msg)
            ON r.pos OPERATOR(pg_catalog.=) b.n
         ORDER BY b.n;
END;
$$;
COMMENT ON FUNCTION broker.broker_run_batch(bigint[], uuid[], interval) IS
    'Runs several claimed jobs of one run_as role and tenant in the caller''s transaction, each like broker_run (own subtransaction, effects and completion commit together); stops before the first job of another role or tenant, or with a timeout; under a budget (p_budget = statement_timeout) no job waits for the commit much beyond it: a job still running when it ends is rolled back, marked run_alone and returned claimed (PB002).';
-- source: sql/run/release.sql
-- sql/run/release.sql: handing claimed jobs back (broker_release_jobs, broker_release_claim) and the argument checks.
-- ---------------------------------------------------------------------------
-- Function: broker._check_lease_args(p_fn, p_job_ids, p_lease_tokens)
--   The argument rules that broker_release_jobs and broker_interrupt_jobs
--   share: neither array NULL (22004), one token per job and at most 1000
--   jobs (22023); p_fn names the caller in the messages.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._check_lease_args(p_fn text, p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_job_ids IS NULL OR p_lease_tokens IS NULL THEN
        RAISE EXCEPTION '%: p_job_ids and p_lease_tokens must not be NULL', p_fn
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(p_lease_tokens) THEN
        RAISE EXCEPTION '%: % lease tokens for % jobs; pass one token per job',
            p_fn, pg_catalog.cardinality(p_lease_tokens), pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION '%: at most 1000 jobs per call, got %', p_fn, pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._check_lease_args(text, bigint[], uuid[]) IS
    'Internal: the argument checks of broker_release_jobs and broker_interrupt_jobs (22004, 22023).';

-- ---------------------------------------------------------------------------
-- Function: broker._check_lease_seconds(p_fn, p_seconds, p_hint)
--   Raises 22023 (as p_fn, with p_hint) unless a lease of p_seconds is 1 to
--   3600 seconds: a lease only bounds how long a crashed claimer holds what
--   it claimed, and a claim never holds anything longer than an hour.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._check_lease_seconds(p_fn text, p_seconds integer, p_hint text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_seconds IS NOT NULL AND p_seconds OPERATOR(pg_catalog.>=) 1 AND p_seconds OPERATOR(pg_catalog.<=) 3600 THEN
        RETURN;
    END IF;
    IF p_hint IS NULL THEN
        RAISE EXCEPTION '%: the lease must be 1 to 3600 seconds, got %', p_fn, COALESCE(p_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RAISE EXCEPTION '%: the lease must be 1 to 3600 seconds, got %', p_fn, COALESCE(p_seconds::text, 'NULL')
        USING ERRCODE = 'invalid_parameter_value', HINT = p_hint;
END;
$$;
COMMENT ON FUNCTION broker._check_lease_seconds(text, integer, text) IS
    'Internal: 22023 unless a lease is 1 to 3600 seconds (every function that gives or renews a lease).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_release_jobs(p_job_ids, p_lease_tokens, p_run_alone)
--   Hands claimed jobs back that their claimer will not run (say its session
--   to the database was lost before it ran them): each job that is still
--   running under the lease token given with it, and that no session is
--   executing (row-locked by broker_run), returns to pending at once with
--   the attempt of its claim not counted, unless a cancel request was made
--   for it while it was claimed: then it ends cancelled, its dependents
--   too (_cancel_handed_back). Only the claimer knows the token,
--   so no one else can release a job. Jobs under another lease, executing,
--   finished or unknown are left as they are. p_run_alone marks the jobs
--   released to run in a transaction of their own from now on (run_alone):
--   they shared a transaction whose session died, and whichever of them
--   ended it (or nothing: a network reset) must not take the others down
--   again; run alone, such a job counts its attempt when it does it again
--   (lease recovery). Returns the ids released.
-- Errors: 22004 an argument is NULL; 22023 arrays of different lengths, or
--   more than 1000 jobs.
-- Example:
--   SELECT broker.broker_release_jobs(ARRAY[43, 44], ARRAY['1d2e...'::uuid, '5f6a...'::uuid]);   -- claimed, not started
--   Calls: _check_lease_args, _count_pending_deps, _cancel_handed_back, _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_release_jobs(p_job_ids bigint[], p_lease_tokens uuid[],
                                           p_run_alone boolean DEFAULT false)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues integer[];
BEGIN
    PERFORM broker._check_lease_args('broker_release_jobs', p_job_ids, p_lease_tokens);
    WITH mine AS (
        SELECT j.job_id FROM broker.broker_jobs AS j
          JOIN ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) AS u(id, token)
            ON j.job_id OPERATOR(pg_catalog.=) u.id
         WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
           AND j.lease_token OPERATOR(pg_catalog.=) u.token
         ORDER BY j.job_id
           FOR NO KEY UPDATE OF j SKIP LOCKED
    ), released AS (
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'),
               attempts = j.attempts OPERATOR(pg_catalog.-) 1,
               pending_deps = broker._count_pending_deps(j.tenant_id, j.job_id),
               lease_token = NULL, lease_expires_at = NULL, lease_instance_id = NULL,
               run_alone = j.run_alone OR COALESCE(p_run_alone, false)
          FROM mine
         WHERE j.job_id OPERATOR(pg_catalog.=) mine.job_id
        RETURNING j.job_id, j.job_queue
    )
    SELECT pg_catalog.array_agg(r.job_id ORDER BY r.job_id), pg_catalog.array_agg(r.job_queue)
      INTO p_job_ids, v_queues FROM released AS r;
    -- a job with a cancel request made while it was claimed is not run again: cancelled
    PERFORM broker._cancel_handed_back(p_job_ids);
    PERFORM broker._notify_queues(v_queues);
    RETURN QUERY SELECT u.id FROM pg_catalog.unnest(p_job_ids) AS u(id);
END;
$$;
COMMENT ON FUNCTION broker.broker_release_jobs(bigint[], uuid[], boolean) IS
    'Hands claimed jobs back to pending without counting the attempt (only under the lease token of their claim, and not while executing; p_run_alone: each runs in a transaction of its own from now on); returns the ids released.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_release_claim(p_lease_token)
--   Hands back a whole claim whose answer its claimer never received (its
--   connection died while broker_get or broker_claim_batches committed),
--   named by the lease token the claimer chose for it (p_lease_token of the
--   claim): every job still running under the token derived from it
--   (_claim_job_token) that no session is executing returns to pending as
--   broker_release_jobs returns it (attempt not counted). The claimer never saw those jobs, so none of them started.
--   Returns the ids released (at most 1000 a call: call again while it
--   returns some).
-- Errors: 22004 p_lease_token is NULL.
-- Example:
--   SELECT broker.broker_release_claim('9b2c...'::uuid);   -- the claim's answer was lost
--   Calls: broker_release_jobs, _claim_job_token
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_release_claim(p_lease_token uuid)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids    bigint[];
    v_tokens uuid[];
BEGIN
    IF p_lease_token IS NULL THEN
        RAISE EXCEPTION 'broker_release_claim: p_lease_token must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- (the running jobs: few, by the lease index; each one's token derived as the claim derived it)
    SELECT pg_catalog.array_agg(j.job_id), pg_catalog.array_agg(j.lease_token) INTO v_ids, v_tokens
      FROM (SELECT j.job_id, j.lease_token FROM broker.broker_jobs AS j
             WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
               AND j.lease_token OPERATOR(pg_catalog.=) broker._claim_job_token(p_lease_token, j.job_id)
             LIMIT 1000) AS j;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT r.job_id FROM broker.broker_release_jobs(v_ids, v_tokens) AS r;
END;
$$;
COMMENT ON FUNCTION broker.broker_release_claim(uuid) IS
    'Hands back, without counting the attempt, every job still running under a claim''s lease token that no session executes (a claim whose answer its claimer lost); returns the ids released.';
-- source: sql/run/interrupt.sql
-- sql/run/interrupt.sql: ending runs at runner shutdown (broker_interrupt_jobs).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_interrupt_jobs(p_job_ids, p_lease_tokens)
--   Records that the runner ended the runs of these jobs (its shutdown
--   deadline passed: it terminated the session executing them, so their
--   transaction rolled back and nothing of them is left). Each job that is
--   still running under the lease token given with it returns to pending at
--   once: the attempt of its claim is not counted, interruptions counts one
--   more, and its dependents stay as they are (an interrupted job is not a
--   failed one). Only the claimer knows the token, so no one else can
--   interrupt a job. A job still row-locked by the session executing it is
--   waited for (end that session first; the caller's lock_timeout bounds the
--   wait): a run that committed meanwhile keeps its outcome, since a
--   finished job has no lease. Jobs under another lease, finished or unknown
--   are left as they are. Returns the ids interrupted. The crash path is not
--   this: a run lost without its runner ending it counts its attempt (lease
--   recovery, broker_recover_stale_jobs).
-- Errors: 22004 an argument is NULL; 22023 arrays of different lengths, or
--   more than 1000 jobs; 55P03 lock_timeout passed while a session was still
--   executing one of them.
-- Example:
--   SELECT broker.broker_interrupt_jobs(ARRAY[45], ARRAY['7c3d...'::uuid]);   -- after pg_terminate_backend(pid, 5000)
--   Calls: _check_lease_args, _record_attempts, _count_pending_deps, _cancel_handed_back, _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_interrupt_jobs(p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues integer[];
    v_mine   bigint[];
BEGIN
    PERFORM broker._check_lease_args('broker_interrupt_jobs', p_job_ids, p_lease_tokens);
    -- lock first (job_id order, waiting for an executing session to end), then read the state the
    -- lock lets through: a run that committed while we waited has no lease any more
    PERFORM FROM broker.broker_jobs AS j
      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
      ORDER BY j.job_id
        FOR NO KEY UPDATE;
    SELECT pg_catalog.array_agg(j.job_id ORDER BY j.job_id) INTO v_mine
      FROM broker.broker_jobs AS j
      JOIN ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) AS u(id, token)
        ON j.job_id OPERATOR(pg_catalog.=) u.id
     WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
       AND j.lease_token OPERATOR(pg_catalog.=) u.token;
    PERFORM broker._record_attempts(v_mine, 'interrupted');  -- the attempt history keeps the run
    WITH interrupted AS (
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'),
               attempts = j.attempts OPERATOR(pg_catalog.-) 1,
               interruptions = j.interruptions OPERATOR(pg_catalog.+) 1,
               pending_deps = broker._count_pending_deps(j.tenant_id, j.job_id),
               lease_token = NULL, lease_expires_at = NULL, lease_instance_id = NULL
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_mine)
        RETURNING j.job_id, j.job_queue
    )
    SELECT pg_catalog.array_agg(r.job_id ORDER BY r.job_id), pg_catalog.array_agg(r.job_queue)
      INTO p_job_ids, v_queues FROM interrupted AS r;
    -- a run ended while a cancel request for it was on its way is not run again: cancelled
    PERFORM broker._cancel_handed_back(p_job_ids);
    PERFORM broker._notify_queues(v_queues);
    RETURN QUERY SELECT u.id FROM pg_catalog.unnest(p_job_ids) AS u(id);
END;
$$;
COMMENT ON FUNCTION broker.broker_interrupt_jobs(bigint[], uuid[]) IS
    'Returns jobs whose run their runner ended (shutdown deadline) to pending without counting the attempt and without touching their dependents, counting the interruption (only under the lease token of their claim; waits for a session still executing them); returns the ids interrupted.';
-- source: sql/run/autonomous.sql
-- sql/run/autonomous.sql: starting autonomous jobs, keeping their leases, recording their outcome (the runner's side).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_autonomous_begin(p_job_id, p_lease_token)
--   Starts a claimed autonomous job (one that runs outside a transaction
--   block): returns what the runner needs to run it on a connection of its
--   own, in a transaction of its own that commits before the job runs (so
--   the job runs at least once: a crash before broker_autonomous_end leaves
--   it running under its lease, and lease recovery retries it). The runner
--   keeps the lease alive while the job runs (broker_autonomous_extend).
--   Checked here, as broker_run checks a regular job: the enqueuer may still
--   have it run (_authority_lost), and the run_as role still has its
--   arrangement (broker_allow_autonomous); otherwise the job fails for good
--   (42501, its dependents cancelled) and refused says why.
--   via: 'set_role' (the runner SET ROLEs to run_as; maintenance statements
--   only) or 'login' (the runner logs in as run_as).
-- Errors: P0002 unknown job; 55000 job not running, lease lost, or not an
--   autonomous job (run those with broker_run).
-- Example:
--   SELECT * FROM broker.broker_autonomous_begin(42, '1d2e...'::uuid);
--   Calls: _run_begin, _authority_lost, _autonomous_via, _record_attempts, _fail_job
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_autonomous_begin(p_job_id bigint, p_lease_token uuid)
RETURNS TABLE (job_id bigint, execute_str text, run_as name, via text, search_path text, tenant_id text, refused text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job    broker.broker_jobs;
    v_via    text;
    v_denied text;
BEGIN
    v_job := broker._run_begin(p_job_id, p_lease_token);
    IF NOT v_job.autonomous THEN
        RAISE EXCEPTION 'broker_autonomous_begin: job % is not autonomous', p_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Run it with broker.broker_run().';
    END IF;
    v_denied := broker._authority_lost(v_job.enqueued_by, v_job.tenant_id, v_job.run_as, 'enqueuer');
    IF v_denied IS NULL THEN
        v_via := broker._autonomous_via(v_job.run_as);
        IF v_via IS NULL THEN
            v_denied := pg_catalog.format('role %I may no longer run autonomous jobs (broker_allow_autonomous)', v_job.run_as);
        END IF;
    END IF;
    IF v_denied IS NOT NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY['42501'], ARRAY[v_denied]);
        PERFORM broker._fail_job(p_job_id, '42501', v_denied);
    END IF;
    RETURN QUERY SELECT p_job_id, CASE WHEN v_denied IS NULL THEN v_job.execute_str END, v_job.run_as, v_via,
                        v_job.job_search_path, v_job.tenant_id, v_denied;
END;
$$;
COMMENT ON FUNCTION broker.broker_autonomous_begin(bigint, uuid) IS
    'Starts a claimed autonomous job: checks its enqueuer''s rights and its role''s arrangement (else fails it, 42501) and returns its SQL, run_as, how to run it (set_role or login), search_path and tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_autonomous_extend(p_job_ids, p_lease_tokens, p_lease_seconds)
--   Keeps the leases of autonomous jobs alive while the runner executes them
--   (no transaction holds their rows locked, so the lease is what marks them
--   as executing): each job still running under the token given with it
--   gets lease_expires_at = now + p_lease_seconds. Returns the ids extended.
-- Errors: 22004 NULL; 22023 arrays of different lengths, more than 1000
--   jobs, or a lease outside 1..3600 seconds.
-- Example:
--   SELECT broker.broker_autonomous_extend(ARRAY[42], ARRAY['1d2e...'::uuid], 60);
--   Calls: _check_lease_args, _state, _check_lease_seconds
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_autonomous_extend(p_job_ids bigint[], p_lease_tokens uuid[], p_lease_seconds integer)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM broker._check_lease_args('broker_autonomous_extend', p_job_ids, p_lease_tokens);
    PERFORM broker._check_lease_seconds('broker_autonomous_extend', p_lease_seconds);
    RETURN QUERY
    UPDATE broker.broker_jobs AS j
       SET lease_expires_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => p_lease_seconds)
      FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) AS u(id, token)
     WHERE j.job_id OPERATOR(pg_catalog.=) u.id
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
       AND j.autonomous
       AND j.lease_token OPERATOR(pg_catalog.=) u.token
    RETURNING j.job_id;
END;
$$;
COMMENT ON FUNCTION broker.broker_autonomous_extend(bigint[], uuid[], integer) IS
    'Extends the leases of running autonomous jobs (under their claim''s tokens) while the runner executes them; returns the ids extended.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_autonomous_end(p_job_id, p_lease_token, p_error_sqlstate,
--     p_error_message, p_duration, p_final)
--   Records the outcome of an autonomous job in a transaction of its own,
--   with its row in the attempt history, through the functions every job's
--   outcome goes through: completed
--   (p_error_sqlstate NULL) and its dependents released, or a failed attempt
--   (retried after the backoff, or failed with its dependents cancelled), or
--   with p_final failed for good whatever attempts are left (the runner
--   refused to run the text). A permission error gets the role appended, as
--   for regular jobs; a statement cancelled (57014) under a cancel request
--   ends the job cancelled (_cancel_running). Returns the outcome as
--   broker_run does.
-- Errors: P0002 unknown job; 55000 job not running or lease lost (the lease
--   expired and the job was recovered meanwhile: that outcome stands).
-- Example:
--   SELECT * FROM broker.broker_autonomous_end(42, '1d2e...'::uuid, NULL, NULL, interval '12 seconds');
--   Calls: _run_begin, _record_attempts, _complete_job, _state, _error_text, _grant_hint, _fail_job, _cancel_running, _fail_attempt
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_autonomous_end(p_job_id bigint, p_lease_token uuid, p_error_sqlstate text,
                                             p_error_message text, p_duration interval, p_final boolean DEFAULT false)
RETURNS TABLE (
    job_id          bigint,
    complete_status smallint,
    attempts        integer,
    error_sqlstate  text,
    error_message   text,
    duration        interval)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job     broker.broker_jobs := broker._run_begin(p_job_id, p_lease_token);
    v_status  smallint;
    v_message text;
BEGIN
    IF NOT v_job.autonomous THEN
        RAISE EXCEPTION 'broker_autonomous_end: job % is not autonomous', p_job_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF p_error_sqlstate IS NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'completed');
        PERFORM broker._complete_job(p_job_id);
        v_status := broker._state('completed');
    ELSE
        v_message := broker._error_text(COALESCE(p_error_message, ''));
        IF p_error_sqlstate OPERATOR(pg_catalog.=) '42501' THEN
            v_message := v_message OPERATOR(pg_catalog.||) pg_catalog.format(' (the job runs as role %I', v_job.run_as)
                OPERATOR(pg_catalog.||) COALESCE('; needed: ' OPERATOR(pg_catalog.||) broker._grant_hint(v_job.run_as, p_error_message), '')
                OPERATOR(pg_catalog.||) ')';
        END IF;
        IF p_final THEN  -- (_fail_attempt and _cancel_running record their attempt themselves)
            PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY[p_error_sqlstate], ARRAY[v_message]);
        END IF;
        v_status := CASE WHEN p_final THEN broker._fail_job(p_job_id, p_error_sqlstate, v_message)
                         ELSE COALESCE(broker._cancel_running(p_job_id, p_error_sqlstate, v_message),
                                       broker._fail_attempt(p_job_id, p_error_sqlstate, v_message)) END;
    END IF;
    RETURN QUERY SELECT p_job_id, v_status, v_job.attempts, p_error_sqlstate, v_message, COALESCE(p_duration, interval '0');
END;
$$;
COMMENT ON FUNCTION broker.broker_autonomous_end(bigint, uuid, text, text, interval, boolean) IS
    'Records the outcome of an autonomous job (completed, a failed attempt, or with p_final failed for good) in its own transaction; returns it as broker_run does.';
-- source: sql/run/cancel.sql
-- sql/run/cancel.sql: cancelling jobs: pending ones at once (broker_cancel_job, the cancel_reason trigger), running ones
-- by a cancel request the runner acts on (broker_cancel_requests) and the run path's rule (_cancel_running).
-- ---------------------------------------------------------------------------
-- Function: broker._cancel_requests(p_job_ids)
--   The rule of a cancel request, for many jobs at once: the jobs of
--   p_job_ids with a cancel request made for their current attempt (a
--   broker_job_actions row 'cancel' made since the job was claimed), each
--   with the reason of its latest one. Inlined into the caller's query, so
--   it reads with that query's snapshot: callers read it in a statement of
--   its own, as a request is committed by another session while the job
--   waits or runs.
--   Calls: none
--   Tables: reads broker_job_actions, broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cancel_requests(p_job_ids bigint[])
RETURNS TABLE (job_id bigint, reason text)
LANGUAGE sql STABLE
AS $$
    SELECT DISTINCT ON (a.job_id) a.job_id, COALESCE(a.reason, 'cancelled by ' OPERATOR(pg_catalog.||) a.requested_by)
      FROM broker.broker_job_actions AS a
      JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
     WHERE a.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
       AND a.action OPERATOR(pg_catalog.=) 'cancel'
       AND a.requested_at OPERATOR(pg_catalog.>=) j.started_at
     ORDER BY a.job_id, a.action_id DESC
$$;
COMMENT ON FUNCTION broker._cancel_requests(bigint[]) IS
    'Internal: the jobs with a cancel request for their current attempt, each with its latest reason (the rule of a cancel request).';

-- ---------------------------------------------------------------------------
-- Function: broker._cancel_requested(p_job_id)
--   The reason of the cancel request made for the current attempt of job
--   p_job_id (_cancel_requests), or NULL when there is none. Read with a
--   fresh snapshot: the request is committed by another session while the
--   job runs.
--   Calls: _cancel_requests
--   Tables: reads broker_job_actions, broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cancel_requested(p_job_id bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT r.reason FROM broker._cancel_requests(ARRAY[p_job_id]) AS r);
END;
$$;
COMMENT ON FUNCTION broker._cancel_requested(bigint) IS
    'Internal: the reason of a cancel request for the current attempt of a running job, or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._cancel_handed_back(p_job_ids)
--   For jobs just handed back to pending unrun or interrupted
--   (broker_release_jobs, broker_interrupt_jobs): those with a cancel request
--   made while they were claimed are not run again but cancelled, by the
--   cancel of a pending job (cancel_reason, trigger
--   broker_jobs_cancel_request_trg: dependents and all). Claimed anew, the
--   request would no longer be for the job's current attempt.
--   Calls: _cancel_requests
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cancel_handed_back(p_job_ids bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE broker.broker_jobs AS j SET cancel_reason = r.reason
      FROM broker._cancel_requests(p_job_ids) AS r
     WHERE j.job_id OPERATOR(pg_catalog.=) r.job_id
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
END;
$$;
COMMENT ON FUNCTION broker._cancel_handed_back(bigint[]) IS
    'Internal: jobs handed back to pending with a cancel request made while they were claimed end cancelled instead.';

-- ---------------------------------------------------------------------------
-- Function: broker._end_cancelled(p_job_id, p_reason)
--   Ends running job p_job_id cancelled (4) with p_reason, and cancels its
--   dependents as a pending job's cancel does. Returns 4 (NULL: the job is
--   not running).
--   Calls: _cancel_dependents
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._end_cancelled(p_job_id bigint, p_reason text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job record;
BEGIN
    UPDATE broker.broker_jobs AS j
       SET complete_status = broker._state('cancelled'),
           finished_at = pg_catalog.clock_timestamp(),
           lease_token = NULL, lease_expires_at = NULL,
           cancel_reason = p_reason
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
    RETURNING j.tenant_id, j.job_id, j.job_group, j.job_name INTO v_job;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM broker._cancel_dependents(v_job.tenant_id, v_job.job_id, v_job.job_group,
        pg_catalog.format('dependency job %s (%s) was cancelled', v_job.job_id, v_job.job_name));
    RETURN 4;
END;
$$;
COMMENT ON FUNCTION broker._end_cancelled(bigint, text) IS
    'Internal: end a running job cancelled (status 4) with a reason, and cancel its dependents.';

-- ---------------------------------------------------------------------------
-- Function: broker._cancel_running(p_job_id, p_sqlstate, p_message)
--   The run path's cancel rule: an attempt that ended with 57014
--   (query_canceled) while a cancel request exists for it was stopped by
--   that request: the attempt is recorded cancelled and the job ends
--   cancelled with the request's reason (_end_cancelled). Returns 4, or NULL
--   when this is not such an attempt (the caller handles it as before).
--   Calls: _cancel_requested, _record_attempts, _end_cancelled
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cancel_running(p_job_id bigint, p_sqlstate text, p_message text)
RETURNS smallint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason text;
BEGIN
    IF p_sqlstate IS DISTINCT FROM '57014' THEN
        RETURN NULL;
    END IF;
    v_reason := broker._cancel_requested(p_job_id);
    IF v_reason IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM broker._record_attempts(ARRAY[p_job_id], 'cancelled', ARRAY[p_sqlstate], ARRAY[p_message]);
    RETURN broker._end_cancelled(p_job_id, v_reason);
END;
$$;
COMMENT ON FUNCTION broker._cancel_running(bigint, text, text) IS
    'Internal: a run that ended with 57014 under a cancel request ends cancelled (attempt recorded); NULL when that is not the case.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_cancel_requests(p_job_ids)
--   For the runner: which of the jobs p_job_ids (the ones it is running) are
--   still running with a cancel request for their current attempt, whatever
--   their tenant. A NOTIFY '<database>/cancel/<job id>' is only a hint (any
--   login may send one): the runner cancels a job's statement only when this
--   names the job, so no one can stop another tenant's job without a request
--   the policies accepted.
-- Errors: 22023 more than 1000 ids.
-- Example:
--   SELECT * FROM broker.broker_cancel_requests(ARRAY[41, 42]);
--   Calls: _cancel_requests
--   Tables: reads broker_jobs, broker_job_actions
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_cancel_requests(p_job_ids bigint[])
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_cancel_requests: at most 1000 jobs per call, got %', pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT j.job_id FROM broker.broker_jobs AS j
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
           AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
           AND j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT r.job_id FROM broker._cancel_requests(p_job_ids) AS r))
         ORDER BY j.job_id;
END;
$$;
COMMENT ON FUNCTION broker.broker_cancel_requests(bigint[]) IS
    'For the runner: the jobs among those given that are running with a cancel request for their current attempt (a NOTIFY is only a hint).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_cancel_job(p_job_id, p_reason)
--   Cancels a job of the caller's tenant:
--   * pending: it is cancelled at once, and, transitively, every pending job
--     waiting on it (sets cancel_reason with the caller's rights; the
--     trigger broker_jobs_cancel_request_trg does the cancelling);
--   * running: a cancel request is recorded (broker_job_actions, committed
--     with the caller's transaction) and the runner holding the job is told
--     (NOTIFY pgsql_broker '<database>/cancel/<job id>'): it cancels the
--     statement running the job, which then ends cancelled with p_reason and
--     its dependents cancelled. A job that finishes before the cancel lands
--     keeps its result; one that fails meanwhile is not retried.
--   Returns the number of jobs cancelled (for a running job: 1, the request).
-- Errors: 22004 NULL id; P0002 no such job in this tenant; 55000 the job
--   already finished (completed, failed or cancelled).
-- Example:
--   SELECT broker.broker_cancel_job(42, 'superseded by job 57');
--   Calls: broker_current_tenant
--   Tables: writes broker_jobs, broker_job_actions
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_cancel_job(p_job_id bigint, p_reason text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_status smallint;
    v_tenant text := broker.broker_current_tenant();
    v_reason text := COALESCE(NULLIF(pg_catalog.btrim(p_reason), ''), 'cancelled by ' OPERATOR(pg_catalog.||) CURRENT_USER);
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'broker_cancel_job: p_job_id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    UPDATE broker.broker_jobs AS j
       SET cancel_reason = v_reason
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id
       AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant
       AND j.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
    IF FOUND THEN
        RETURN pg_catalog.current_setting('broker.last_cancel_count')::integer;
    END IF;
    SELECT j.complete_status INTO v_status FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_cancel_job: job % does not exist', p_job_id USING ERRCODE = 'no_data_found';
    END IF;
    IF v_status OPERATOR(pg_catalog.=) broker._state('running') THEN
        -- the trigger broker_job_actions_trg checks it is still running and tells its runner
        INSERT INTO broker.broker_job_actions (job_id, action, reason)
        VALUES (p_job_id, 'cancel', pg_catalog.left(v_reason, 2000));
        RETURN 1;
    END IF;
    RAISE EXCEPTION 'broker_cancel_job: job % is %; only pending or running jobs can be cancelled', p_job_id,
        CASE v_status WHEN 2 THEN 'completed' WHEN 3 THEN 'failed' ELSE 'cancelled' END
        USING ERRCODE = 'object_not_in_prerequisite_state';
END;
$$;
COMMENT ON FUNCTION broker.broker_cancel_job(bigint, text) IS
    'Cancels a pending or running job of the current tenant and every pending job that waits on it; returns how many were cancelled (a running job: 1, ended by its runner).';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._jobs_cancel_request()
--   BEFORE UPDATE on broker_jobs when a pending job gets a cancel_reason (the
--   one column enqueuers may update, and only on pending jobs of their tenant,
--   see the policies): the job becomes cancelled and its dependents follow.
--   The number of jobs cancelled goes to broker.last_cancel_count.
--   Calls: _lock_dependency_keys, _cancel_dependents
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._jobs_cancel_request()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer;
BEGIN
    PERFORM broker._lock_dependency_keys(NEW.tenant_id, ARRAY[NEW.job_group], NULL, ARRAY[NEW.job_id], NULL);
    NEW.complete_status := broker._state('cancelled');
    NEW.finished_at := pg_catalog.clock_timestamp();
    v_n := broker._cancel_dependents(NEW.tenant_id, NEW.job_id, NEW.job_group,
        pg_catalog.format('dependency job %s (%s) was cancelled', NEW.job_id, NEW.job_name));
    PERFORM pg_catalog.set_config('broker.last_cancel_count', (v_n OPERATOR(pg_catalog.+) 1)::text, true);
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._jobs_cancel_request() IS
    'Internal trigger: setting cancel_reason on a pending job cancels it and, transitively, its dependents.';

CREATE OR REPLACE TRIGGER broker_jobs_cancel_request_trg
    BEFORE UPDATE OF cancel_reason ON broker.broker_jobs
    FOR EACH ROW
    WHEN (OLD.complete_status OPERATOR(pg_catalog.=) 0 AND NEW.complete_status OPERATOR(pg_catalog.=) 0
          AND OLD.cancel_reason IS NULL AND NEW.cancel_reason IS NOT NULL)
    EXECUTE FUNCTION broker._jobs_cancel_request();
COMMENT ON TRIGGER broker_jobs_cancel_request_trg ON broker.broker_jobs IS
    'A cancel_reason set on a pending job cancels it and its dependents.';
-- source: sql/run/retry.sql
-- sql/run/retry.sql: retrying failed and cancelled jobs by hand (broker_retry_job, the broker_job_actions trigger).
-- ---------------------------------------------------------------------------
-- Function: broker._retry_job(p_job_id, p_run_after, p_with_dependents)
--   A failed or cancelled job goes back to pending with fresh attempts
--   (attempts 0, claimable from p_run_after, default now), and with
--   p_with_dependents every job cancelled because of it (cancel_cause_job_id,
--   transitively: _cancel_dependents records the job that started it) comes
--   back too, each waiting again on what it depends on (pending_deps
--   recounted), so a DAG resumes where it broke. A job brought back that
--   also waits on another failed or cancelled job is cancelled again,
--   because of that one. Pending jobs waiting on the group of a job brought
--   back wait on it again. Returns how many jobs are pending again.
-- Errors: 55000 the job is not failed or cancelled, or it waits on a job
--   that failed or was cancelled (retry that one); 23505 another unfinished
--   job took its idempotency key meanwhile.
--   Calls: _lock_dependency_keys, _jobs_join_groups, _count_pending_deps, _cancel_dependents, _notify_queues
--   Tables: reads broker_job_dependency, writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._retry_job(p_job_id bigint, p_run_after timestamptz, p_with_dependents boolean)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job    broker.broker_jobs;
    v_dep    record;
    v_ids    bigint[];
    v_groups text[];
    v_counts integer[];
    v_queues integer[];
    v_target record;
BEGIN
    SELECT * INTO v_job FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id FOR NO KEY UPDATE;
    IF v_job.complete_status OPERATOR(pg_catalog.<>) ALL (ARRAY[broker._state('failed'), broker._state('cancelled')]) THEN
        RAISE EXCEPTION 'broker_retry_job: job % is %; only failed or cancelled jobs can be retried', p_job_id,
            CASE v_job.complete_status WHEN 0 THEN 'pending' WHEN 1 THEN 'running' ELSE 'completed' END
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT t.job_id, t.complete_status INTO v_dep
      FROM broker.broker_job_dependency AS e
      JOIN broker.broker_jobs AS t ON t.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id
     WHERE e.job_id OPERATOR(pg_catalog.=) p_job_id AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[broker._state('failed'), broker._state('cancelled')])
    UNION ALL
    SELECT t.job_id, t.complete_status
      FROM broker.broker_job_dependency AS e
      JOIN broker.broker_jobs AS t ON t.tenant_id OPERATOR(pg_catalog.=) e.tenant_id
                                  AND t.job_group OPERATOR(pg_catalog.=) e.depends_on_group
     WHERE e.job_id OPERATOR(pg_catalog.=) p_job_id AND t.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[broker._state('failed'), broker._state('cancelled')])
       AND t.job_id OPERATOR(pg_catalog.<>) p_job_id
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'broker_retry_job: job % waits on job %, which %', p_job_id, v_dep.job_id,
            CASE v_dep.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = pg_catalog.format('Retry job %s (with its dependents) instead.', v_dep.job_id);
    END IF;

    v_ids := ARRAY[p_job_id] OPERATOR(pg_catalog.||) CASE WHEN p_with_dependents THEN ARRAY(
        SELECT d.job_id FROM broker.broker_jobs AS d
         WHERE d.cancel_cause_job_id OPERATOR(pg_catalog.=) p_job_id AND d.complete_status OPERATOR(pg_catalog.=) broker._state('cancelled')
         ORDER BY d.job_id) ELSE '{}'::bigint[] END;
    PERFORM FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids) ORDER BY j.job_id FOR NO KEY UPDATE;
    SELECT pg_catalog.array_agg(g.job_group ORDER BY g.job_group), pg_catalog.array_agg(g.n ORDER BY g.job_group)
      INTO v_groups, v_counts
      FROM (SELECT j.job_group, pg_catalog.count(*)::integer AS n FROM broker.broker_jobs AS j
             WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids) GROUP BY j.job_group) AS g;
    -- as finishing or enqueueing a member of these groups would: their keys shared, then the
    -- pending jobs waiting on the groups count the members coming back (still cancelled here)
    PERFORM broker._lock_dependency_keys(v_job.tenant_id, v_groups, NULL, v_ids, NULL);
    PERFORM broker._jobs_join_groups(pg_catalog.array_fill(v_job.tenant_id, ARRAY[pg_catalog.cardinality(v_groups)]),
                                     v_groups, v_counts);
    BEGIN
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'), attempts = 0, pending_deps = 0, finished_at = NULL,
               cancel_reason = NULL, cancel_cause_job_id = NULL,
               run_after = CASE WHEN j.job_id OPERATOR(pg_catalog.=) p_job_id
                                THEN COALESCE(p_run_after, pg_catalog.clock_timestamp()) ELSE j.run_after END
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids);
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'broker_retry_job: another unfinished job has the idempotency key of job % or of a job cancelled because of it',
            p_job_id USING ERRCODE = 'unique_violation';
    END;
    UPDATE broker.broker_jobs AS j
       SET pending_deps = broker._count_pending_deps(j.tenant_id, j.job_id)
     WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids);
    -- what else they wait on that failed or was cancelled cancels them again
    FOR v_target IN
        SELECT DISTINCT x.job_id, x.job_group, x.job_name, x.complete_status
          FROM broker.broker_job_dependency AS e
          JOIN broker.broker_jobs AS x
            ON (x.job_id OPERATOR(pg_catalog.=) e.depends_on_job_id)
            OR (x.tenant_id OPERATOR(pg_catalog.=) e.tenant_id AND x.job_group OPERATOR(pg_catalog.=) e.depends_on_group)
         WHERE e.job_id OPERATOR(pg_catalog.=) ANY (v_ids)
           AND x.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[broker._state('failed'), broker._state('cancelled')])
         ORDER BY x.job_id
    LOOP
        PERFORM broker._cancel_dependents(v_job.tenant_id, v_target.job_id, v_target.job_group,
            pg_catalog.format('dependency job %s (%s) %s', v_target.job_id, v_target.job_name,
                              CASE v_target.complete_status WHEN 3 THEN 'failed' ELSE 'was cancelled' END));
    END LOOP;
    SELECT pg_catalog.array_agg(j.job_queue) INTO v_queues
      FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids) AND j.complete_status OPERATOR(pg_catalog.=) broker._state('pending');
    PERFORM broker._notify_queues(v_queues);
    RETURN pg_catalog.cardinality(COALESCE(v_queues, '{}'));
END;
$$;
COMMENT ON FUNCTION broker._retry_job(bigint, timestamptz, boolean) IS
    'Internal: a failed or cancelled job (and the jobs cancelled because of it) back to pending with fresh attempts; returns how many.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._job_action()
--   AFTER INSERT on broker_job_actions, once the policies accepted the row
--   as the caller's (own tenant, own name, a job it can see): performs it
--   with the broker's rights. cancel: the job must still be running; its
--   runner is told (NOTIFY pgsql_broker '<database>/cancel/<job id>', sent
--   at commit). retry: _retry_job; the number of jobs pending again goes to
--   broker.last_retry_count.
-- Errors: 55000 (cancel) the job is no longer running; _retry_job's.
--   Calls: _notify_cancel, _retry_job
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._job_action()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_status smallint;
BEGIN
    IF NEW.action OPERATOR(pg_catalog.=) 'cancel' THEN
        SELECT j.complete_status INTO v_status FROM broker.broker_jobs AS j WHERE j.job_id OPERATOR(pg_catalog.=) NEW.job_id;
        IF v_status OPERATOR(pg_catalog.<>) broker._state('running') THEN
            RAISE EXCEPTION 'broker_cancel_job: job % is %; a cancel request applies to a running job', NEW.job_id,
                CASE v_status WHEN 0 THEN 'pending' WHEN 2 THEN 'completed' WHEN 3 THEN 'failed' ELSE 'cancelled' END
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'broker.broker_cancel_job() cancels pending and running jobs.';
        END IF;
        PERFORM broker._notify_cancel(NEW.job_id);
    ELSE
        PERFORM pg_catalog.set_config('broker.last_retry_count',
            broker._retry_job(NEW.job_id, NEW.run_after, NEW.with_dependents)::text, true);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._job_action() IS
    'Internal trigger: performs an operator action (cancel request, retry) once the policies accepted it as the caller''s.';

CREATE OR REPLACE TRIGGER broker_job_actions_trg
    AFTER INSERT ON broker.broker_job_actions
    FOR EACH ROW EXECUTE FUNCTION broker._job_action();
COMMENT ON TRIGGER broker_job_actions_trg ON broker.broker_job_actions IS
    'Inserting an action performs it: a cancel request tells the runner, a retry returns the job (and its dependents) to pending.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_retry_job(p_job_id, p_run_after, p_with_dependents)
--   Returns a failed or cancelled job of the caller's tenant to pending with
--   fresh attempts, claimable from p_run_after (NULL: now). With
--   p_with_dependents (default) the jobs that were cancelled because of it,
--   transitively, come back too, so a DAG resumes where it broke. Recorded
--   in broker_job_actions. Returns how many jobs are pending again.
-- Errors: 22004 NULL id or p_with_dependents; P0002 no such job in this
--   tenant; 55000 the job is pending, running or completed, or it waits on
--   a job that failed or was cancelled (the hint names it); 23505 another
--   unfinished job has its idempotency key.
-- Example:
--   SELECT broker.broker_retry_job(42);                               -- and the jobs it cancelled
--   SELECT broker.broker_retry_job(42, now() + interval '10 minutes', false);
--   Calls: broker_current_tenant
--   Tables: reads broker_jobs, writes broker_job_actions
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_retry_job(p_job_id bigint, p_run_after timestamptz DEFAULT NULL,
    p_with_dependents boolean DEFAULT true)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_job_id IS NULL OR p_with_dependents IS NULL THEN
        RAISE EXCEPTION 'broker_retry_job: p_job_id and p_with_dependents must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM FROM broker.broker_jobs AS j
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id AND j.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_retry_job: job % does not exist', p_job_id USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO broker.broker_job_actions (job_id, action, run_after, with_dependents)
    VALUES (p_job_id, 'retry', p_run_after, p_with_dependents);
    RETURN pg_catalog.current_setting('broker.last_retry_count')::integer;
END;
$$;
COMMENT ON FUNCTION broker.broker_retry_job(bigint, timestamptz, boolean) IS
    'Returns a failed or cancelled job (and, by default, the jobs cancelled because of it) to pending with fresh attempts; returns how many.';
-- source: sql/run/recovery.sql
-- sql/run/recovery.sql: recovering jobs whose lease expired or whose server restarted (broker_recover_stale_jobs).
-- ---------------------------------------------------------------------------
-- Function: broker._restart_interruptions_max()
--   How many times a server restart may interrupt a job before a restart
--   counts its attempt after all. Without superuser a job cannot restart the
--   server, but a job that crashes it under restart_after_crash = off (an HA
--   manager then starts it again) would otherwise be retried for ever.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._restart_interruptions_max()
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 5 $$;
COMMENT ON FUNCTION broker._restart_interruptions_max() IS
    'Internal: interruptions after which a server restart counts a job''s attempt (a job that brings the server down is not retried for ever).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_recover_stale_jobs(p_limit)
--   Recovers running jobs that nobody is executing (a job under execution
--   is row-locked by its run until its transaction ends, and locked rows are
--   skipped, however long they run) and that either
--   - were claimed before the server last started: every session of that
--     server ended with it, so the claim is dead whatever its lease says. A
--     restart is not the job's doing (a job cannot restart the server), so
--     the job returns to pending at once as broker_interrupt_jobs returns
--     it: attempt not counted, interruptions + 1, dependents kept (an
--     autonomous job, which holds no row lock while it runs, only once its
--     lease expired). After
--     _restart_interruptions_max() interruptions a restart counts the
--     attempt like an expired lease. A crash restart of the server (a
--     backend killed, say by the kernel's OOM killer) keeps the server's
--     start time: it may be the job's doing and counts as below;
--   - or whose lease expired. When the instance that claimed it is no
--     longer live (_live_instance: its session ended, so the runner was
--     killed or cut off until the server ended its session, and a standby
--     may have taken over), the job returns to pending at once, attempt not
--     counted, interruptions + 1, as above: a runner that is gone cannot
--     tell which of its claims it had started, and the database keeps no
--     mark of it, but a job that ends its own session while its runner
--     lives is counted by that runner (and by the rule below), and after
--     _restart_interruptions_max() interruptions this counts too, so a job
--     that takes its runner down is not retried for ever. Otherwise (the
--     claiming runner lives, or the job is autonomous, whose run has a
--     session of its own that may outlive its runner, or the claim named no
--     instance: tasks) the lost attempt counts (the session may have ended
--     by the job's own doing): pending again (after the retry backoff)
--     while attempts < max_attempts, else failed with its dependents
--     cancelled.
--   Returns (job_id, complete_status) per job.
-- Errors: 22023 p_limit < 1.
-- Example:
--   SELECT * FROM broker.broker_recover_stale_jobs();
--   Calls: _fail_attempt, broker_interrupt_jobs, _restart_interruptions_max, _live_instance
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_recover_stale_jobs(p_limit integer DEFAULT 1000)
RETURNS TABLE (job_id bigint, complete_status smallint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r          record;
    v_started  timestamptz := pg_catalog.pg_postmaster_start_time();
    v_live     bigint := broker._live_instance();
    v_ids      bigint[] := '{}';
    v_tokens   uuid[] := '{}';
BEGIN
    IF p_limit IS NULL OR p_limit OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_recover_stale_jobs: p_limit must be >= 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR r IN
        SELECT j.job_id, j.lease_expires_at, j.lease_instance_id, j.lease_token, j.interruptions,
               j.started_at OPERATOR(pg_catalog.<) v_started AS before_start,
               (j.started_at OPERATOR(pg_catalog.<) v_started OR g.claimer_gone)
               AND j.interruptions OPERATOR(pg_catalog.<) broker._restart_interruptions_max() AS restarted,
               g.claimer_gone
          FROM broker.broker_jobs AS j
         CROSS JOIN LATERAL (SELECT j.lease_instance_id IS NOT NULL AND j.lease_instance_id IS DISTINCT FROM v_live
                                    AND NOT j.autonomous AS claimer_gone) AS g
         WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
           AND (j.lease_expires_at OPERATOR(pg_catalog.<) pg_catalog.clock_timestamp()
                -- (an autonomous job holds no row lock while it runs: it waits for its lease, so that a
                -- clock stepped back past the server's start cannot hand a running one to another worker)
                OR (j.started_at OPERATOR(pg_catalog.<) v_started AND NOT j.autonomous))
         ORDER BY j.lease_expires_at
         LIMIT p_limit
           FOR NO KEY UPDATE OF j SKIP LOCKED
    LOOP
        IF r.restarted THEN
            v_ids := v_ids OPERATOR(pg_catalog.||) r.job_id;
            v_tokens := v_tokens OPERATOR(pg_catalog.||) r.lease_token;
            CONTINUE;
        END IF;
        job_id := r.job_id;
        complete_status := broker._fail_attempt(r.job_id, NULL, CASE WHEN r.before_start
            THEN pg_catalog.format('the server restarted at %s while the job was claimed (instance %s), and it was '
                                   'interrupted %s times before: this time the attempt counts',
                                   v_started, COALESCE(r.lease_instance_id::text, 'unknown'), r.interruptions)
            WHEN r.claimer_gone
            THEN pg_catalog.format('lease expired at %s, no session was executing the job and its instance %s is gone; '
                                   'it was interrupted %s times before: this time the attempt counts',
                                   r.lease_expires_at, r.lease_instance_id, r.interruptions)
            ELSE pg_catalog.format('lease expired at %s and no session was executing the job (instance %s)',
                                   r.lease_expires_at, COALESCE(r.lease_instance_id::text, 'unknown')) END);
        RETURN NEXT;
    END LOOP;
    IF pg_catalog.cardinality(v_ids) OPERATOR(pg_catalog.>) 0 THEN
        -- (a statement of its own: a join in the interrupting statement would read the rows before it)
        SELECT pg_catalog.array_agg(i.job_id) INTO v_ids FROM broker.broker_interrupt_jobs(v_ids, v_tokens) AS i;
        RETURN QUERY SELECT j.job_id, j.complete_status FROM broker.broker_jobs AS j
                      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (v_ids);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker.broker_recover_stale_jobs(integer) IS
    'Returns to pending running jobs that no session is executing: without counting the attempt when they were claimed before the server last started, or when their lease expired and the instance that claimed them is gone (up to 5 interruptions); when their lease expired under a live claimer, counting the lost attempt (failed when attempts are spent); returns (job_id, new complete_status).';
-- source: sql/tasks/queues.sql
-- sql/tasks/queues.sql: each task name's claim queue (broker_task_queue).
-- ---------------------------------------------------------------------------
-- Function: broker._task_queue_is(p_task, p_job_queue)
--   Whether p_job_queue is task p_task's queue: the insert policy of
--   broker_jobs holds every task row to it, so that a claim of a name
--   (broker_claim_tasks) only ever returns tasks of that name.
--   Calls: none
--   Tables: reads broker_task_queue
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_queue_is(p_task text, p_job_queue integer)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM broker.broker_task_queue AS q
                    WHERE q.task_name OPERATOR(pg_catalog.=) p_task
                      AND q.job_queue OPERATOR(pg_catalog.=) p_job_queue)
$$;
COMMENT ON FUNCTION broker._task_queue_is(text, integer) IS
    'Policy helper: whether a queue is the task name''s own (broker_task_queue).';

-- ---------------------------------------------------------------------------
-- Function: broker._task_queue_of(p_fn, p_task)
--   Task p_task's queue, made on its first enqueue, whichever tenant uses
--   the name (a definer's: a tenant sees only the names it uses). Checks the
--   name: 22004 NULL, 22023 blank or over 200 characters (as p_fn's
--   p_task).
--   Calls: _check_task_name
--   Tables: reads and writes broker_task_queue
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_queue_of(p_fn text, p_task text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue integer;
BEGIN
    PERFORM broker._check_task_name(p_fn, 'p_task', p_task);
    SELECT q.job_queue INTO v_queue FROM broker.broker_task_queue AS q WHERE q.task_name OPERATOR(pg_catalog.=) p_task;
    IF FOUND THEN
        RETURN v_queue;
    END IF;
    INSERT INTO broker.broker_task_queue AS q (task_name) VALUES (p_task)
    ON CONFLICT (task_name) DO NOTHING
    RETURNING q.job_queue INTO v_queue;
    IF v_queue IS NULL THEN  -- a concurrent first enqueue of the name made it
        SELECT q.job_queue INTO v_queue FROM broker.broker_task_queue AS q WHERE q.task_name OPERATOR(pg_catalog.=) p_task;
    END IF;
    RETURN v_queue;
END;
$$;
COMMENT ON FUNCTION broker._task_queue_of(text, text) IS
    'Internal: a task name''s queue (negative), made on its first enqueue; checks the name.';

-- ---------------------------------------------------------------------------
-- Function: broker._task_queue(p_fn, p_task, p_use)
--   Task p_task's queue (_task_queue_of), and with p_use the name recorded
--   as used by the current tenant (broker_task_name_tenant: a tenant sees
--   the names it uses only), so callers set the call's tenant first (an
--   administrator's pause for every tenant is no tenant's use). SECURITY
--   INVOKER: the use is written with the caller's rights, under the insert
--   policy of broker_task_name_tenant, by the role the enqueue's policies
--   check (CURRENT_USER: inside a job, its run_as; inside a SECURITY
--   DEFINER function, its owner), and only for a role that may act for the
--   tenant (_tenant_allowed) or an administrator. A call whose enqueue then
--   fails (a bad option) rolls its record back with it.
--   Calls: _task_queue_of, broker_current_tenant, _tenant_allowed, _is_broker_admin
--   Tables: writes broker_task_name_tenant; broker_task_queue (through _task_queue_of)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_queue(p_fn text, p_task text, p_use boolean)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue  integer := broker._task_queue_of(p_fn, p_task);
    v_tenant text;
BEGIN
    IF NOT p_use THEN
        RETURN v_queue;
    END IF;
    v_tenant := broker.broker_current_tenant();
    -- (a probe of the key first: after the tenant's first use of the name, an enqueue writes and checks
    -- nothing more here)
    IF EXISTS (SELECT FROM broker.broker_task_name_tenant AS u
                WHERE u.tenant_id OPERATOR(pg_catalog.=) v_tenant AND u.task_name OPERATOR(pg_catalog.=) p_task) THEN
        RETURN v_queue;
    END IF;
    -- a use only by a role that may act for the tenant, as its enqueue's policies require (this
    -- function is callable directly, and must not record names as another tenant's)
    IF broker._tenant_allowed(v_tenant, CURRENT_USER) OR broker._is_broker_admin(CURRENT_USER) THEN
        INSERT INTO broker.broker_task_name_tenant AS u (tenant_id, task_name) VALUES (v_tenant, p_task)
        ON CONFLICT (tenant_id, task_name) DO NOTHING;
    END IF;
    RETURN v_queue;
END;
$$;
COMMENT ON FUNCTION broker._task_queue(text, text, boolean) IS
    'Internal: a task name''s queue (negative), made on its first enqueue, and (p_use) the name recorded as the current tenant''s, as the caller; checks the name.';

-- ---------------------------------------------------------------------------
-- Function: broker._check_task_name(p_fn, p_param, p_task)
--   Raises 22004 for a NULL task name, 22023 for a blank one or one over 200
--   characters, naming p_fn and its parameter p_param.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._check_task_name(p_fn text, p_param text, p_task text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_task IS NULL THEN
        RAISE EXCEPTION '%: % must not be NULL', p_fn, p_param USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_task) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_task) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION '%: % must be 1 to 200 characters and not blank', p_fn, p_param
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._check_task_name(text, text, text) IS
    'Internal: checks a task name (22004 NULL, 22023 blank or over 200 characters).';
-- source: sql/tasks/add_task.sql
-- sql/tasks/add_task.sql: enqueueing a task, a job run by application code (broker_add_task).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_task(p_task, p_args, p_priority,
--     p_depends_on_job_ids, p_idempotency_key, p_max_attempts, p_job_group,
--     p_depends_on_groups, p_run_after, p_timeout, p_tenant_id,
--     p_concurrency_key)
--   Enqueues task p_task with arguments p_args (any JSON value) for the
--   caller's tenant and returns (job_id, is_new). A task is a row of
--   broker_jobs (job_language 'task', job_name the task name, execute_str
--   its arguments) under every rule of a job: dependencies by id and group
--   both ways with SQL jobs, idempotency keys, retries with backoff,
--   priorities, delays, timeouts, cancel, retry, tenancy, fair share and the
--   limits of its concurrency key. No runner runs it: a worker claims it by
--   name (broker_claim_tasks) and ends it (broker_complete_task,
--   broker_fail_task). Its queue is its name's (broker_task_queue), so a
--   name's backlog never slows the claims of another; priority orders a
--   tenant's tasks of one name. The other parameters are broker_add_job's,
--   with its defaults and errors. SECURITY INVOKER, as broker_add_job: the
--   row is written with the caller's rights, under the policies.
-- Errors: 22004 NULL task or arguments; 22023 a task name blank or over 200
--   characters; those of broker_add_job.
-- Example:
--   SELECT * FROM broker.broker_add_task('send_email', '{"to": "ada@example.com"}',
--                                     p_max_attempts => 5, p_depends_on_job_ids => ARRAY[41]);
--   Calls: _call_tenant, _task_queue, broker_add_job, _end_call_tenant
--   Tables: writes broker_jobs (through broker_add_job), broker_task_queue and broker_task_name_tenant
--     (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_task(
    p_task               text,
    p_args               jsonb       DEFAULT '{}',
    p_priority           integer     DEFAULT 0,
    p_depends_on_job_ids bigint[]    DEFAULT NULL,
    p_idempotency_key    text        DEFAULT NULL,
    p_max_attempts       integer     DEFAULT 1,
    p_job_group          text        DEFAULT NULL,
    p_depends_on_groups  text[]      DEFAULT NULL,
    p_run_after          timestamptz DEFAULT NULL,
    p_timeout            interval    DEFAULT NULL,
    p_tenant_id          text        DEFAULT NULL,
    p_concurrency_key    text        DEFAULT NULL)
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- (the tenant the call names first: the name is recorded as that tenant's, _task_queue)
    v_saved text := broker._call_tenant('broker_add_task', p_tenant_id);
    v_queue integer := broker._task_queue('broker_add_task', p_task, true);
BEGIN
    IF p_args IS NULL THEN
        RAISE EXCEPTION 'broker_add_task: p_args must not be NULL' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Give ''{}'' for a task without arguments.';
    END IF;
    RETURN QUERY
    SELECT a.job_id, a.is_new
      FROM broker.broker_add_job(p_task, p_args::text, v_queue, p_priority, 'task',
                                 p_depends_on_job_ids => p_depends_on_job_ids,
                                 p_idempotency_key => p_idempotency_key,
                                 p_max_attempts => p_max_attempts,
                                 p_job_group => p_job_group,
                                 p_depends_on_groups => p_depends_on_groups,
                                 p_run_after => p_run_after,
                                 p_timeout => p_timeout,
                                 p_search_path => '',
                                 p_tenant_id => p_tenant_id,
                                 p_concurrency_key => p_concurrency_key) AS a;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
END;
$$;
COMMENT ON FUNCTION broker.broker_add_task(text, jsonb, integer, bigint[], text, integer, text, text[], timestamptz, interval, text, text) IS
    'Enqueues a task (a job run by application code, claimed by name with broker_claim_tasks) with JSON arguments and broker_add_job''s options; returns (job_id, is_new).';

-- ---------------------------------------------------------------------------
-- Function: broker._tasks_as_jobs(p_jobs)
--   For broker_add_jobs: p_jobs (a JSON array) with every task element, an
--   object with the key task (its name) and args (its arguments, any JSON
--   value, default {}), written as the job fields broker_add_task gives a
--   task: job_name the name, execute_str the arguments, job_language task,
--   job_queue the name's queue (made on its first enqueue). Its other keys
--   (priority, dependencies, idempotency key, ...) are broker_add_jobs' own.
--   The other elements are returned as they are, in their order.
-- Errors: 22023 a task element whose task is not a JSON string, or that
--   names job_name, execute_str, job_language, job_queue, run_as,
--   search_path or autonomous (a task has no SQL and no executor); 22004 /
--   22023 a NULL, blank or over-long name (_check_task_name), each naming
--   the element.
--   Calls: _check_task_name, _task_queue
--   Tables: reads and writes broker_task_queue, broker_task_name_tenant (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._tasks_as_jobs(p_jobs jsonb)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_not_for_tasks CONSTANT text[] := ARRAY['job_name', 'execute_str', 'job_language', 'job_queue', 'run_as',
                                             'search_path', 'autonomous'];
    r       record;
    v_name  text;
    v_queue integer;
    a_names  text[] := '{}';     -- the names met so far ...
    a_queues integer[] := '{}';  -- ... and their queues (a batch names a few, each looked up once)
    a_out   jsonb[] := '{}';
BEGIN
    FOR r IN SELECT e.v, e.o FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(v, o) ORDER BY e.o LOOP
        IF pg_catalog.jsonb_typeof(r.v) OPERATOR(pg_catalog.<>) 'object' OR NOT r.v OPERATOR(pg_catalog.?) 'task' THEN
            a_out := a_out OPERATOR(pg_catalog.||) r.v;
            CONTINUE;
        END IF;
        IF pg_catalog.jsonb_typeof(r.v OPERATOR(pg_catalog.->) 'task') OPERATOR(pg_catalog.<>) 'string' THEN
            RAISE EXCEPTION 'broker_add_jobs: element %: task must be a JSON string (the task name), got a JSON %',
                r.o, pg_catalog.jsonb_typeof(r.v OPERATOR(pg_catalog.->) 'task') USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF r.v OPERATOR(pg_catalog.?|) c_not_for_tasks THEN
            RAISE EXCEPTION 'broker_add_jobs: element %: a task (key task) takes no %', r.o,
                pg_catalog.array_to_string(ARRAY(SELECT k FROM pg_catalog.unnest(c_not_for_tasks) AS k
                                                  WHERE r.v OPERATOR(pg_catalog.?) k), ', ')
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Its name is task and its arguments args; it has no SQL, queue number or executor.';
        END IF;
        v_name := r.v OPERATOR(pg_catalog.->>) 'task';
        PERFORM broker._check_task_name('broker_add_jobs', pg_catalog.format('element %s: task', r.o), v_name);
        v_queue := a_queues[pg_catalog.array_position(a_names, v_name)];
        IF v_queue IS NULL THEN
            v_queue := broker._task_queue('broker_add_jobs', v_name, true);
            a_names := a_names OPERATOR(pg_catalog.||) v_name;
            a_queues := a_queues OPERATOR(pg_catalog.||) v_queue;
        END IF;
        a_out := a_out OPERATOR(pg_catalog.||)
                 ((r.v OPERATOR(pg_catalog.-) 'task' OPERATOR(pg_catalog.-) 'args')
                  OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
                      'job_name', v_name,
                      'execute_str', COALESCE(r.v OPERATOR(pg_catalog.->) 'args', '{}'::jsonb)::text,
                      'job_language', 'task',
                      'job_queue', v_queue));
    END LOOP;
    RETURN pg_catalog.to_jsonb(a_out);
END;
$$;
COMMENT ON FUNCTION broker._tasks_as_jobs(jsonb) IS
    'Internal: broker_add_jobs'' task elements ({"task": name, "args": value, ...}) written as the job fields of a task.';
-- source: sql/tasks/claim.sql
-- sql/tasks/claim.sql: claiming tasks by name (broker_claim_tasks).
-- ---------------------------------------------------------------------------
-- Function: broker._task_actor()
--   The role a task function acts for under strict tenancy: the role the
--   session set (SET ROLE), else its login (SESSION_USER). The task
--   functions are SECURITY DEFINER, so CURRENT_USER inside them is their
--   owner; a policy would check the caller's current role, and so does
--   this, as far as a definer can see it: a session that narrows itself
--   with SET ROLE to one tenant's worker role acts for that tenant only, as
--   it would through any other broker function.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_actor()
RETURNS name
LANGUAGE sql STABLE
-- (no SET clause, so that it is inlined into the task functions that call it at every claim and
-- completion; everything in it is qualified: sql/pgspot-no-search-path.txt)
AS $$
    -- ('role' shows the SET ROLE of the session, 'none' without one; a SECURITY DEFINER
    -- function's owner does not change it)
    SELECT CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none' THEN SESSION_USER
                ELSE pg_catalog.current_setting('role')::pg_catalog.name END
$$;
COMMENT ON FUNCTION broker._task_actor() IS
    'Internal: the role a task function acts for under strict tenancy (the session''s SET ROLE, else its login).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_claim_tasks(p_tasks, p_limit, p_lease_seconds)
--   Claims up to p_limit ready tasks named in p_tasks for the caller's
--   tenant (broker.tenant_id; under strict tenancy the worker's role, its
--   SET ROLE else its login (_task_actor), must be mapped to it, as an
--   enqueuer's is). Each becomes running with one
--   more attempt and a lease of p_lease_seconds (default: setting
--   lease_seconds, else 60), which the worker renews (broker_extend_task)
--   while it runs; a lease that runs out while nobody renews it is
--   recovered as a SQL job's is (the runner's maintenance). Each name is a
--   queue of its own (broker_task_queue), claimed with the claim of SQL
--   jobs (broker._claim: priority then age, parked and blocked tasks left
--   out, key limits applied, locked rows skipped); names share a claim
--   starting from a name that moves from claim to claim. Returns one row per
--   claimed task: its id, name, arguments, tenant, attempt number, attempts
--   allowed, lease token and expiry, its timeout (NULL: none), which the
--   worker applies, and its enqueuer's trace context (traceparent, NULL:
--   none; the parent of the worker's span of the attempt). Unknown names claim nothing.
--   A task is handed out only while its enqueuer may still have it run, as
--   a SQL job is run only then (_authority_lost: the enqueuer still exists,
--   still acts for the tenant under strict tenancy, still may use run_as):
--   otherwise the claim fails it for good (3, whatever attempts are left)
--   with 42501 and the reason, cancels its dependents and does not return
--   it (its room in this claim is not filled again: the next claim's is).
-- Errors: 22004 NULL p_tasks or a NULL name; 22023 no name or more than 100,
--   a blank name or one over 200 characters, p_limit outside 1..1000, a
--   lease outside 1..3600 seconds; 42501 the worker's role may not act for the
--   tenant (strict tenancy).
-- Example:
--   SELECT * FROM broker.broker_claim_tasks(ARRAY['send_email', 'resize_image'], 10);
--   Calls: _check_task_name, _setting_int, _task_actor, _tenant_allowed, _claim, _check_lease_seconds,
--     _authority_lost, _record_attempts, _fail_job
--   Tables: reads broker_task_queue; writes broker_jobs (through _claim, _fail_job),
--     broker_job_attempts (through _record_attempts)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_claim_tasks(
    p_tasks         text[],
    p_limit         integer DEFAULT 1,
    p_lease_seconds integer DEFAULT NULL)
RETURNS TABLE (
    job_id           bigint,
    task             text,
    args             jsonb,
    tenant_id        text,
    attempt          integer,
    max_attempts     integer,
    lease_token      uuid,
    lease_expires_at timestamptz,
    timeout          interval,
    traceparent      text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- (its statements' plans do not depend on the names or the limit asked: planned once, not at each call)
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_tenant text := broker.broker_current_tenant();
    v_lease  integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
    v_left   integer := p_limit;
    v_actor  name := broker._task_actor();
    v_name   text;
    v_queues integer[];
    v_turn   bigint := 0;
    v_got    integer;
    n        integer;
    i        integer;
    r        record;
    v_who    text;     -- the enqueuer and run_as last checked (a claim's tasks mostly share them) ...
    v_denied text;     -- ... and why that enqueuer may no longer have them run (_authority_lost), NULL: it may
BEGIN
    IF p_tasks IS NULL THEN
        RAISE EXCEPTION 'broker_claim_tasks: p_tasks must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF COALESCE(pg_catalog.cardinality(p_tasks), 0) OPERATOR(pg_catalog.<) 1
       OR pg_catalog.cardinality(p_tasks) OPERATOR(pg_catalog.>) 100 OR pg_catalog.array_ndims(p_tasks) OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'broker_claim_tasks: p_tasks must name 1 to 100 tasks, got %', COALESCE(pg_catalog.cardinality(p_tasks), 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH v_name IN ARRAY p_tasks LOOP
        PERFORM broker._check_task_name('broker_claim_tasks', 'a task name in p_tasks', v_name);
    END LOOP;
    IF p_limit IS NULL OR p_limit OPERATOR(pg_catalog.<) 1 OR p_limit OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION 'broker_claim_tasks: p_limit must be 1 to 1000, got %', COALESCE(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._check_lease_seconds('broker_claim_tasks', v_lease,
        'Renew it while the task runs (broker_extend_task): it only bounds how long a crashed worker holds its tasks.');
    IF NOT broker._tenant_allowed(v_tenant, v_actor) THEN
        RAISE EXCEPTION 'broker_claim_tasks: role % may not act for tenant %', pg_catalog.quote_ident(v_actor),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
    END IF;

    v_queues := ARRAY(SELECT q.job_queue FROM broker.broker_task_queue AS q
                       WHERE q.task_name OPERATOR(pg_catalog.=) ANY (p_tasks) ORDER BY q.job_queue DESC);
    n := pg_catalog.cardinality(v_queues);
    IF n OPERATOR(pg_catalog.>) 1 THEN
        -- where this claim starts among the names: moves from claim to claim, so that no name's
        -- backlog always fills the claim first
        v_turn := COALESCE(NULLIF(pg_catalog.current_setting('broker.task_turn', true), '')::bigint, 0) OPERATOR(pg_catalog.+) 1;
        PERFORM pg_catalog.set_config('broker.task_turn', v_turn::text, true);
        v_turn := (pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint OPERATOR(pg_catalog.+) v_turn)
                  OPERATOR(pg_catalog.%) n;
    END IF;
    FOR i IN 0 .. n OPERATOR(pg_catalog.-) 1 LOOP
        v_got := 0;
        -- (the claimed rows as the claim's UPDATE returns them, in its order: no second read)
        FOR r IN
            SELECT c.job_id, c.job_name, c.execute_str, c.tenant_id, c.attempts, c.max_attempts,
                   c.lease_token, c.lease_expires_at, c.job_timeout, c.traceparent, c.enqueued_by, c.run_as
              FROM broker._claim(v_queues[1 OPERATOR(pg_catalog.+) ((v_turn OPERATOR(pg_catalog.+) i) OPERATOR(pg_catalog.%) n)],
                                 NULL, v_lease, v_left, NULL, v_tenant) AS c
        LOOP
            v_got := v_got OPERATOR(pg_catalog.+) 1;
            IF v_who IS DISTINCT FROM pg_catalog.format('%I %I', r.enqueued_by, r.run_as) THEN
                v_who := pg_catalog.format('%I %I', r.enqueued_by, r.run_as);
                v_denied := broker._authority_lost(r.enqueued_by, v_tenant, r.run_as, 'enqueuer');
            END IF;
            IF v_denied IS NOT NULL THEN
                -- losing a right is no passing fault: failed for good, as broker_run fails a SQL job
                PERFORM broker._record_attempts(ARRAY[r.job_id], 'failed', ARRAY['42501'], ARRAY[v_denied]);
                PERFORM broker._fail_job(r.job_id, '42501', v_denied);
                CONTINUE;
            END IF;
            job_id := r.job_id;
            task := r.job_name;
            args := r.execute_str::jsonb;
            tenant_id := r.tenant_id;
            attempt := r.attempts;
            max_attempts := r.max_attempts;
            lease_token := r.lease_token;
            lease_expires_at := r.lease_expires_at;
            timeout := r.job_timeout;
            traceparent := r.traceparent;
            RETURN NEXT;
        END LOOP;
        v_left := v_left OPERATOR(pg_catalog.-) v_got;
        EXIT WHEN v_left OPERATOR(pg_catalog.<=) 0;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_claim_tasks(text[], integer, integer) IS
    'Claims up to p_limit ready tasks of the named kinds for the caller''s tenant, each with a lease; returns (job_id, task, args, tenant_id, attempt, max_attempts, lease_token, lease_expires_at, timeout, traceparent).';
-- source: sql/tasks/finish.sql
-- sql/tasks/finish.sql: a worker's heartbeat and the end of a task (broker_extend_task,
-- broker_complete_task, broker_fail_task).
-- ---------------------------------------------------------------------------
-- Function: broker._task_leases(p_fn, p_job_ids, p_lease_tokens)
--   Of the caller's claimed tasks p_job_ids, those whose lease is still the
--   token given with each (in p_job_ids' order), every one of them locked
--   (FOR NO KEY UPDATE, in job_id order) until the caller's transaction
--   ends; a task whose lease expired and was recovered, claimed again or
--   ended is left out. Only tasks of the caller's tenant are found, and
--   under strict tenancy only by a role mapped to it (_task_actor).
-- Errors: 22004 a NULL array, id or token; 22023 arrays of different
--   lengths or more than 1,000, or a task named twice (each would be ended
--   once per repetition: an attempt row each); 42501 the role may not act
--   for the tenant; P0002 a task not of the tenant (as p_fn).
--   Calls: _check_lease_args, broker_current_tenant, _tenant_allowed, _task_actor
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_leases(p_fn text, p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS bigint[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_tenant  text := broker.broker_current_tenant();
    v_missing bigint;
    v_twice   bigint;
BEGIN
    PERFORM broker._check_lease_args(p_fn, p_job_ids, p_lease_tokens);
    IF pg_catalog.array_position(p_job_ids, NULL) IS NOT NULL OR pg_catalog.array_position(p_lease_tokens, NULL) IS NOT NULL THEN
        RAISE EXCEPTION '%: p_job_id and p_lease_token must not be NULL', p_fn USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1 THEN
        SELECT u.id INTO v_twice FROM pg_catalog.unnest(p_job_ids) AS u(id) GROUP BY u.id
        HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 ORDER BY u.id LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '%: task % is named more than once', p_fn, v_twice USING ERRCODE = 'invalid_parameter_value',
                HINT = 'Name each task once, with its lease token.';
        END IF;
    END IF;
    IF NOT broker._tenant_allowed(v_tenant, broker._task_actor()) THEN
        RAISE EXCEPTION '%: role % may not act for tenant %', p_fn, pg_catalog.quote_ident(broker._task_actor()),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM FROM broker.broker_jobs AS j
      WHERE j.job_id OPERATOR(pg_catalog.=) ANY (p_job_ids)
        AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant
        AND j.job_language OPERATOR(pg_catalog.=) 'task'
      ORDER BY j.job_id
        FOR NO KEY UPDATE;
    SELECT u.id INTO v_missing FROM pg_catalog.unnest(p_job_ids) AS u(id)
     WHERE NOT EXISTS (SELECT FROM broker.broker_jobs AS j
                        WHERE j.job_id OPERATOR(pg_catalog.=) u.id
                          AND j.tenant_id OPERATOR(pg_catalog.=) v_tenant
                          AND j.job_language OPERATOR(pg_catalog.=) 'task')
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: task % does not exist', p_fn, v_missing USING ERRCODE = 'no_data_found';
    END IF;
    RETURN ARRAY(SELECT u.id FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) WITH ORDINALITY AS u(id, token, o)
                  WHERE EXISTS (SELECT FROM broker.broker_jobs AS j
                                 WHERE j.job_id OPERATOR(pg_catalog.=) u.id
                                   AND j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
                                   AND j.lease_token OPERATOR(pg_catalog.=) u.token)
                  ORDER BY u.o);
END;
$$;
COMMENT ON FUNCTION broker._task_leases(text, bigint[], uuid[]) IS
    'Internal: of the caller''s claimed tasks, those whose lease is still the token''s, locked; P0002 for a task not of the tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker._task_lease(p_fn, p_job_id, p_lease_token)
--   Whether the caller's claimed task p_job_id is still under lease
--   p_lease_token, locked until the caller's transaction ends
--   (_task_leases of one task, with its errors).
--   Calls: _task_leases
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._task_lease(p_fn text, p_job_id bigint, p_lease_token uuid)
RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.cardinality(broker._task_leases(p_fn, ARRAY[p_job_id], ARRAY[p_lease_token])) OPERATOR(pg_catalog.>) 0
$$;
COMMENT ON FUNCTION broker._task_lease(text, bigint, uuid) IS
    'Internal: whether the caller''s claimed task is still under the token''s lease (locked); P0002 for a task not of the tenant.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_extend_task(p_job_id, p_lease_token, p_lease_seconds)
--   The heartbeat of a running task: its lease runs p_lease_seconds (default:
--   setting lease_seconds, else 60) from now. Returns 'extended'; 'cancelled'
--   when a cancel request was made for this attempt (broker_cancel_job: the
--   lease is extended, so that the worker can stop the handler and call
--   broker_fail_task, which ends the task cancelled); 'lost' when the lease
--   is no longer the token's (the worker must stop and roll back: the task
--   is someone else's).
-- Errors: those of _task_lease; 22023 a lease outside 1..3600 seconds.
-- Example:
--   SELECT broker.broker_extend_task(42, '9b2f...'::uuid, 60);
--   Calls: _setting_int, _task_lease, _cancel_requested, _check_lease_seconds
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_extend_task(p_job_id bigint, p_lease_token uuid, p_lease_seconds integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease integer := COALESCE(p_lease_seconds, broker._setting_int('lease_seconds', 60, 1));
BEGIN
    PERFORM broker._check_lease_seconds('broker_extend_task', v_lease);
    IF NOT broker._task_lease('broker_extend_task', p_job_id, p_lease_token) THEN
        RETURN 'lost';
    END IF;
    UPDATE broker.broker_jobs AS j
       SET lease_expires_at = pg_catalog.statement_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => v_lease)
     WHERE j.job_id OPERATOR(pg_catalog.=) p_job_id;
    RETURN CASE WHEN broker._cancel_requested(p_job_id) IS NULL THEN 'extended' ELSE 'cancelled' END;
END;
$$;
COMMENT ON FUNCTION broker.broker_extend_task(bigint, uuid, integer) IS
    'The heartbeat of a running task: renews its lease; returns extended, cancelled (a cancel request: stop, then broker_fail_task) or lost.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_complete_task(p_job_id, p_lease_token, p_output)
--   Completes a running task: its attempt is recorded with p_output (its
--   JSON text, at most 2,000 characters) and the jobs waiting on it are
--   released, as a SQL job's completion does. Called in the transaction
--   where the worker wrote the task's effects, they commit together or not
--   at all. Returns true; false when the lease is no longer the token's:
--   the worker must then roll back (the task was recovered and may run
--   again, or another worker holds it).
-- Errors: those of _task_lease; 57014 a cancel request was made for this
--   attempt (roll back, then call broker_fail_task: the task ends cancelled).
-- Example:
--   BEGIN; INSERT INTO mail_log ...; SELECT broker.broker_complete_task(42, '9b2f...'::uuid, '{"sent": true}'); COMMIT;
--   Calls: _task_lease, _cancel_requested, _record_attempts, _complete_job
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_complete_task(p_job_id bigint, p_lease_token uuid, p_output jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_reason text;
BEGIN
    IF NOT broker._task_lease('broker_complete_task', p_job_id, p_lease_token) THEN
        RETURN false;
    END IF;
    v_reason := broker._cancel_requested(p_job_id);
    IF v_reason IS NOT NULL THEN
        RAISE EXCEPTION 'broker_complete_task: task % was cancelled while it ran: %', p_job_id, v_reason
            USING ERRCODE = 'query_canceled',
                  HINT = 'Roll back, then call broker_fail_task: the task ends cancelled.';
    END IF;
    PERFORM broker._record_attempts(ARRAY[p_job_id], 'completed', NULL, NULL,
                                    ARRAY[pg_catalog.chr(31) OPERATOR(pg_catalog.||) COALESCE(p_output::text, '')]);
    PERFORM broker._complete_job(p_job_id);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_complete_task(bigint, uuid, jsonb) IS
    'Completes a running task (its output recorded, its dependents released) in the caller''s transaction, with the task''s own writes; false when the lease was lost (roll back).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_fail_task(p_job_id, p_lease_token, p_error, p_retry)
--   Ends a running task's attempt as failed with message p_error: with
--   p_retry (default) it runs again after the retry backoff while it has
--   attempts left, else it fails for good and its dependents are cancelled,
--   as for a SQL job (SQLSTATE 38000, an error in application code). An
--   attempt with a cancel request ends the task cancelled instead. Returns
--   true; false when the lease is no longer the token's.
-- Errors: those of _task_lease; 22004 NULL p_retry.
-- Example:
--   SELECT broker.broker_fail_task(42, '9b2f...'::uuid, 'SMTP 451: try again later');
--   Calls: _task_lease, _cancel_requested, _record_attempts, _end_cancelled, _fail_attempt, _fail_job
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_fail_task(p_job_id bigint, p_lease_token uuid, p_error text, p_retry boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_message text := COALESCE(NULLIF(pg_catalog.btrim(p_error), ''), 'the task failed');
    v_reason  text;
BEGIN
    IF p_retry IS NULL THEN
        RAISE EXCEPTION 'broker_fail_task: p_retry must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT broker._task_lease('broker_fail_task', p_job_id, p_lease_token) THEN
        RETURN false;
    END IF;
    v_reason := broker._cancel_requested(p_job_id);
    IF v_reason IS NOT NULL THEN
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'cancelled', ARRAY['57014'], ARRAY[v_message]);
        PERFORM broker._end_cancelled(p_job_id, v_reason);
    ELSIF p_retry THEN
        PERFORM broker._fail_attempt(p_job_id, '38000', v_message);
    ELSE
        PERFORM broker._record_attempts(ARRAY[p_job_id], 'failed', ARRAY['38000'], ARRAY[v_message]);
        PERFORM broker._fail_job(p_job_id, '38000', v_message);
    END IF;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_fail_task(bigint, uuid, text, boolean) IS
    'Ends a running task''s attempt as failed: retried after the backoff while attempts are left (p_retry), else failed for good with its dependents cancelled; false when the lease was lost.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_release_task(p_job_id, p_lease_token)
--   A worker hands back a claimed task it will not run, or whose handler it
--   stopped at its shutdown deadline (its transaction rolled back, so
--   nothing of the attempt is left): the task returns to pending at once,
--   the attempt not counted, interruptions + 1, as the runner's hand-back of
--   SQL jobs (broker_interrupt_jobs). Returns true; false when the lease is
--   no longer the token's.
-- Errors: those of _task_lease.
-- Example:
--   SELECT broker.broker_release_task(42, '9b2f...'::uuid);
--   Calls: _task_lease, broker_interrupt_jobs
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_release_task(p_job_id bigint, p_lease_token uuid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT broker._task_lease('broker_release_task', p_job_id, p_lease_token) THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT FROM broker.broker_interrupt_jobs(ARRAY[p_job_id], ARRAY[p_lease_token]));
END;
$$;
COMMENT ON FUNCTION broker.broker_release_task(bigint, uuid) IS
    'Hands back a claimed task (a worker''s shutdown): pending again at once, the attempt not counted; false when the lease was lost.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_complete_tasks(p_job_ids, p_lease_tokens, p_outputs)
--   Completes many running tasks at once, for a worker whose handlers wrote
--   nothing in their transactions (nothing to commit with each): one
--   statement and one commit for all, their attempts recorded with their
--   outputs and their dependents released as by broker_complete_task.
--   Returns each task's outcome: 'completed'; 'lost' (the lease is no longer
--   the token's: nothing done); 'cancelled' (a cancel request was made for
--   the attempt: it ends cancelled, not completed). Rows come in p_job_ids'
--   order.
-- Errors: those of _task_lease (a task not of the caller's tenant: P0002);
--   22004 NULL arrays or elements (outputs may be NULL); 22023 arrays of
--   different lengths or more than 1,000 tasks, or a task named twice.
-- Example:
--   SELECT * FROM broker.broker_complete_tasks(ARRAY[42, 43], ARRAY['9b2f...', '0c11...']::uuid[], ARRAY[NULL, '{"n": 1}']::jsonb[]);
--   Calls: _task_leases, _cancel_requests, _record_attempts, _end_cancelled, _complete_jobs
--   Tables: writes broker_jobs, broker_job_attempts
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_complete_tasks(p_job_ids bigint[], p_lease_tokens uuid[], p_outputs jsonb[] DEFAULT NULL)
RETURNS TABLE (job_id bigint, outcome text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_mine      bigint[];
    v_outputs   text[];
    v_cancelled bigint[];
    r           record;
BEGIN
    IF p_outputs IS NOT NULL AND pg_catalog.cardinality(p_outputs) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(p_job_ids) THEN
        RAISE EXCEPTION 'broker_complete_tasks: p_outputs must have one element per job, or be NULL'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_mine := broker._task_leases('broker_complete_tasks', p_job_ids, p_lease_tokens);
    v_outputs := ARRAY(SELECT pg_catalog.chr(31) OPERATOR(pg_catalog.||) COALESCE(u.output::text, '')
                         FROM ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_outputs)) WITH ORDINALITY AS u(id, output, o)
                        WHERE u.id OPERATOR(pg_catalog.=) ANY (v_mine)
                        ORDER BY u.o);
    v_cancelled := '{}';
    FOR r IN SELECT c.job_id, c.reason FROM broker._cancel_requests(v_mine) AS c LOOP
        v_cancelled := v_cancelled OPERATOR(pg_catalog.||) r.job_id;
        PERFORM broker._record_attempts(ARRAY[r.job_id], 'cancelled', ARRAY['57014'], ARRAY['cancelled before its completion']);
        PERFORM broker._end_cancelled(r.job_id, r.reason);
    END LOOP;
    SELECT COALESCE(pg_catalog.array_agg(m.id ORDER BY m.o), '{}'), COALESCE(pg_catalog.array_agg(m.out ORDER BY m.o), '{}')
      INTO v_mine, v_outputs
      FROM ROWS FROM (pg_catalog.unnest(v_mine), pg_catalog.unnest(v_outputs)) WITH ORDINALITY AS m(id, out, o)
     WHERE m.id OPERATOR(pg_catalog.<>) ALL (v_cancelled);
    PERFORM broker._record_attempts(v_mine, 'completed', NULL, NULL, v_outputs);
    PERFORM broker._complete_jobs(v_mine);
    RETURN QUERY
    SELECT u.id, CASE WHEN u.id OPERATOR(pg_catalog.=) ANY (v_mine) THEN 'completed'
                      WHEN u.id OPERATOR(pg_catalog.=) ANY (v_cancelled) THEN 'cancelled'
                      ELSE 'lost' END
      FROM pg_catalog.unnest(p_job_ids) WITH ORDINALITY AS u(id, o)
     ORDER BY u.o;
END;
$$;
COMMENT ON FUNCTION broker.broker_complete_tasks(bigint[], uuid[], jsonb[]) IS
    'Completes many running tasks whose handlers wrote nothing, in one statement; returns each one''s outcome (completed, lost, or cancelled when a cancel request came first).';
-- source: sql/tasks/pause.sql
-- sql/tasks/pause.sql: pausing and resuming a task name (broker_pause_task).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_pause_task(p_task, p_paused)
--   Pauses (p_paused true, the default) or resumes task p_task: claims of
--   the name (broker_claim_tasks) skip its ready tasks, running tasks
--   finish, enqueueing goes on. A pause is on the name's queue
--   (broker_task_queue, made here when the name was never enqueued, so a
--   name can be paused before its first task; a tenant's pause makes it a
--   name the tenant uses, broker_task_name_tenant), with the rules of
--   broker_pause_queue: a tenant pauses and resumes only its own tasks; an
--   administrator (superuser or broker_admin) pauses the name for every
--   tenant, and resuming as one lifts every pause of it. A resume wakes the
--   name's workers. Returns whether anything changed. Paused names show in
--   broker_queue_stats (paused) under their queue.
-- Errors: 22004 NULL argument; 22023 a blank name or one over 200
--   characters; 42501 the caller may not act for the current tenant
--   (strict tenancy).
-- Example:
--   SELECT broker.broker_pause_task('send_email');          -- pause it
--   SELECT broker.broker_pause_task('send_email', false);   -- resume it
--   Calls: _check_task_name, _task_queue, _is_broker_admin, _pause
--   Tables: reads broker_task_queue; writes broker_queue_pause (through _pause),
--     broker_task_name_tenant (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_pause_task(p_task text, p_paused boolean DEFAULT true)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue integer;
BEGIN
    IF p_paused IS NULL THEN
        RAISE EXCEPTION 'broker_pause_task: p_paused must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_paused THEN
        -- (a tenant's pause is its use of the name; an administrator's, for every tenant, is no tenant's)
        v_queue := broker._task_queue('broker_pause_task', p_task, NOT broker._is_broker_admin(CURRENT_USER));
    ELSE
        PERFORM broker._check_task_name('broker_pause_task', 'p_task', p_task);
        SELECT q.job_queue INTO v_queue FROM broker.broker_task_queue AS q WHERE q.task_name OPERATOR(pg_catalog.=) p_task;
        IF NOT FOUND THEN  -- a name never enqueued nor paused has no pause to lift
            RETURN false;
        END IF;
    END IF;
    RETURN broker._pause('broker_pause_task', v_queue, p_paused);
END;
$$;
COMMENT ON FUNCTION broker.broker_pause_task(text, boolean) IS
    'Pauses or resumes a task name: claims skip its tasks, running tasks finish; a tenant pauses its own tasks, an administrator the name for everyone. Returns whether anything changed.';
-- source: sql/tasks/schedule.sql
-- sql/tasks/schedule.sql: schedules that fire tasks (broker_add_task_schedule).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_task_schedule(p_schedule_name, p_cron_expr,
--     p_task, p_args, p_time_zone, p_priority, p_max_attempts, p_job_group,
--     p_catch_up, p_catch_up_max, p_overlap, p_enabled, p_timeout,
--     p_tenant_id, p_concurrency_key)
--   Creates a schedule that enqueues task p_task with arguments p_args at
--   each fire time of p_cron_expr in p_time_zone, for the caller's tenant,
--   and returns (schedule_id, next_fire_at). It is a schedule like any
--   other (broker_schedule, job_language 'task'): broker_alter_schedule,
--   broker_enable_schedule, broker_remove_schedule, broker_run_schedule_now
--   and the tick treat it as they treat a schedule of SQL jobs (catch-up,
--   overlap, the owner's rights at each fire). Its tasks are named p_task,
--   claimed by name (broker_claim_tasks) like those of broker_add_task. The
--   other parameters are broker_add_schedule's, with its defaults and
--   errors.
-- Errors: 22004 NULL task or arguments; 22023 a task name blank or over 200
--   characters; those of broker_add_schedule.
-- Example:
--   SELECT * FROM broker.broker_add_task_schedule('daily-digest', '0 7 * * *', 'send_digest', '{"kind": "daily"}',
--                                              p_time_zone => 'Europe/Paris', p_max_attempts => 3);
--   Calls: _call_tenant, _task_queue, _add_schedule, _end_call_tenant
--   Tables: writes broker_schedule (through _add_schedule), broker_task_queue and broker_task_name_tenant (through _task_queue)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_task_schedule(
    p_schedule_name   text,
    p_cron_expr       text,
    p_task            text,
    p_args            jsonb    DEFAULT '{}',
    p_time_zone       text     DEFAULT 'UTC',
    p_priority        integer  DEFAULT 0,
    p_max_attempts    integer  DEFAULT 1,
    p_job_group       text     DEFAULT NULL,
    p_catch_up        text     DEFAULT 'one',
    p_catch_up_max    integer  DEFAULT 100,
    p_overlap         text     DEFAULT 'skip',
    p_enabled         boolean  DEFAULT true,
    p_timeout         interval DEFAULT NULL,
    p_tenant_id       text     DEFAULT NULL,
    p_concurrency_key text     DEFAULT NULL)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_add_task_schedule', p_tenant_id);
    s       broker.broker_schedule;
BEGIN
    IF p_args IS NULL THEN
        RAISE EXCEPTION 'broker_add_task_schedule: p_args must not be NULL' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Give ''{}'' for a task without arguments.';
    END IF;
    s.schedule_name := p_schedule_name;
    s.cron_expr := pg_catalog.btrim(p_cron_expr);
    s.execute_str := p_args::text;
    s.time_zone := pg_catalog.btrim(p_time_zone);
    s.job_queue := broker._task_queue('broker_add_task_schedule', p_task, true);
    s.job_priority := p_priority;
    s.job_language := 'task';
    s.run_as := CURRENT_USER;
    s.max_attempts := p_max_attempts;
    s.job_group := p_job_group;
    s.catch_up := pg_catalog.lower(pg_catalog.btrim(p_catch_up));
    s.catch_up_max := p_catch_up_max;
    s.overlap := pg_catalog.lower(pg_catalog.btrim(p_overlap));
    s.enabled := p_enabled;
    s.job_timeout := p_timeout;
    s.autonomous := false;
    s.concurrency_key := p_concurrency_key;
    RETURN QUERY SELECT a.schedule_id, a.next_fire_at FROM broker._add_schedule('broker_add_task_schedule', s, '') AS a;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
END;
$$;
COMMENT ON FUNCTION broker.broker_add_task_schedule(text, text, text, jsonb, text, integer, integer, text, text, integer, text, boolean, interval, text, text) IS
    'Creates a cron schedule that enqueues a task (name, JSON arguments, broker_add_schedule''s timing and policies) for the current tenant; returns (schedule_id, next_fire_at).';
-- source: sql/compat/executor_fallback.sql
-- sql/compat/executor_fallback.sql: running batches on executors made by 0.1.0 (no run_jobs).
-- Kept in 0.3.0 (its upgrade changes no executor). The upgrade that drops it re-creates every
-- executor with broker_create_executor (which adds run_jobs), then drops _run_jobs_compat and the
-- fallback branches of broker_run and broker_run_batch that call it.
-- ---------------------------------------------------------------------------
-- Function: broker._run_jobs_compat(p_call, p_sqls, p_languages,
--     p_search_paths, p_tenant_id)
--   What an executor's run_jobs does, for an executor without run_jobs (made
--   by 0.1.0): each job through p_call (the SELECT that calls its run_job, see
--   _executor_call) in a subtransaction of its own, with broker.tenant_id
--   p_tenant_id; its error (NULL: success; the message then reports the run,
--   as run_jobs does) and run time, in order.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._run_jobs_compat(p_call text, p_sqls text[], p_languages text[], p_search_paths text[],
    p_tenant_id text)
RETURNS TABLE (error_sqlstate text, error_message text, duration interval)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_started timestamptz;
    v_set     text;
    -- as run_jobs (sql/run/executors.sql): no job after the batch budget's deadline, the running job named
    v_deadline timestamptz := pg_catalog.to_timestamp(NULLIF(pg_catalog.current_setting('broker.batch_deadline', true), '')::float8);
    v_ids     bigint[] := NULLIF(pg_catalog.current_setting('broker.batch_job_ids', true), '')::bigint[];
BEGIN
    FOR i IN 1 .. COALESCE(pg_catalog.array_length(p_sqls, 1), 0) LOOP
        EXIT WHEN i OPERATOR(pg_catalog.>) 1 AND pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) v_deadline;
        IF v_ids IS NOT NULL THEN
            v_set := pg_catalog.set_config('application_name', 'pgsql_broker job ' OPERATOR(pg_catalog.||) v_ids[i], true);
        END IF;
        error_sqlstate := NULL;
        error_message := NULL;
        v_started := pg_catalog.clock_timestamp();
        BEGIN
            PERFORM pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
            PERFORM pg_catalog.set_config('broker.job_rows', '', true);
            PERFORM pg_catalog.set_config('broker.job_output', '', true);
            EXECUTE p_call USING p_sqls[i], p_languages[i], p_search_paths[i];
            -- the run's report, as run_jobs gives it (a 0.1.0 run_job leaves no row count)
            error_message := pg_catalog.current_setting('broker.job_rows', true) OPERATOR(pg_catalog.||) pg_catalog.chr(31)
                OPERATOR(pg_catalog.||) pg_catalog.current_setting('broker.job_output', true);
        EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
            GET STACKED DIAGNOSTICS error_sqlstate = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        END;
        duration := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_started;
        RETURN NEXT;
        -- under a batch budget, its statement_timeout ended this job: start no other
        EXIT WHEN v_deadline IS NOT NULL AND error_sqlstate OPERATOR(pg_catalog.=) '57014';
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker._run_jobs_compat(text, text[], text[], text[], text) IS
    'Internal: run_jobs for an executor that has only run_job: each job through it, in a subtransaction of its own.';
-- source: sql/schedules/cron_parse.sql
-- sql/schedules/cron_parse.sql: cron expressions: parsing.
-- ---------------------------------------------------------------------------
-- Cron expressions: parsing.
--   Five fields (minute hour day-of-month month day-of-week) or an @macro.
--   A parsed field is a bigint bit mask (bit n set = value n allowed), so the
--   search in broker._cron_next_wall needs only integer arithmetic.
--   The cron functions are not SECURITY DEFINER and qualify every function,
--   operator and type that is not a keyword (pg_catalog.text, not text: a
--   variable's type is looked up once per session, so a pg_temp.text domain
--   created before the first call would otherwise run its CHECK inside every
--   later call, as whoever calls), so they carry no SET search_path: a SET
--   clause makes each call save and restore the setting, which costs about as
--   much as the rest of a broker_cron_next call. tests_sql/security/search_path_hijack/ guards this.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._cron_field(p_field, p_label, p_min, p_max, p_names, p_expr)
--   The bit mask of one field: '*', lists 'a,b', ranges 'a-b', steps '*/s',
--   'a-b/s' and 'a/s' (= a-max/s), values as numbers or (month, day of week)
--   three-letter names, case-insensitive. p_names[i] names the value
--   p_min + i - 1. Day of week 7 is Sunday like 0 (the caller folds bit 7).
-- Errors: 22023 naming the field, the offending part and the whole expression.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cron_field(p_field text, p_label text, p_min integer, p_max integer, p_names text[],
                                   p_expr text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_mask  bigint := 0;
    v_item  pg_catalog.text;
    v_parts pg_catalog.text[];
    v_lo    integer;
    v_hi    integer;
    v_step  integer;
    v_bound pg_catalog.text[];
    v_i     integer;
BEGIN
    FOREACH v_item IN ARRAY pg_catalog.string_to_array(p_field, ',') LOOP
        -- item = base[/step], base = * | a | a-b (no regular expression with groups: those are slow)
        v_parts := pg_catalog.string_to_array(v_item, '/');
        v_bound := pg_catalog.string_to_array(v_parts[1], '-');
        IF pg_catalog.cardinality(v_parts) OPERATOR(pg_catalog.>) 2 OR pg_catalog.cardinality(v_bound) OPERATOR(pg_catalog.>) 2
           OR v_item OPERATOR(pg_catalog.!~) '^(\*|[a-z0-9]+(-[a-z0-9]+)?)(/[0-9]+)?$' THEN
            RAISE EXCEPTION 'cron expression %: % field: cannot read %', pg_catalog.quote_literal(p_expr), p_label,
                pg_catalog.quote_literal(v_item)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'A field is *, a value, a range a-b, a list a,b, optionally followed by /step.';
        END IF;
        FOR v_i IN 1 .. 2 LOOP
            CONTINUE WHEN v_bound[v_i] IS NULL OR v_bound[v_i] OPERATOR(pg_catalog.=) '*';
            IF v_bound[v_i] OPERATOR(pg_catalog.~) '^[0-9]+$' THEN
                IF pg_catalog.length(v_bound[v_i]) OPERATOR(pg_catalog.>) 4
                   OR v_bound[v_i]::integer OPERATOR(pg_catalog.<) p_min
                   OR v_bound[v_i]::integer OPERATOR(pg_catalog.>) p_max THEN
                    RAISE EXCEPTION 'cron expression %: % field: % is outside %-%', pg_catalog.quote_literal(p_expr),
                        p_label, v_bound[v_i], p_min, p_max
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            ELSIF pg_catalog.array_position(p_names, v_bound[v_i]) IS NOT NULL THEN
                v_bound[v_i] := (pg_catalog.array_position(p_names, v_bound[v_i]) OPERATOR(pg_catalog.+) p_min
                                 OPERATOR(pg_catalog.-) 1)::pg_catalog.text;
            ELSE
                RAISE EXCEPTION 'cron expression %: % field: unknown value %', pg_catalog.quote_literal(p_expr),
                    p_label, pg_catalog.quote_literal(v_bound[v_i])
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = CASE WHEN p_names IS NULL THEN pg_catalog.format('Use numbers %s-%s.', p_min, p_max)
                                      ELSE pg_catalog.format('Use numbers %s-%s or the names %s.', p_min, p_max,
                                                             pg_catalog.array_to_string(p_names, ', ')) END;
            END IF;
        END LOOP;
        v_step := 1;
        IF v_parts[2] IS NOT NULL THEN
            IF pg_catalog.length(v_parts[2]) OPERATOR(pg_catalog.>) 4 OR v_parts[2]::integer OPERATOR(pg_catalog.=) 0 THEN
                RAISE EXCEPTION 'cron expression %: % field: step in % must be 1-%', pg_catalog.quote_literal(p_expr),
                    p_label, pg_catalog.quote_literal(v_item), p_max
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_step := v_parts[2]::integer;
        END IF;
        IF v_bound[1] OPERATOR(pg_catalog.=) '*' THEN
            v_lo := p_min;
            v_hi := p_max;
        ELSE
            v_lo := v_bound[1]::integer;
            -- 'a/s' means a-max/s; a bare 'a' is just a
            v_hi := COALESCE(v_bound[2]::integer, CASE WHEN v_parts[2] IS NULL THEN v_lo ELSE p_max END);
        END IF;
        IF v_lo OPERATOR(pg_catalog.>) v_hi THEN
            RAISE EXCEPTION 'cron expression %: % field: range % runs backwards', pg_catalog.quote_literal(p_expr),
                p_label, pg_catalog.quote_literal(v_item)
                USING ERRCODE = 'invalid_parameter_value', HINT = 'Write the smaller value first (a-b with a <= b).';
        END IF;
        FOR v_i IN v_lo .. v_hi BY v_step LOOP
            v_mask := v_mask OPERATOR(pg_catalog.|) (1::bigint OPERATOR(pg_catalog.<<) v_i);
        END LOOP;
    END LOOP;
    RETURN v_mask;
END;
$$;
COMMENT ON FUNCTION broker._cron_field(text, text, integer, integer, text[], text) IS
    'Internal: bit mask of one cron field (values, ranges, lists, steps, names); 22023 naming the field on errors.';

-- ---------------------------------------------------------------------------
-- Function: broker._cron_parse(p_expr)
--   Parses a cron expression into bit masks: minutes (0-59), hours (0-23),
--   days of month (1-31), months (1-12), days of week (0-6, 0 = Sunday),
--   and two flags:
--     day_and     true when the day-of-month or day-of-week field starts
--                 with '*' (Vixie cron: then a day must match both fields;
--                 otherwise it matches when either field matches);
--     fixed_time  true when neither the minute nor the hour field starts
--                 with '*' (ISC cron's daylight-saving rule, see
--                 broker_cron_next).
--   Macros: @yearly @annually @monthly @weekly @daily @midnight @hourly.
-- Errors: 22004 NULL expression; 22023 longer than 256 characters, wrong
--   field count, unknown macro, bad value, range or step (the message names
--   the field).
--   Calls: _cron_field
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cron_parse(p_expr text,
    OUT minutes bigint, OUT hours bigint, OUT days bigint, OUT months bigint, OUT dows bigint,
    OUT day_and boolean, OUT fixed_time boolean)
RETURNS record
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_text   pg_catalog.text := pg_catalog.lower(pg_catalog.btrim(p_expr));
    v_fields pg_catalog.text[];
BEGIN
    IF p_expr IS NULL THEN
        RAISE EXCEPTION 'cron expression must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.length(p_expr) OPERATOR(pg_catalog.>) 256 THEN
        RAISE EXCEPTION 'cron expression is % characters long; at most 256 are accepted', pg_catalog.length(p_expr)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.left(v_text, 1) OPERATOR(pg_catalog.=) '@' THEN
        v_text := (ARRAY['0 0 1 1 *', '0 0 1 1 *', '0 0 1 * *', '0 0 * * 0', '0 0 * * *', '0 0 * * *', '0 * * * *'])
                  [pg_catalog.array_position(ARRAY['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight',
                                                   '@hourly'], v_text)];
        IF v_text IS NULL THEN
            RAISE EXCEPTION 'cron expression %: unknown macro', pg_catalog.quote_literal(p_expr)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Macros: @yearly @annually @monthly @weekly @daily @midnight @hourly.';
        END IF;
    END IF;
    v_fields := pg_catalog.regexp_split_to_array(v_text, '\s+');
    IF pg_catalog.cardinality(v_fields) OPERATOR(pg_catalog.<>) 5 OR v_text OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'cron expression % has % fields; it needs 5 (minute hour day-of-month month day-of-week)',
            pg_catalog.quote_literal(p_expr), CASE WHEN v_text OPERATOR(pg_catalog.=) '' THEN 0
                                                   ELSE pg_catalog.cardinality(v_fields) END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    minutes := broker._cron_field(v_fields[1], 'minute', 0, 59, NULL, p_expr);
    hours := broker._cron_field(v_fields[2], 'hour', 0, 23, NULL, p_expr);
    days := broker._cron_field(v_fields[3], 'day-of-month', 1, 31, NULL, p_expr);
    months := broker._cron_field(v_fields[4], 'month', 1, 12,
        ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'], p_expr);
    dows := broker._cron_field(v_fields[5], 'day-of-week', 0, 7,
        ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'], p_expr);
    -- 7 is Sunday too
    dows := (dows OPERATOR(pg_catalog.|) (dows OPERATOR(pg_catalog.>>) 7)) OPERATOR(pg_catalog.&) 127;
    day_and := pg_catalog.left(v_fields[3], 1) OPERATOR(pg_catalog.=) '*'
            OR pg_catalog.left(v_fields[5], 1) OPERATOR(pg_catalog.=) '*';
    fixed_time := pg_catalog.left(v_fields[1], 1) OPERATOR(pg_catalog.<>) '*'
              AND pg_catalog.left(v_fields[2], 1) OPERATOR(pg_catalog.<>) '*';
END;
$$;
COMMENT ON FUNCTION broker._cron_parse(text) IS
    'Internal: parses a five-field cron expression or @macro into bit masks plus the Vixie day rule and ISC fixed-time flags.';
-- source: sql/schedules/cron_next.sql
-- sql/schedules/cron_next.sql: cron expressions: the next fire time.
-- ---------------------------------------------------------------------------
-- Cron expressions: the next fire time.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._cron_next_wall(p_minutes, p_hours, p_days, p_months,
--     p_dows, p_day_and, p_from)
--   The first wall-clock minute >= p_from (a timestamp without time zone)
--   whose fields match the masks of broker._cron_parse; NULL when nothing
--   matches within 30 years (say day 31 of February). Pure calendar
--   arithmetic, no time zone.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cron_next_wall(p_minutes bigint, p_hours bigint, p_days bigint, p_months bigint,
                                       p_dows bigint, p_day_and boolean, p_from timestamp)
RETURNS timestamp
LANGUAGE plpgsql IMMUTABLE STRICT
AS $$
DECLARE
    v_from  timestamp := pg_catalog.date_trunc('minute', p_from OPERATOR(pg_catalog.+) interval '59.999999 seconds');
    v_y     integer := pg_catalog.date_part('year', v_from)::integer;
    v_mo    integer := pg_catalog.date_part('month', v_from)::integer;
    v_d     integer := pg_catalog.date_part('day', v_from)::integer;
    v_h     integer := pg_catalog.date_part('hour', v_from)::integer;
    v_mi    integer := pg_catalog.date_part('minute', v_from)::integer;
    v_last  integer := v_y OPERATOR(pg_catalog.+) 30;
    v_dim   integer;
    v_dow1  integer;
    v_rest  bigint;
    v_match boolean;
BEGIN
    <<months>>
    LOOP
        IF v_y OPERATOR(pg_catalog.>) v_last THEN
            RETURN NULL;
        END IF;
        IF (p_months OPERATOR(pg_catalog.>>) v_mo) OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 0 THEN
            v_mo := v_mo OPERATOR(pg_catalog.+) 1; v_d := 1; v_h := 0; v_mi := 0;
            IF v_mo OPERATOR(pg_catalog.>) 12 THEN v_mo := 1; v_y := v_y OPERATOR(pg_catalog.+) 1; END IF;
            CONTINUE months;
        END IF;
        v_dim := CASE WHEN v_mo OPERATOR(pg_catalog.=) 2 THEN
                          CASE WHEN v_y OPERATOR(pg_catalog.%) 4 OPERATOR(pg_catalog.=) 0
                                    AND (v_y OPERATOR(pg_catalog.%) 100 OPERATOR(pg_catalog.<>) 0
                                         OR v_y OPERATOR(pg_catalog.%) 400 OPERATOR(pg_catalog.=) 0)
                               THEN 29 ELSE 28 END
                      WHEN v_mo OPERATOR(pg_catalog.=) ANY (ARRAY[4, 6, 9, 11]) THEN 30
                      ELSE 31 END;
        v_dow1 := pg_catalog.date_part('dow', pg_catalog.make_date(v_y, v_mo, 1))::integer;
        <<days>>
        WHILE v_d OPERATOR(pg_catalog.<=) v_dim LOOP
            v_match := CASE WHEN p_day_and
                            THEN (p_days OPERATOR(pg_catalog.>>) v_d) OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1
                             AND (p_dows OPERATOR(pg_catalog.>>) ((v_dow1 OPERATOR(pg_catalog.+) v_d OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.%) 7))
                                 OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1
                            ELSE (p_days OPERATOR(pg_catalog.>>) v_d) OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1
                              OR (p_dows OPERATOR(pg_catalog.>>) ((v_dow1 OPERATOR(pg_catalog.+) v_d OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.%) 7))
                                 OPERATOR(pg_catalog.&) 1 OPERATOR(pg_catalog.=) 1 END;
            IF v_match THEN
                WHILE v_h OPERATOR(pg_catalog.<=) 23 LOOP
                    -- next allowed hour >= v_h: lowest set bit of the shifted mask
                    v_rest := p_hours OPERATOR(pg_catalog.>>) v_h;
                    EXIT WHEN v_rest OPERATOR(pg_catalog.=) 0;
                    v_rest := v_rest OPERATOR(pg_catalog.&) (OPERATOR(pg_catalog.-) v_rest);
                    IF v_rest OPERATOR(pg_catalog.>) 1 THEN
                        v_h := v_h OPERATOR(pg_catalog.+) pg_catalog.round(pg_catalog.ln(v_rest::pg_catalog.float8) OPERATOR(pg_catalog./) pg_catalog.ln(2::pg_catalog.float8))::integer;
                        v_mi := 0;
                    END IF;
                    v_rest := p_minutes OPERATOR(pg_catalog.>>) v_mi;
                    IF v_rest OPERATOR(pg_catalog.<>) 0 THEN
                        v_rest := v_rest OPERATOR(pg_catalog.&) (OPERATOR(pg_catalog.-) v_rest);
                        RETURN pg_catalog.make_timestamp(v_y, v_mo, v_d, v_h,
                            v_mi OPERATOR(pg_catalog.+) pg_catalog.round(pg_catalog.ln(v_rest::pg_catalog.float8) OPERATOR(pg_catalog./) pg_catalog.ln(2::pg_catalog.float8))::integer, 0);
                    END IF;
                    v_h := v_h OPERATOR(pg_catalog.+) 1; v_mi := 0;
                END LOOP;
            END IF;
            v_d := v_d OPERATOR(pg_catalog.+) 1; v_h := 0; v_mi := 0;
        END LOOP days;
        v_mo := v_mo OPERATOR(pg_catalog.+) 1; v_d := 1; v_h := 0; v_mi := 0;
        IF v_mo OPERATOR(pg_catalog.>) 12 THEN v_mo := 1; v_y := v_y OPERATOR(pg_catalog.+) 1; END IF;
    END LOOP months;
END;
$$;
COMMENT ON FUNCTION broker._cron_next_wall(bigint, bigint, bigint, bigint, bigint, boolean, timestamp) IS
    'Internal: first wall-clock minute at or after p_from matching the parsed cron masks (no time zone); NULL if none within 30 years.';

-- ---------------------------------------------------------------------------
-- Function: broker._cron_utc_offset(p_utc, p_timezone)
--   The UTC offset of p_timezone at the instant whose UTC wall time is p_utc.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._cron_utc_offset(p_utc timestamp, p_timezone text)
RETURNS interval
LANGUAGE sql STABLE STRICT
AS $$
    SELECT ((p_utc AT TIME ZONE 'UTC') AT TIME ZONE p_timezone) OPERATOR(pg_catalog.-) p_utc
$$;
COMMENT ON FUNCTION broker._cron_utc_offset(timestamp, text) IS
    'Internal: UTC offset of a time zone at an instant given as its UTC wall time.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_cron_next(p_expr, p_after, p_timezone)
--   The first fire time of cron expression p_expr strictly after p_after,
--   with the fields matched against the wall clock of p_timezone (an IANA
--   name such as 'Europe/Berlin', or anything PostgreSQL's AT TIME ZONE
--   takes). NULL when the expression never matches (such as 0 0 30 2 *).
--   Day rule (Vixie cron): when the day-of-month or day-of-week field starts
--   with '*', a day must match both; otherwise either.
--   Daylight saving (ISC cron): a schedule is fixed-time when neither its
--   minute nor its hour field starts with '*'.
--     * Clocks jump forward: a fixed-time schedule whose wall time was
--       skipped fires once, at the first instant after the jump (02:30 on a
--       02:00->03:00 night fires at 03:00); a wildcard schedule simply has no
--       fire in the skipped hour.
--     * Clocks go back: a fixed-time schedule fires only at the first
--       occurrence of a repeated wall time; a wildcard schedule at both.
--   Works with any offsets (30-minute shifts as in Australia/Lord_Howe,
--   45-minute zones) as long as two transitions are more than a day apart.
--   STABLE, not IMMUTABLE: the answer depends on the time zone database.
-- Errors: 22004 NULL argument; 22023 invalid expression (the message names
--   the field), unknown time zone, or p_after +-infinity.
-- Example:
--   SELECT broker.broker_cron_next('30 2 * * *', '2027-03-13 12:00+00', 'America/New_York');
--   -- 2027-03-14 07:00:00+00 (02:30 does not exist that night: 03:00 EDT)
--   Calls: _cron_parse, _cron_utc_offset, _cron_next_wall
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_cron_next(p_expr text, p_after timestamptz, p_timezone text DEFAULT 'UTC')
RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    c      record;
    v_u    timestamp;    -- search from this instant on (as its UTC wall time)
    v_off  interval;     -- offset in force at v_u
    v_lb   timestamp;    -- wall-clock lower bound
    v_w    timestamp;    -- candidate wall time
    v_c    timestamp;    -- candidate instant (UTC wall time)
    v_off2 interval;
    v_lo   timestamp;
    v_hi   timestamp;
    v_mid  timestamp;
    v_t    timestamp;    -- a transition instant
    v_i    integer := 0;
BEGIN
    IF p_after IS NULL OR p_timezone IS NULL THEN
        RAISE EXCEPTION 'broker_cron_next: % must not be NULL', CASE WHEN p_after IS NULL THEN 'p_after' ELSE 'p_timezone' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT pg_catalog.isfinite(p_after) THEN
        RAISE EXCEPTION 'broker_cron_next: p_after must be a finite time, got %', p_after
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    c := broker._cron_parse(p_expr);
    v_u := p_after AT TIME ZONE 'UTC';
    BEGIN
        v_off := broker._cron_utc_offset(v_u, p_timezone);
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'broker_cron_next: unknown time zone %', pg_catalog.quote_literal(p_timezone)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use an IANA zone name such as ''Europe/Berlin'' (see pg_timezone_names).';
    END;
    v_lb := pg_catalog.date_trunc('minute', v_u OPERATOR(pg_catalog.+) v_off) OPERATOR(pg_catalog.+) interval '1 minute';
    LOOP
        v_i := v_i OPERATOR(pg_catalog.+) 1;
        IF v_i OPERATOR(pg_catalog.>) 1000 THEN  -- a zone with transitions less than a day apart
            RAISE EXCEPTION 'broker_cron_next: no fire time found for % in time zone %',
                pg_catalog.quote_literal(p_expr), pg_catalog.quote_literal(p_timezone)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_w := broker._cron_next_wall(c.minutes, c.hours, c.days, c.months, c.dows, c.day_and, v_lb);
        IF v_w IS NULL THEN
            RETURN NULL;
        END IF;
        v_c := v_w OPERATOR(pg_catalog.-) v_off;
        IF broker._cron_utc_offset(v_c, p_timezone) OPERATOR(pg_catalog.=) v_off THEN
            -- v_w exists at v_c. Did it also exist earlier (clocks went back in the last day)?
            v_off2 := broker._cron_utc_offset(v_c OPERATOR(pg_catalog.-) interval '1 day', p_timezone);
            IF v_off2 OPERATOR(pg_catalog.>) v_off
               AND broker._cron_utc_offset(v_w OPERATOR(pg_catalog.-) v_off2, p_timezone) OPERATOR(pg_catalog.=) v_off2 THEN
                IF (v_w OPERATOR(pg_catalog.-) v_off2) OPERATOR(pg_catalog.>) (p_after AT TIME ZONE 'UTC') THEN
                    RETURN (v_w OPERATOR(pg_catalog.-) v_off2) AT TIME ZONE 'UTC';   -- first occurrence
                ELSIF c.fixed_time THEN
                    v_lb := v_w OPERATOR(pg_catalog.+) interval '1 minute';          -- repeated: fixed-time skips it
                    CONTINUE;
                END IF;
            END IF;
            RETURN v_c AT TIME ZONE 'UTC';
        END IF;
        -- The offset changes between v_u and v_c: find that transition (to the second).
        v_lo := v_u;
        v_hi := v_c;
        WHILE v_hi OPERATOR(pg_catalog.-) v_lo OPERATOR(pg_catalog.>) interval '1 second' LOOP
            v_mid := v_lo OPERATOR(pg_catalog.+) ((v_hi OPERATOR(pg_catalog.-) v_lo) OPERATOR(pg_catalog./) 2);
            IF broker._cron_utc_offset(v_mid, p_timezone) OPERATOR(pg_catalog.=) v_off THEN
                v_lo := v_mid;
            ELSE
                v_hi := v_mid;
            END IF;
        END LOOP;
        v_t := pg_catalog.date_trunc('second', v_hi);
        IF v_t OPERATOR(pg_catalog.<=) v_lo THEN
            v_t := v_hi;
        END IF;
        v_off2 := broker._cron_utc_offset(v_t, p_timezone);
        IF v_off2 OPERATOR(pg_catalog.>) v_off AND v_w OPERATOR(pg_catalog.<) (v_t OPERATOR(pg_catalog.+) v_off2) THEN
            -- v_w was skipped by a jump forward
            IF c.fixed_time THEN
                RETURN v_t AT TIME ZONE 'UTC';
            END IF;
            v_lb := v_t OPERATOR(pg_catalog.+) v_off2;
        ELSIF v_off2 OPERATOR(pg_catalog.>) v_off THEN
            v_lb := v_w;
        ELSE
            -- clocks went back: wall times from v_t + v_off2 on come (again) after v_t
            v_lb := v_t OPERATOR(pg_catalog.+) v_off2;
        END IF;
        v_u := v_t;
        v_off := v_off2;
    END LOOP;
END;
$$;
COMMENT ON FUNCTION broker.broker_cron_next(text, timestamptz, text) IS
    'First fire time of a cron expression strictly after p_after, matched on the wall clock of p_timezone (Vixie day rule, ISC daylight-saving rules).';
-- source: sql/schedules/schedules.sql
-- sql/schedules/schedules.sql: adding schedules (broker_add_schedule) and the rules every schedule write checks.
-- ---------------------------------------------------------------------------
-- Schedules: add (here), alter, enable/disable, remove (sql/schedules/manage.sql).
--   All SECURITY INVOKER: rows are written with the caller's rights, so the
--   row-level security policies check tenant, owner (created_by) and run_as
--   as the caller, exactly as for jobs. Each change sends NOTIFY
--   pgsql_broker_schedule '<database>' (on commit) so a runner re-reads its
--   next tick time at once.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_job_name(s)
--   The name of schedule s's jobs: the schedule's name, or for a schedule of
--   tasks the task name of its queue (broker_task_queue), which a worker
--   claims them by (NULL when no name has that queue).
--   Calls: none
--   Tables: reads broker_task_queue
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_job_name(s broker.broker_schedule)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN s.job_language OPERATOR(pg_catalog.=) 'task'
                THEN (SELECT q.task_name FROM broker.broker_task_queue AS q WHERE q.job_queue OPERATOR(pg_catalog.=) s.job_queue)
                ELSE s.schedule_name END
$$;
COMMENT ON FUNCTION broker._schedule_job_name(broker.broker_schedule) IS
    'Internal: the name of a schedule''s jobs: the schedule''s, or for a schedule of tasks its task name.';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_check(p_fn, s)
--   Validates a schedule row (new or altered) as p_fn and returns its next
--   fire time after now. Resolves nothing; raises on the first bad value.
--   The jobs' fields obey broker_add_job's rules (broker._job_problem; the
--   message names this function's parameter: p_schedule_name for the jobs'
--   name, p_job_timeout for their timeout), their run_as is checked by
--   broker._check_run_as; the schedule's own fields here.
-- Errors: 22004 NULL where a value is required; 22023 invalid value, bad
--   cron expression (the message names the field), unknown time zone, or an
--   expression that never fires, a task schedule whose queue is no task
--   name's or whose arguments are not JSON; 42704 unknown run_as role; 42501 run_as
--   not allowed for the caller; those of broker._check_autonomous (0A000
--   SQL that can never run in a transaction without p_autonomous, and the
--   refusals of an autonomous schedule's SQL or role).
--   Calls: _job_problem, _job_field_error, _schedule_job_name, _check_run_as, _check_autonomous, broker_cron_next
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_check(p_fn text, s broker.broker_schedule)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_next    timestamptz;
    v_problem text[];
BEGIN
    IF s.cron_expr IS NULL OR s.time_zone IS NULL OR s.catch_up IS NULL OR s.catch_up_max IS NULL
       OR s.overlap IS NULL OR s.enabled IS NULL THEN
        RAISE EXCEPTION '%: % must not be NULL', p_fn,
            CASE WHEN s.cron_expr IS NULL THEN 'p_cron_expr' WHEN s.time_zone IS NULL THEN 'p_time_zone'
                 WHEN s.catch_up IS NULL THEN 'p_catch_up' WHEN s.catch_up_max IS NULL THEN 'p_catch_up_max'
                 WHEN s.overlap IS NULL THEN 'p_overlap' ELSE 'p_enabled' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- the rules of the jobs' fields, as for broker_add_job (named as this function's parameters)
    v_problem := broker._job_problem(ROW(s.schedule_name, s.execute_str, s.job_queue, s.job_priority, s.job_language,
        s.run_as, NULL, NULL, NULL, s.max_attempts, s.job_group, NULL, NULL, s.job_timeout, s.job_search_path,
        s.autonomous, s.concurrency_key)::broker._job_fields);
    IF v_problem IS NOT NULL THEN
        PERFORM broker._job_field_error(p_fn, CASE v_problem[2] WHEN 'job_name' THEN 'p_schedule_name'
                                                                 WHEN 'timeout' THEN 'p_job_timeout'
                                                                 ELSE 'p_' OPERATOR(pg_catalog.||) v_problem[2] END, v_problem);
    END IF;
    IF s.job_language OPERATOR(pg_catalog.=) 'task' AND broker._schedule_job_name(s) IS NULL THEN
        RAISE EXCEPTION '%: p_job_queue % is no task name''s queue', p_fn, s.job_queue
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Schedule tasks with broker_add_task_schedule.';
    END IF;
    IF s.job_language OPERATOR(pg_catalog.=) 'task' THEN
        BEGIN
            PERFORM s.execute_str::pg_catalog.jsonb;
        EXCEPTION WHEN invalid_text_representation THEN
            RAISE EXCEPTION '%: a task''s arguments must be JSON', p_fn USING ERRCODE = 'invalid_parameter_value';
        END;
    END IF;
    IF s.catch_up_max OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION '%: p_catch_up_max must be >= 1, got %', p_fn, s.catch_up_max
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.catch_up OPERATOR(pg_catalog.<>) ALL (ARRAY['none', 'one', 'all']) THEN
        RAISE EXCEPTION '%: p_catch_up must be none, one or all, got %', p_fn, pg_catalog.quote_literal(s.catch_up)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.overlap OPERATOR(pg_catalog.<>) ALL (ARRAY['skip', 'allow']) THEN
        RAISE EXCEPTION '%: p_overlap must be skip or allow, got %', p_fn, pg_catalog.quote_literal(s.overlap)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._check_run_as(p_fn, s.run_as);
    PERFORM broker._check_autonomous(p_fn, s.execute_str, s.job_language, s.run_as, s.autonomous);
    v_next := broker.broker_cron_next(s.cron_expr, pg_catalog.now(), s.time_zone);
    IF v_next IS NULL THEN
        RAISE EXCEPTION '%: cron expression % never fires', p_fn, pg_catalog.quote_literal(s.cron_expr)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Check day of month against month (say 30 2 = 30 February).';
    END IF;
    RETURN v_next;
END;
$$;
COMMENT ON FUNCTION broker._schedule_check(text, broker.broker_schedule) IS
    'Internal: validates a schedule row for broker_add_schedule / broker_alter_schedule and returns its next fire time.';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_notify()
--   NOTIFY pgsql_broker_schedule '<database>' (sent on commit).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_notify()
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_notify('pgsql_broker_schedule', pg_catalog.current_database())
$$;
COMMENT ON FUNCTION broker._schedule_notify() IS
    'Internal: NOTIFY pgsql_broker_schedule, ''<database>'' so runners re-plan their next tick (sent on commit).';

-- ---------------------------------------------------------------------------
-- Function: broker._add_schedule(p_fn, s, p_search_path)
--   The body of broker_add_schedule and broker_add_task_schedule (named
--   p_fn in errors): checks schedule row s (broker._schedule_check) and the
--   caller's right to act for the current tenant, refuses a name the tenant
--   has, makes the run_as role's executor (not for a task), inserts the
--   schedule (p_search_path its jobs' search_path) and tells the runners.
-- Errors: those of broker._schedule_check; 23505 a schedule of that name
--   exists in the tenant; 42501 the role may not act for the tenant.
--   Calls: _schedule_check, _tenant_allowed, broker_current_tenant, _executor, broker_create_executor, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._add_schedule(p_fn text, s broker.broker_schedule, p_search_path text)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_next  timestamptz;
BEGIN
    v_next := broker._schedule_check(p_fn, s);
    IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER) THEN
        RAISE EXCEPTION '%: role % may not act for tenant %', p_fn, pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(broker.broker_current_tenant())
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM broker.broker_schedule AS x
                WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                  AND x.schedule_name OPERATOR(pg_catalog.=) s.schedule_name) THEN
        RAISE EXCEPTION '%: schedule % exists already', p_fn, pg_catalog.quote_literal(s.schedule_name)
            USING ERRCODE = 'unique_violation', HINT = 'Change it with broker_alter_schedule.';
    END IF;
    -- its jobs run inside the run_as role's executor: create it now, with the caller's rights (a task
    -- runs in application code, without one)
    IF s.job_language OPERATOR(pg_catalog.<>) 'task' AND broker._executor(s.run_as) IS NULL THEN
        PERFORM broker.broker_create_executor(s.run_as);
    END IF;
    RETURN QUERY
    INSERT INTO broker.broker_schedule AS t
           (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
            max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
            overlap, autonomous, concurrency_key)
    VALUES (s.schedule_name, s.cron_expr, s.time_zone, s.execute_str, s.job_language, s.job_queue, s.job_priority,
            s.run_as, s.max_attempts, s.job_group, s.enabled, CASE WHEN s.enabled THEN v_next END, s.job_timeout,
            COALESCE(p_search_path, ''), s.catch_up, s.catch_up_max, s.overlap, s.autonomous, s.concurrency_key)
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
END;
$$;
COMMENT ON FUNCTION broker._add_schedule(text, broker.broker_schedule, text) IS
    'Internal: the body of broker_add_schedule and broker_add_task_schedule: checks and inserts a schedule row, and tells the runners.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_schedule(p_schedule_name, p_cron_expr,
--     p_execute_str, p_time_zone, p_job_queue, p_job_priority,
--     p_job_language, p_run_as, p_max_attempts, p_job_group, p_catch_up,
--     p_catch_up_max, p_overlap, p_enabled, p_job_timeout, p_search_path,
--     p_tenant_id, p_autonomous, p_concurrency_key)
--   Creates a schedule for the caller's tenant, owned by the caller, and
--   returns (schedule_id, next_fire_at). Jobs are named after the schedule
--   and run as p_run_as (default: the caller). p_tenant_id names the tenant
--   for this call only (as broker_add_job's).
--   With p_autonomous its jobs run outside a transaction block (VACUUM,
--   CREATE INDEX CONCURRENTLY, a CALL that commits, ...: see broker_add_job).
--   p_concurrency_key is the concurrency key of its jobs (as broker_add_job's;
--   NULL: none).
-- Errors: those of broker._schedule_check; 23505 a schedule of that name
--   exists in the tenant; 42501 the role may not act for the tenant.
-- Example:
--   SELECT * FROM broker.broker_add_schedule('nightly-rollup', '0 3 * * *', 'CALL reports.rollup()',
--                                         p_time_zone => 'Europe/Berlin', p_catch_up => 'none');
--   SELECT * FROM broker.broker_add_schedule('nightly-vacuum', '0 3 * * *', 'VACUUM ANALYZE orders', p_autonomous => true);
--   SELECT * FROM broker.broker_add_schedule('crm-sync', '*/5 * * * *', 'CALL crm.sync_all()', p_concurrency_key => 'crm-api');
--   Calls: _set_tenant, _add_schedule
--   Tables: writes broker_schedule (through _add_schedule)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_add_schedule(
    p_schedule_name text,
    p_cron_expr     text,
    p_execute_str   text,
    p_time_zone     text     DEFAULT 'UTC',
    p_job_queue     integer  DEFAULT 1,
    p_job_priority  integer  DEFAULT 0,
    p_job_language  text     DEFAULT 'sql',
    p_run_as        text     DEFAULT NULL,
    p_max_attempts  integer  DEFAULT 1,
    p_job_group     text     DEFAULT NULL,
    p_catch_up      text     DEFAULT 'one',
    p_catch_up_max  integer  DEFAULT 100,
    p_overlap       text     DEFAULT 'skip',
    p_enabled       boolean  DEFAULT true,
    p_job_timeout   interval DEFAULT NULL,
    p_search_path   text     DEFAULT pg_catalog.current_setting('search_path'),
    p_tenant_id     text     DEFAULT NULL,
    p_autonomous    boolean  DEFAULT false,
    p_concurrency_key text   DEFAULT NULL)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s       broker.broker_schedule;
    v_saved text;
BEGIN
    IF p_tenant_id IS NOT NULL THEN  -- the named tenant, for this call only
        v_saved := pg_catalog.current_setting('broker.tenant_id', true);
        PERFORM broker._set_tenant('broker_add_schedule', p_tenant_id);
        RETURN QUERY SELECT a.schedule_id, a.next_fire_at FROM broker.broker_add_schedule(p_schedule_name, p_cron_expr,
            p_execute_str, p_time_zone, p_job_queue, p_job_priority, p_job_language, p_run_as, p_max_attempts,
            p_job_group, p_catch_up, p_catch_up_max, p_overlap, p_enabled, p_job_timeout, p_search_path,
            p_autonomous => p_autonomous, p_concurrency_key => p_concurrency_key) AS a;
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(v_saved, ''), true);
        RETURN;
    END IF;
    s.schedule_name := p_schedule_name;
    s.cron_expr := pg_catalog.btrim(p_cron_expr);
    s.execute_str := p_execute_str;
    s.time_zone := pg_catalog.btrim(p_time_zone);
    s.job_queue := p_job_queue;
    s.job_priority := p_job_priority;
    s.job_language := pg_catalog.lower(pg_catalog.btrim(p_job_language));
    s.run_as := COALESCE(p_run_as, CURRENT_USER);
    s.max_attempts := p_max_attempts;
    s.job_group := p_job_group;
    s.catch_up := pg_catalog.lower(pg_catalog.btrim(p_catch_up));
    s.catch_up_max := p_catch_up_max;
    s.overlap := pg_catalog.lower(pg_catalog.btrim(p_overlap));
    s.enabled := p_enabled;
    s.job_timeout := p_job_timeout;
    s.autonomous := p_autonomous;
    s.concurrency_key := p_concurrency_key;
    RETURN QUERY SELECT a.schedule_id, a.next_fire_at FROM broker._add_schedule('broker_add_schedule', s, p_search_path) AS a;
END;
$$;
COMMENT ON FUNCTION broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, boolean, interval, text, text, boolean, text) IS
    'Creates a cron schedule (expression, IANA time zone, job template, catch-up and overlap policy, autonomous or not, concurrency key) for the current tenant; returns (schedule_id, next_fire_at).';
-- source: sql/schedules/manage.sql
-- sql/schedules/manage.sql: changing schedules: alter, enable/disable, remove.
-- ---------------------------------------------------------------------------
-- Like broker_add_schedule (sql/schedules/schedules.sql), all SECURITY INVOKER:
--   row-level security checks tenant, owner (created_by) and run_as as the
--   caller, and each change notifies pgsql_broker_schedule (_schedule_notify).
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_row(p_fn, p_schedule_name)
--   The caller's tenant's schedule p_schedule_name, locked FOR UPDATE (as the
--   caller: row-level security applies).
-- Errors: 22004 NULL name; 42704 no such schedule (or not visible).
--   Calls: broker_current_tenant, _may_run_as
--   Tables: reads broker_schedule
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_row(p_fn text, p_schedule_name text)
RETURNS broker.broker_schedule
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s broker.broker_schedule;
BEGIN
    IF p_schedule_name IS NULL THEN
        RAISE EXCEPTION '%: p_schedule_name must not be NULL', p_fn USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO s FROM broker.broker_schedule AS x
     WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
       AND x.schedule_name OPERATOR(pg_catalog.=) p_schedule_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: schedule % does not exist in tenant %', p_fn, pg_catalog.quote_literal(p_schedule_name),
            pg_catalog.quote_literal(broker.broker_current_tenant())
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT broker._may_run_as(s.created_by, CURRENT_USER) THEN
        RAISE EXCEPTION '%: schedule % belongs to %', p_fn, pg_catalog.quote_literal(p_schedule_name),
            pg_catalog.quote_ident(s.created_by)
            USING ERRCODE = 'insufficient_privilege', HINT = 'Only its owner (or a member of that role) may change it.';
    END IF;
    -- lock it (FOR UPDATE sees only rows the caller may update) and read it again
    SELECT * INTO s FROM broker.broker_schedule AS x
     WHERE x.schedule_id OPERATOR(pg_catalog.=) s.schedule_id
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: schedule % was removed meanwhile', p_fn, pg_catalog.quote_literal(p_schedule_name)
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN s;
END;
$$;
COMMENT ON FUNCTION broker._schedule_row(text, text) IS
    'Internal: the current tenant''s schedule of that name, locked, if the caller owns it (42704 / 42501 otherwise).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_alter_schedule(p_schedule_name, ...)
--   Changes the given properties of a schedule (NULL leaves one as it is;
--   p_job_group '' resets it to the schedule name; p_concurrency_key ''
--   clears it, so that its jobs have no key; p_autonomous makes its jobs
--   autonomous or not, checked as broker_add_schedule checks it) and
--   returns (schedule_id, next_fire_at). A change of expression or time zone plans
--   the next fire from now: fires missed meanwhile are dropped. p_tenant_id
--   names the tenant for this call only (as broker_add_job's).
-- Errors: those of broker._schedule_check and broker._schedule_row;
--   23505 p_new_name is taken.
-- Example:
--   SELECT * FROM broker.broker_alter_schedule('nightly-rollup', p_cron_expr => '30 3 * * *');
--   SELECT * FROM broker.broker_alter_schedule('crm-sync', p_concurrency_key => '');   -- its jobs without a key
--   Calls: _schedule_row, _schedule_check, _executor, broker_create_executor, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_alter_schedule(
    p_schedule_name text,
    p_cron_expr     text     DEFAULT NULL,
    p_execute_str   text     DEFAULT NULL,
    p_time_zone     text     DEFAULT NULL,
    p_job_queue     integer  DEFAULT NULL,
    p_job_priority  integer  DEFAULT NULL,
    p_job_language  text     DEFAULT NULL,
    p_run_as        text     DEFAULT NULL,
    p_max_attempts  integer  DEFAULT NULL,
    p_job_group     text     DEFAULT NULL,
    p_catch_up      text     DEFAULT NULL,
    p_catch_up_max  integer  DEFAULT NULL,
    p_overlap       text     DEFAULT NULL,
    p_job_timeout   interval DEFAULT NULL,
    p_search_path   text     DEFAULT NULL,
    p_new_name      text     DEFAULT NULL,
    p_autonomous    boolean  DEFAULT NULL,
    p_tenant_id     text     DEFAULT NULL,
    p_concurrency_key text   DEFAULT NULL)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_alter_schedule', p_tenant_id);
    s      broker.broker_schedule := broker._schedule_row('broker_alter_schedule', p_schedule_name);
    v_old  broker.broker_schedule := s;
    v_next timestamptz;
BEGIN
    s.schedule_name := COALESCE(p_new_name, s.schedule_name);
    s.cron_expr := COALESCE(pg_catalog.btrim(p_cron_expr), s.cron_expr);
    s.execute_str := COALESCE(p_execute_str, s.execute_str);
    s.time_zone := COALESCE(pg_catalog.btrim(p_time_zone), s.time_zone);
    s.job_queue := COALESCE(p_job_queue, s.job_queue);
    s.job_priority := COALESCE(p_job_priority, s.job_priority);
    s.job_language := COALESCE(pg_catalog.lower(pg_catalog.btrim(p_job_language)), s.job_language);
    s.run_as := COALESCE(p_run_as, s.run_as);
    s.max_attempts := COALESCE(p_max_attempts, s.max_attempts);
    s.job_group := CASE WHEN p_job_group OPERATOR(pg_catalog.=) '' THEN NULL ELSE COALESCE(p_job_group, s.job_group) END;
    s.catch_up := COALESCE(pg_catalog.lower(pg_catalog.btrim(p_catch_up)), s.catch_up);
    s.catch_up_max := COALESCE(p_catch_up_max, s.catch_up_max);
    s.overlap := COALESCE(pg_catalog.lower(pg_catalog.btrim(p_overlap)), s.overlap);
    s.job_timeout := COALESCE(p_job_timeout, s.job_timeout);
    s.job_search_path := COALESCE(p_search_path, s.job_search_path);
    s.autonomous := COALESCE(p_autonomous, s.autonomous);
    s.concurrency_key := CASE WHEN p_concurrency_key OPERATOR(pg_catalog.=) '' THEN NULL
                              ELSE COALESCE(p_concurrency_key, s.concurrency_key) END;
    v_next := broker._schedule_check('broker_alter_schedule', s);
    IF s.schedule_name OPERATOR(pg_catalog.<>) v_old.schedule_name AND EXISTS (
        SELECT 1 FROM broker.broker_schedule AS x
         WHERE x.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND x.schedule_name OPERATOR(pg_catalog.=) s.schedule_name) THEN
        RAISE EXCEPTION 'broker_alter_schedule: schedule % exists already', pg_catalog.quote_literal(s.schedule_name)
            USING ERRCODE = 'unique_violation';
    END IF;
    IF broker._executor(s.run_as) IS NULL THEN
        PERFORM broker.broker_create_executor(s.run_as);
    END IF;
    -- keep the planned fire unless the timing changed (or it was never planned)
    IF s.cron_expr OPERATOR(pg_catalog.=) v_old.cron_expr AND s.time_zone OPERATOR(pg_catalog.=) v_old.time_zone
       AND s.next_fire_at IS NOT NULL THEN
        v_next := s.next_fire_at;
    END IF;
    RETURN QUERY
    UPDATE broker.broker_schedule AS t
       SET schedule_name = s.schedule_name, cron_expr = s.cron_expr, execute_str = s.execute_str,
           time_zone = s.time_zone, job_queue = s.job_queue, job_priority = s.job_priority,
           job_language = s.job_language, run_as = s.run_as, max_attempts = s.max_attempts, job_group = s.job_group,
           catch_up = s.catch_up, catch_up_max = s.catch_up_max, overlap = s.overlap, job_timeout = s.job_timeout,
           job_search_path = s.job_search_path, autonomous = s.autonomous, concurrency_key = s.concurrency_key,
           next_fire_at = CASE WHEN s.enabled THEN v_next END, last_error = NULL
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
END;
$$;
COMMENT ON FUNCTION broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, interval, text, text, boolean, text, text) IS
    'Changes a schedule (NULL arguments keep a property; '''' resets its job group to its name, or clears its concurrency key); returns (schedule_id, next_fire_at).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_enable_schedule(p_schedule_name, p_enabled, p_tenant_id)
--   Enables (default) or disables a schedule; returns its next fire time
--   (NULL when disabled). Enabling plans the next fire from now: nothing is
--   caught up for the time it was disabled. p_tenant_id names the tenant for
--   this call only (as broker_add_job's).
-- Errors: those of broker._schedule_row; 22004 NULL p_enabled.
-- Example:
--   SELECT broker.broker_enable_schedule('nightly-rollup', false);   -- pause it
--   SELECT broker.broker_enable_schedule('nightly-rollup');          -- re-checked, planned again
--   Calls: _schedule_row, _schedule_check, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_enable_schedule(p_schedule_name text, p_enabled boolean DEFAULT true,
                                              p_tenant_id text DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_enable_schedule', p_tenant_id);
    s      broker.broker_schedule := broker._schedule_row('broker_enable_schedule', p_schedule_name);
    v_next timestamptz;
BEGIN
    IF p_enabled IS NULL THEN
        RAISE EXCEPTION 'broker_enable_schedule: p_enabled must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_enabled AND s.enabled AND s.next_fire_at IS NOT NULL THEN
        v_next := s.next_fire_at;      -- already enabled: keep the planned fire
    ELSIF p_enabled THEN
        s.enabled := true;
        v_next := broker._schedule_check('broker_enable_schedule', s);
    END IF;
    UPDATE broker.broker_schedule AS t
       SET enabled = p_enabled, next_fire_at = v_next, last_error = NULL
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
    PERFORM broker._schedule_notify();
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
    RETURN v_next;
END;
$$;
COMMENT ON FUNCTION broker.broker_enable_schedule(text, boolean, text) IS
    'Enables or disables a schedule; returns the next fire time (NULL when disabled).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_remove_schedule(p_schedule_name, p_missing_ok, p_tenant_id)
--   Deletes a schedule. Its jobs stay (their schedule_id becomes NULL).
--   Returns true when removed, false when missing and p_missing_ok.
--   p_tenant_id names the tenant for this call only (as broker_add_job's).
-- Errors: those of broker._schedule_row (unless p_missing_ok).
-- Example:
--   SELECT broker.broker_remove_schedule('nightly-rollup', p_missing_ok => true);
--   Calls: broker_current_tenant, _schedule_row, _schedule_notify
--   Tables: writes broker_schedule
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_remove_schedule(p_schedule_name text, p_missing_ok boolean DEFAULT false,
                                              p_tenant_id text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_remove_schedule', p_tenant_id);
    s broker.broker_schedule;
    v_removed boolean := false;
BEGIN
    IF NOT (p_missing_ok AND NOT EXISTS (SELECT 1 FROM broker.broker_schedule AS x
                                          WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                                            AND x.schedule_name OPERATOR(pg_catalog.=) p_schedule_name)) THEN
        s := broker._schedule_row('broker_remove_schedule', p_schedule_name);
        DELETE FROM broker.broker_schedule AS t WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
        PERFORM broker._schedule_notify();
        v_removed := true;
    END IF;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
    RETURN v_removed;
END;
$$;
COMMENT ON FUNCTION broker.broker_remove_schedule(text, boolean, text) IS
    'Removes a schedule (its jobs stay, unlinked); false if it did not exist and p_missing_ok.';
-- source: sql/schedules/run_now.sql
-- sql/schedules/run_now.sql: running a schedule's job now, by hand (broker_run_schedule_now).
-- ---------------------------------------------------------------------------
-- Function: broker.broker_run_schedule_now(p_schedule_name, p_tenant_id)
--   Enqueues one job of the schedule now, as a fire would (pg_cron #226,
--   "run this job now"): the job columns of broker._schedule_fire (name,
--   group, SQL, language, queue, priority, run_as, max_attempts, timeout,
--   search_path, autonomous, concurrency key, schedule_id; tenant = the
--   schedule's), claimable at once, with the NOTIFY of any new job. The
--   schedule's plan is left alone: next_fire_at and last_fire_at (the last
--   cron fire) do not move, and a disabled (paused) schedule runs now and
--   stays paused. Returns (job_id, is_new):
--   * the new job, is_new = true; it becomes the schedule's last_job_id, so
--     with overlap = skip the next fire waits for it as for a fired job;
--   * with overlap = skip and the previous job of the schedule
--     (last_job_id) still pending or running: that job, is_new = false,
--     and nothing is enqueued (the fire's overlap rule).
--   Who asked is the job's enqueued_by (the caller): the job is checked at
--   enqueue and again at run time (_authority_lost) against the caller's
--   rights, where a fire's are its owner's. It has no idempotency key (the
--   keys broker_schedule:* belong to fire times; a run now has none):
--   concurrent calls queue on the schedule's row lock, so overlap = skip
--   still enqueues one job.
--   As broker_enable_schedule: SECURITY INVOKER, so row-level security finds
--   the schedule in the current tenant (or p_tenant_id's, for this call
--   only) and only its owner or a member of that role may run it; under
--   strict tenancy another tenant's schedule is not there (42704).
-- Errors: those of broker._schedule_row (22004 NULL name, 42704 no such
--   schedule in the tenant, 42501 not its owner) and of broker._call_tenant;
--   those of broker._check_run_as (42704 the run_as role is gone, 42501 the
--   caller may not run jobs as it) and broker._check_autonomous.
-- Example:
--   SELECT * FROM broker.broker_run_schedule_now('nightly-rollup');   -- (job_id, is_new)
--   Calls: _call_tenant, _schedule_row, _check_run_as, _check_autonomous, _schedule_job_name, _end_call_tenant
--   Tables: reads broker_jobs, writes broker_jobs, broker_schedule
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_run_schedule_now(p_schedule_name text, p_tenant_id text DEFAULT NULL)
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := broker._call_tenant('broker_run_schedule_now', p_tenant_id);
    s      broker.broker_schedule := broker._schedule_row('broker_run_schedule_now', p_schedule_name);
    v_id   bigint;
BEGIN
    -- the fire's overlap rule (the tick's, sql/schedules/tick.sql)
    SELECT j.job_id INTO v_id FROM broker.broker_jobs AS j
     WHERE s.overlap OPERATOR(pg_catalog.=) 'skip' AND j.job_id OPERATOR(pg_catalog.=) s.last_job_id
       AND j.tenant_id OPERATOR(pg_catalog.=) s.tenant_id AND j.complete_status OPERATOR(pg_catalog.<=) 1;
    IF FOUND THEN
        PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
        RETURN QUERY SELECT v_id, false;
        RETURN;
    END IF;
    -- the policies would refuse these too; checked first for messages that name this function
    PERFORM broker._check_run_as('broker_run_schedule_now', s.run_as);
    PERFORM broker._check_autonomous('broker_run_schedule_now', s.execute_str, s.job_language, s.run_as, s.autonomous);
    -- the columns of a fire (broker._schedule_fire) that an enqueuer may write; tenant_id and enqueued_by
    -- take their defaults, the current tenant (the schedule's) and the caller
    INSERT INTO broker.broker_jobs AS j
           (job_name, job_group, execute_str, job_language, job_queue, job_priority, run_as, schedule_id,
            max_attempts, run_after, job_timeout, job_search_path, autonomous, concurrency_key)
    VALUES (broker._schedule_job_name(s), COALESCE(s.job_group, s.schedule_name), s.execute_str, s.job_language, s.job_queue,
            s.job_priority, s.run_as, s.schedule_id, s.max_attempts, pg_catalog.now(), s.job_timeout,
            s.job_search_path, s.autonomous, s.concurrency_key)
    RETURNING j.job_id INTO v_id;
    UPDATE broker.broker_schedule AS t SET last_job_id = v_id
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
    PERFORM broker._end_call_tenant(p_tenant_id, v_saved);
    RETURN QUERY SELECT v_id, true;
END;
$$;
COMMENT ON FUNCTION broker.broker_run_schedule_now(text, text) IS
    'Enqueues one job of a schedule now, as a fire would, without moving its next fire (a paused schedule stays paused); returns (job_id, is_new): is_new false when overlap = skip and its previous job is still unfinished.';
-- source: sql/schedules/triggers.sql
-- sql/schedules/triggers.sql: the triggers of broker_schedule (checks, quota).
-- ---------------------------------------------------------------------------
-- The triggers of broker_schedule: what holds however a schedule is written
-- (through the functions of schedules.sql or by a raw INSERT or UPDATE).
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Trigger function: broker._schedule_before_write()
--   Row-level BEFORE INSERT OR UPDATE on broker_schedule, SECURITY INVOKER:
--   for writers other than the administrators (enqueuers, through the
--   functions or directly) a next_fire_at in the past becomes now, so nobody
--   can make the tick walk years of missed fires; the tick itself (running as
--   the owner, broker_admin), superusers and BYPASSRLS roles are exempt.
--   Calls: _is_broker_admin
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_before_write()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.next_fire_at OPERATOR(pg_catalog.<) pg_catalog.now()
       AND (TG_OP OPERATOR(pg_catalog.=) 'INSERT' OR NEW.next_fire_at IS DISTINCT FROM OLD.next_fire_at)
       -- (_is_broker_admin covers superusers; BYPASSRLS roles are exempt here too)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r
                        WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND r.rolbypassrls)
       AND NOT broker._is_broker_admin(CURRENT_USER) THEN
        NEW.next_fire_at := pg_catalog.now();
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._schedule_before_write() IS
    'Internal trigger: a next_fire_at in the past written by a role other than an administrator (broker_admin, superuser, BYPASSRLS) becomes now (no unbounded catch-up).';

CREATE OR REPLACE TRIGGER broker_schedule_before_write_trg
    BEFORE INSERT OR UPDATE OF next_fire_at ON broker.broker_schedule
    FOR EACH ROW EXECUTE FUNCTION broker._schedule_before_write();
COMMENT ON TRIGGER broker_schedule_before_write_trg ON broker.broker_schedule IS
    'Clamps a past next_fire_at written by roles other than administrators to now.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._schedule_count()
--   Row-level on broker_schedule (BEFORE INSERT OR UPDATE OF tenant_id,
--   AFTER DELETE), SECURITY DEFINER: keeps broker_schedule_count, and
--   refuses (53400) a schedule beyond its tenant's quota,
--   max_schedules_per_tenant (broker_config, default 1,000), however it is
--   written: the tick's work grows with the due schedules, so no tenant may
--   make it arbitrarily large. Only a write of a schedule of that tenant
--   locks the tenant's count row (a trigger cannot be called directly, and
--   no role may touch the table), and a writer that the policies then
--   refuse gives it back with its (sub)transaction.
-- Calls: broker._setting_int
-- Tables: broker_schedule_count (upsert, update), broker_schedule (count,
--   when the tenant has no count row yet)
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_count()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_max integer;
    v_n   integer;
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.tenant_id IS DISTINCT FROM OLD.tenant_id) THEN
        UPDATE broker.broker_schedule_count AS c SET schedules = GREATEST(c.schedules - 1, 0)
         WHERE c.tenant_id = OLD.tenant_id;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id THEN
        v_max := broker._setting_int('max_schedules_per_tenant', 1000, 1);
        INSERT INTO broker.broker_schedule_count AS c (tenant_id, schedules)
        VALUES (NEW.tenant_id, 1 + (SELECT pg_catalog.count(*) FROM broker.broker_schedule AS s
                                     WHERE s.tenant_id = NEW.tenant_id))
        ON CONFLICT (tenant_id) DO UPDATE SET schedules = c.schedules + 1
        RETURNING c.schedules INTO v_n;
        IF v_n > v_max THEN
            RAISE EXCEPTION 'tenant % already has % schedules, the most it may have', pg_catalog.quote_literal(NEW.tenant_id), v_max
                USING ERRCODE = 'configuration_limit_exceeded',
                      HINT = 'Remove schedules it no longer needs, or have broker_admin raise max_schedules_per_tenant (broker_set).';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._schedule_count() IS
    'Internal trigger: keeps broker_schedule_count and refuses (53400) a schedule beyond the tenant''s quota max_schedules_per_tenant.';

CREATE OR REPLACE TRIGGER broker_schedule_count_trg
    BEFORE INSERT OR UPDATE OF tenant_id ON broker.broker_schedule
    FOR EACH ROW EXECUTE FUNCTION broker._schedule_count();
COMMENT ON TRIGGER broker_schedule_count_trg ON broker.broker_schedule IS
    'The per-tenant schedule quota (max_schedules_per_tenant) and its count.';
CREATE OR REPLACE TRIGGER broker_schedule_count_delete_trg
    AFTER DELETE ON broker.broker_schedule
    FOR EACH ROW EXECUTE FUNCTION broker._schedule_count();
COMMENT ON TRIGGER broker_schedule_count_delete_trg ON broker.broker_schedule IS
    'A removed schedule no longer counts against its tenant''s quota.';
-- source: sql/schedules/tick.sql
-- sql/schedules/tick.sql: the tick: enqueueing the jobs of due schedules.
-- ---------------------------------------------------------------------------
-- Function: broker._schedule_fire(s, p_fires)
--   Enqueues one job per fire time in p_fires for schedule row s, in the
--   schedule owner's name (enqueued_by = created_by), for its tenant, with
--   its concurrency key, and returns how many were new. The idempotency key
--   'broker_schedule:<schedule_id>:<fire time as epoch>' makes a fire that
--   still has an unfinished job a no-op. Called only by the tick.
--   Calls: _schedule_job_name
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_fire(s broker.broker_schedule, p_fires timestamptz[])
RETURNS TABLE (jobs integer, last_job_id bigint, last_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_fire timestamptz;
    v_id   bigint;
BEGIN
    jobs := 0;
    FOREACH v_fire IN ARRAY p_fires LOOP
        INSERT INTO broker.broker_jobs AS j
               (tenant_id, job_name, job_group, execute_str, job_language, job_queue, job_priority, run_as,
                enqueued_by, schedule_id, idempotency_key, max_attempts, run_after, job_timeout, job_search_path,
                autonomous, concurrency_key)
        VALUES (s.tenant_id, broker._schedule_job_name(s), COALESCE(s.job_group, s.schedule_name), s.execute_str, s.job_language,
                s.job_queue, s.job_priority, s.run_as, s.created_by, s.schedule_id,
                pg_catalog.format('broker_schedule:%s:%s', s.schedule_id, pg_catalog.date_part('epoch', v_fire)),
                s.max_attempts, pg_catalog.now(), s.job_timeout, s.job_search_path, s.autonomous, s.concurrency_key)
        ON CONFLICT (tenant_id, idempotency_key)
           WHERE idempotency_key IS NOT NULL AND complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
        DO NOTHING
        RETURNING j.job_id INTO v_id;
        IF v_id IS NOT NULL THEN
            jobs := jobs OPERATOR(pg_catalog.+) 1;
            last_job_id := v_id;
            last_fire_at := v_fire;
        END IF;
    END LOOP;
    RETURN NEXT;
END;
$$;
COMMENT ON FUNCTION broker._schedule_fire(broker.broker_schedule, timestamptz[]) IS
    'Internal: the tick''s enqueue of one job per fire time for a schedule, idempotent per (schedule, fire time).';

-- ---------------------------------------------------------------------------
-- Function: broker._skipped_fires_cap()
--   The most skipped fires one tick adds to a schedule's skipped_fires: an
--   outage that skipped more adds this many and sets skipped_fires_capped,
--   so the tick's work stays bounded however long the outage was.
--   Calls: broker_cron_next
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._skipped_fires_cap()
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
RETURN 1000;
COMMENT ON FUNCTION broker._skipped_fires_cap() IS
    'Internal: the most skipped fires one tick counts for a schedule (beyond it skipped_fires_capped is set).';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_due(s, p_now)
--   The due fires of schedule row s (fire times <= p_now) that its catch-up
--   policy may still enqueue, oldest first; how many fires were due
--   (missed: exact while it is at most 1,000 plus the fires the policy keeps,
--   else that bound, with capped = true); and the next fire after p_now.
--   Bounded work whatever next_fire_at says: it counts forward from
--   next_fire_at up to that bound; past it, the fires the policy keeps are
--   found by scanning back from p_now over a window that grows fourfold until
--   it holds enough of them. At most 100,000 fires are evaluated.
-- Calls: broker.broker_cron_next
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_due(s broker.broker_schedule, p_now timestamptz,
    OUT fires timestamptz[], OUT missed integer, OUT capped boolean, OUT next_fire timestamptz)
RETURNS record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_need   integer := CASE WHEN s.catch_up = 'all' THEN s.catch_up_max ELSE 1 END;
    v_count  integer := broker._skipped_fires_cap() + v_need;
    v_window interval;
    v_fire   timestamptz := s.next_fire_at;
    v_budget integer := 100000;
    v_seen   integer;
BEGIN
    -- forward from next_fire_at: exact while the outage is short
    fires := ARRAY[]::timestamptz[];
    missed := 0;
    WHILE v_fire <= p_now AND missed < v_count AND missed < v_budget LOOP
        fires := fires || v_fire;
        missed := missed + 1;
        v_fire := broker.broker_cron_next(s.cron_expr, v_fire, s.time_zone);
    END LOOP;
    capped := v_fire <= p_now;
    IF capped THEN
        -- a longer outage: the latest v_need fires, scanning back from p_now
        v_budget := v_budget - missed;
        v_window := pg_catalog.make_interval(mins => v_need + 1);
        LOOP
            fires := ARRAY[]::timestamptz[];
            v_fire := broker.broker_cron_next(s.cron_expr, p_now - v_window, s.time_zone);
            WHILE v_fire <= p_now LOOP
                fires := fires || v_fire;
                v_budget := v_budget - 1;
                IF v_budget < 0 THEN
                    RAISE EXCEPTION 'catch-up of schedule % evaluated 100000 fires without reaching now', s.schedule_id
                        USING ERRCODE = 'program_limit_exceeded';
                END IF;
                v_fire := broker.broker_cron_next(s.cron_expr, v_fire, s.time_zone);
            END LOOP;
            EXIT WHEN pg_catalog.cardinality(fires) >= v_need OR p_now - v_window <= s.next_fire_at;
            v_window := v_window * 4;
        END LOOP;
    END IF;
    next_fire := v_fire;
    v_seen := pg_catalog.cardinality(fires);
    -- keep what the policy may enqueue
    fires := CASE
        WHEN v_seen = 0 THEN fires
        WHEN fires[v_seen] >= p_now - interval '60 seconds' AND s.catch_up <> 'all'
            THEN fires[v_seen:]                                        -- on time
        WHEN s.catch_up = 'none' THEN ARRAY[]::timestamptz[]
        WHEN s.catch_up = 'one' THEN fires[v_seen:]
        ELSE fires[GREATEST(1, v_seen - s.catch_up_max + 1):]
    END;
END;
$$;
COMMENT ON FUNCTION broker._schedule_due(broker.broker_schedule, timestamptz) IS
    'Internal: a schedule''s due fires its catch-up policy keeps, how many fires were due (exact up to a bound), and the next fire (bounded work).';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_tick_at(p_now, p_max_schedules)
--   The tick at instant p_now: enqueues the jobs of the due fires (fire
--   time <= p_now) of at most p_max_schedules enabled schedules (all
--   tenants) and plans each one's next fire after p_now. Returns how many
--   jobs it enqueued, the earliest next fire time of all enabled schedules,
--   and the seconds from the server clock until then, so a runner can sleep
--   exactly that long: NULL when no schedule is enabled, 0 when due
--   schedules are left for the next call, 1 when a due schedule was locked
--   by someone else and must be tried again.
--   * Bounded and fair: one call (one transaction) handles at most
--     p_max_schedules schedules, taking the tenants in turn (each tenant's
--     most overdue schedule first, then each one's second, ...), so a tenant
--     with thousands of due schedules delays another's fire by one call at
--     the most, and no tick transaction grows with one tenant's schedules.
--   broker_schedule_tick() calls it with now(). Only the broker's owner (an
--   administrator) may name another instant: a later one fires future jobs
--   early. Tests hand it fixed instants, so no outcome depends on the date.
--   * Exactly once: each due schedule row is locked (FOR NO KEY UPDATE SKIP
--     LOCKED) and its next_fire_at moves past p_now in the same transaction,
--     so two ticks at the same moment enqueue each fire once; the
--     idempotency key per (schedule, fire time) backs it up.
--   * Missed fires (the runner was down): a fire more than 60 seconds late
--     is missed. catch_up = none drops them, one (default) enqueues one job
--     for the latest missed fire, all enqueues one per missed fire (the
--     latest catch_up_max). A fire on time always enqueues its job.
--   * skipped_fires: every due fire that enqueued no job (dropped by the
--     catch-up policy, skipped for overlap, or its key still taken) adds
--     one, exactly, up to broker._skipped_fires_cap() per tick; a tick that
--     skipped more adds the cap and sets skipped_fires_capped, so the
--     column is then a lower bound.
--   * Overlap: with overlap = skip (default), nothing is enqueued while the
--     previous job of the schedule (last_job_id, a job of its tenant: its
--     owner may write the column, broker_run_schedule_now) is pending or
--     running.
--   * A schedule whose owner (created_by) may no longer run jobs as run_as
--     or act for its tenant, or that cannot be evaluated any more (say its
--     time zone was removed), is disabled, with the reason in last_error.
--   SECURITY DEFINER (the runner has no BYPASSRLS): it must see every
--   tenant's schedules; the jobs carry the schedule's tenant and owner.
-- Calls: broker._authority_lost, broker._schedule_due, broker._schedule_fire,
--   broker.broker_cron_next, broker._skipped_fires_cap
-- Tables: broker_schedule (read, lock, update), broker_jobs (read; insert
--   through _schedule_fire)
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._schedule_tick_at(p_now timestamptz, p_max_schedules integer DEFAULT 100,
    OUT jobs_enqueued integer, OUT next_fire_at timestamptz, OUT seconds_until_next double precision)
RETURNS record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s           broker.broker_schedule;
    v_cap       integer := broker._skipped_fires_cap();
    v_fires     timestamptz[];
    v_next      timestamptz;
    v_missed    integer;
    v_capped    boolean;
    v_jobs      integer;
    v_last_job  bigint;
    v_last_fire timestamptz;
    v_error     text;
    v_done      integer := 0;
BEGIN
    IF p_now IS NULL OR NOT pg_catalog.isfinite(p_now) THEN
        RAISE EXCEPTION '_schedule_tick_at: p_now must be a finite instant' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_schedules IS NULL OR p_max_schedules < 1 THEN
        RAISE EXCEPTION '_schedule_tick_at: p_max_schedules must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    jobs_enqueued := 0;
    FOR s IN
        -- NO KEY UPDATE: does not wait for, nor skip on, the key-share locks that inserting a job of the
        -- schedule takes; SKIP LOCKED: a schedule another tick (or its owner) holds is left to it. The
        -- conditions on x are checked again on the row version locked (one another tick just moved on).
        SELECT x.* FROM broker.broker_schedule AS x
          JOIN (SELECT d.schedule_id, d.next_fire_at,
                       pg_catalog.row_number() OVER (PARTITION BY d.tenant_id
                                                     ORDER BY d.next_fire_at NULLS FIRST, d.schedule_id) AS turn
                  FROM broker.broker_schedule AS d
                 WHERE d.enabled AND (d.next_fire_at IS NULL OR d.next_fire_at <= p_now)) AS r
            ON r.schedule_id = x.schedule_id
         WHERE x.enabled AND (x.next_fire_at IS NULL OR x.next_fire_at <= p_now)
         ORDER BY r.turn, r.next_fire_at NULLS FIRST, x.schedule_id
         LIMIT p_max_schedules
           FOR NO KEY UPDATE OF x SKIP LOCKED
    LOOP
        v_done := v_done + 1;
        v_next := NULL;
        v_missed := 0;
        v_capped := false;
        v_jobs := 0;
        v_last_job := NULL;
        v_last_fire := NULL;
        BEGIN
            v_error := broker._authority_lost(s.created_by, s.tenant_id, s.run_as, 'owner');
            IF v_error IS NULL AND s.next_fire_at IS NULL THEN
                -- written directly without a plan: plan it, fire nothing now
                v_next := broker.broker_cron_next(s.cron_expr, p_now, s.time_zone);
                v_error := CASE WHEN v_next IS NULL THEN 'the cron expression never fires' END;
            ELSIF v_error IS NULL THEN
                SELECT d.fires, d.missed, d.capped, d.next_fire INTO v_fires, v_missed, v_capped, v_next
                  FROM broker._schedule_due(s, p_now) AS d;                     -- v_next NULL: never again
                IF s.overlap = 'skip' AND EXISTS (
                    SELECT 1 FROM broker.broker_jobs AS j
                     WHERE j.job_id = s.last_job_id AND j.tenant_id = s.tenant_id AND j.complete_status <= 1) THEN
                    v_fires := ARRAY[]::timestamptz[];
                END IF;
                IF pg_catalog.cardinality(v_fires) > 0 THEN
                    SELECT f.jobs, f.last_job_id, f.last_fire_at INTO v_jobs, v_last_job, v_last_fire
                      FROM broker._schedule_fire(s, v_fires) AS f;
                END IF;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_error = MESSAGE_TEXT;
        END;
        IF v_error IS NOT NULL THEN
            RAISE WARNING 'broker_schedule_tick: disabled schedule % (tenant %): %', pg_catalog.quote_literal(s.schedule_name),
                pg_catalog.quote_literal(s.tenant_id), v_error;
            UPDATE broker.broker_schedule AS t
               SET enabled = false, next_fire_at = NULL, last_error = v_error
             WHERE t.schedule_id = s.schedule_id;
        ELSE
            jobs_enqueued := jobs_enqueued + v_jobs;
            UPDATE broker.broker_schedule AS t
               SET next_fire_at = v_next,
                   last_fire_at = COALESCE(v_last_fire, t.last_fire_at),
                   last_job_id = COALESCE(v_last_job, t.last_job_id),
                   skipped_fires = t.skipped_fires + LEAST(v_missed - v_jobs, v_cap),
                   skipped_fires_capped = t.skipped_fires_capped OR v_capped OR v_missed - v_jobs > v_cap
             WHERE t.schedule_id = s.schedule_id;
        END IF;
    END LOOP;
    next_fire_at := (SELECT pg_catalog.min(x.next_fire_at) FROM broker.broker_schedule AS x WHERE x.enabled);
    -- a fire still due here was left for the next call (come back at once) or belongs to a schedule
    -- that was locked (come back in a second). The seconds count from the server clock as it is now,
    -- p_now advanced by the time this call took.
    seconds_until_next := CASE
        WHEN next_fire_at IS NULL THEN NULL
        WHEN next_fire_at <= p_now AND v_done >= p_max_schedules THEN 0
        WHEN next_fire_at <= p_now THEN 1
        ELSE GREATEST(0, pg_catalog.date_part('epoch',
                 next_fire_at - (p_now + (pg_catalog.clock_timestamp() - pg_catalog.now())))) END;
END;
$$;
COMMENT ON FUNCTION broker._schedule_tick_at(timestamptz, integer) IS
    'Internal: one bounded, tenant-fair schedule tick at a given instant (broker_schedule_tick passes now()); administrators only.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_schedule_tick()
--   The runner's tick: broker._schedule_tick_at(now()), see there: at most
--   100 schedules per call, the tenants in turn; seconds_until_next = 0 says
--   that more are due. Returns (jobs_enqueued, next_fire_at,
--   seconds_until_next).
-- Calls: broker._schedule_tick_at
-- Example:
--   SELECT * FROM broker.broker_schedule_tick();   -- the runner's active instance calls it
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_schedule_tick(
    OUT jobs_enqueued integer, OUT next_fire_at timestamptz, OUT seconds_until_next double precision)
RETURNS record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT t.jobs_enqueued, t.next_fire_at, t.seconds_until_next
      INTO jobs_enqueued, next_fire_at, seconds_until_next
      FROM broker._schedule_tick_at(pg_catalog.now()) AS t;
END;
$$;
COMMENT ON FUNCTION broker.broker_schedule_tick() IS
    'Enqueues each due schedule fire exactly once (catch-up and overlap policies), plans the next fires; returns (jobs_enqueued, next_fire_at, seconds_until_next).';
-- source: sql/instances/instances.sql
-- sql/instances/instances.sql: runner instances: register, ping, shut down, the active one.
-- ---------------------------------------------------------------------------
-- Function: broker._instance_lock_holder()
--   The backend pid that holds the active-instance session advisory lock of
--   this database, or NULL when no session holds it.
--   Calls: _instance_lock_key
--   Tables: none (pg_locks)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._instance_lock_holder()
RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT l.pid
      FROM pg_catalog.pg_locks AS l, broker._instance_lock_key() AS k
     WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted
       AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
                                               WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
       AND l.classid::integer OPERATOR(pg_catalog.=) k.classid
       AND l.objid::integer OPERATOR(pg_catalog.=) k.objid AND l.objsubid OPERATOR(pg_catalog.=) 2
     LIMIT 1
$$;
COMMENT ON FUNCTION broker._instance_lock_holder() IS
    'Internal: the pid of the session holding the active-instance advisory lock of this database, or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._live_instance()
--   The active instance whose session is alive (it holds the instance lock),
--   or NULL: a row still marked active whose session ended (the runner was
--   killed, or cut off until the server ended its session) is not live.
--   Calls: _instance_lock_holder
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._live_instance()
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT i.instance_id
      FROM broker.broker_queueinstance AS i
     WHERE i.status OPERATOR(pg_catalog.=) 'active'
       AND i.backend_pid OPERATOR(pg_catalog.=) broker._instance_lock_holder()
$$;
COMMENT ON FUNCTION broker._live_instance() IS
    'Internal: the id of the active instance when its session holds the instance lock, else NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker._take_instance_lock(p_caller)
--   Takes the broker's session advisory lock for the calling session, or
--   raises 55P03 naming the instance that holds it (p_caller names the public
--   function in the message).
--   Calls: _instance_lock_key
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._take_instance_lock(p_caller text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key    record := broker._instance_lock_key();
    v_active broker.broker_queueinstance;
BEGIN
    IF pg_catalog.pg_try_advisory_lock(v_key.classid, v_key.objid) THEN
        RETURN;
    END IF;
    SELECT * INTO v_active FROM broker.broker_queueinstance AS i WHERE i.status OPERATOR(pg_catalog.=) 'active';
    RAISE EXCEPTION '%: database % already has an active broker instance', p_caller, pg_catalog.current_database()
        USING ERRCODE = 'lock_not_available',
              DETAIL = CASE WHEN v_active.instance_id IS NULL THEN 'Its registration is in progress.'
                       ELSE pg_catalog.format('Instance %s (%s on %s, pid %s), last ping %s.', v_active.instance_id,
                            v_active.instance_name, COALESCE(v_active.hostname, '?'),
                            COALESCE(v_active.os_pid::text, '?'), v_active.last_ping_at) END,
              HINT = 'Run this one as a standby: retry until the active instance stops.';
END;
$$;
COMMENT ON FUNCTION broker._take_instance_lock(text) IS
    'Internal: takes the active-instance session advisory lock, or raises 55P03 naming the holder.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_register_instance(p_instance_name, p_hostname,
--     p_os_pid, p_queue_count, p_broker_version)
--   Makes the calling session the one active broker instance of this database:
--   takes the broker's session advisory lock (kept until broker_shutdown_instance,
--   broker_park_instance or the session ends), marks any earlier active row dead
--   (its session is gone, or it could not have released the lock) and a parked
--   one stopped, and returns the new id.
-- Errors: 55P03 another live session is the active instance (a standby keeps
--   retrying); 55000 this session is already registered; 22023 bad arguments.
-- Example:
--   SELECT broker.broker_register_instance('runner-1', 'host-a', 4242, 4, 'pgsql-broker 0.3.0');
--   Calls: _instance_lock_holder, _take_instance_lock
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_register_instance(
    p_instance_name  text,
    p_hostname       text    DEFAULT NULL,
    p_os_pid         integer DEFAULT NULL,
    p_queue_count    integer DEFAULT 4,
    p_broker_version text    DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_active broker.broker_queueinstance;
    v_id     bigint;
BEGIN
    IF p_instance_name IS NULL OR pg_catalog.btrim(p_instance_name) OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'broker_register_instance: p_instance_name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_queue_count IS NULL OR p_queue_count OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_register_instance: p_queue_count must be >= 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_active FROM broker.broker_queueinstance AS i WHERE i.status OPERATOR(pg_catalog.=) 'active';
    IF FOUND AND v_active.backend_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
       AND broker._instance_lock_holder() OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() THEN
        RAISE EXCEPTION 'broker_register_instance: this session is already active instance %', v_active.instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    PERFORM broker._take_instance_lock('broker_register_instance');
    -- We hold the lock, so any row still marked active belongs to a dead session, and a parked one to a
    -- runner that is between two visits: this instance replaces it.
    UPDATE broker.broker_queueinstance AS i
       SET status = CASE WHEN i.status OPERATOR(pg_catalog.=) 'parked' THEN 'stopped' ELSE 'dead' END,
           stopped_at = COALESCE(i.stopped_at, pg_catalog.clock_timestamp())
     WHERE i.status OPERATOR(pg_catalog.=) ANY (ARRAY['active', 'parked']);
    INSERT INTO broker.broker_queueinstance (instance_name, hostname, os_pid, queue_count, broker_version)
    VALUES (p_instance_name, p_hostname, p_os_pid, p_queue_count, p_broker_version)
    RETURNING instance_id INTO v_id;
    RETURN v_id;
END;
$$;
COMMENT ON FUNCTION broker.broker_register_instance(text, text, integer, integer, text) IS
    'Registers the calling session as the single active broker instance of the database (session advisory lock); 55P03 while another is alive.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_ping_instance(p_instance_id)
--   Heartbeat of the active instance; returns the ping time.
-- Errors: 55000 the instance is not active or this session does not own it.
-- Example:
--   SELECT broker.broker_ping_instance(7);   -- from the session that registered instance 7
--   Calls: none
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_ping_instance(p_instance_id bigint)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    UPDATE broker.broker_queueinstance AS i
       SET last_ping_at = v_now
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id
       AND i.status OPERATOR(pg_catalog.=) 'active'
       AND i.backend_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid();
    IF NOT FOUND THEN
        RAISE EXCEPTION 'broker_ping_instance: instance % is not the active instance of this session', p_instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Register again with broker_register_instance.';
    END IF;
    RETURN v_now;
END;
$$;
COMMENT ON FUNCTION broker.broker_ping_instance(bigint) IS
    'Heartbeat of the active instance (must be called from the session that registered it); returns the ping time.';

-- ---------------------------------------------------------------------------
-- Function: broker._end_visit(p_instance_id, p_status, p_caller)
--   The active instance of the calling session becomes p_status (stopped or
--   parked) and the advisory lock is released; false when the instance is not
--   active. 55000 (naming p_caller) when it is active in another session.
--   Calls: _instance_lock_key
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._end_visit(p_instance_id bigint, p_status text, p_caller text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key record := broker._instance_lock_key();
    v_pid integer;
BEGIN
    SELECT i.backend_pid INTO v_pid FROM broker.broker_queueinstance AS i
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id AND i.status OPERATOR(pg_catalog.=) 'active';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() THEN
        RAISE EXCEPTION '%: instance % is not the active instance of this session', p_caller, p_instance_id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Stop or park it from its own session (stop the runner), or terminate that session.';
    END IF;
    UPDATE broker.broker_queueinstance AS i
       SET status = p_status, stopped_at = pg_catalog.clock_timestamp()
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id;
    PERFORM pg_catalog.pg_advisory_unlock(v_key.classid, v_key.objid);
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker._end_visit(bigint, text, text) IS
    'Internal: the active instance of this session becomes stopped or parked and releases the active-instance lock.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_shutdown_instance(p_instance_id)
--   Clean shutdown, from the instance's own session (as ping): marks the
--   instance stopped and releases the advisory lock so a standby can take
--   over at once. A parked instance (broker_park_instance) holds no session:
--   any session may stop it. Returns true when the instance was active or
--   parked, false when it was not (already stopped, or dead).
-- Errors: 55000 the instance is active in another session.
-- Example:
--   SELECT broker.broker_shutdown_instance(7);   -- from the session that registered instance 7
--   Calls: _end_visit
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_shutdown_instance(p_instance_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE broker.broker_queueinstance AS i SET status = 'stopped'
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id AND i.status OPERATOR(pg_catalog.=) 'parked';
    RETURN FOUND OR broker._end_visit(p_instance_id, 'stopped', 'broker_shutdown_instance');
END;
$$;
COMMENT ON FUNCTION broker.broker_shutdown_instance(bigint) IS
    'Marks the instance of this session stopped and releases the active-instance lock (a parked instance: from any session); returns true when it was active or parked. 55000 when it is active in another session.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_park_instance(p_instance_id)
--   For a runner that serves more databases than it may hold sessions to
--   (max_open_conns_total): from the instance's own session, marks it parked
--   and releases the advisory lock, so the runner can close this session and
--   visit the database again later with broker_resume_instance. A parked
--   instance is still the database's current one (no second instance may be
--   parked or active beside it) until another instance registers, which stops
--   it. Returns true when the instance was active, false when it was not.
-- Errors: 55000 the instance is active in another session.
-- Example:
--   SELECT broker.broker_park_instance(7);   -- from the session that registered instance 7
--   Calls: _end_visit
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_park_instance(p_instance_id bigint)
RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT broker._end_visit(p_instance_id, 'parked', 'broker_park_instance')
$$;
COMMENT ON FUNCTION broker.broker_park_instance(bigint) IS
    'Marks the instance of this session parked (its runner visits the database in turns) and releases the active-instance lock; true when it was active. 55000 from another session.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_resume_instance(p_instance_id)
--   A runner's next visit to a database it parked: takes the advisory lock
--   and makes the parked instance active again in the calling session, with
--   the same id (its claims and history stay under it). Returns false, and
--   keeps no lock, when the instance is no longer parked (another instance
--   registered meanwhile): the caller registers anew.
-- Errors: 55P03 another live session is the active instance; 22023 NULL id.
-- Example:
--   SELECT broker.broker_resume_instance(7);
--   Calls: _instance_lock_key, _take_instance_lock
--   Tables: writes broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_resume_instance(p_instance_id bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key record := broker._instance_lock_key();
BEGIN
    IF p_instance_id IS NULL THEN
        RAISE EXCEPTION 'broker_resume_instance: p_instance_id must not be NULL' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM broker._take_instance_lock('broker_resume_instance');
    UPDATE broker.broker_queueinstance AS i
       SET status = 'active', stopped_at = NULL, backend_pid = pg_catalog.pg_backend_pid(),
           last_ping_at = pg_catalog.clock_timestamp()
     WHERE i.instance_id OPERATOR(pg_catalog.=) p_instance_id AND i.status OPERATOR(pg_catalog.=) 'parked';
    IF NOT FOUND THEN
        PERFORM pg_catalog.pg_advisory_unlock(v_key.classid, v_key.objid);
        RETURN false;
    END IF;
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_resume_instance(bigint) IS
    'Makes a parked instance active again in the calling session (takes the active-instance lock); false, without the lock, when it is no longer parked. 55P03 while another instance is active.';

-- ---------------------------------------------------------------------------
-- Function: broker._active_instance()
--   The id of the active instance, or NULL when none is active. PL/pgSQL,
--   not SQL: a SQL function with SET is planned again at every call (every
--   claim calls it).
--   Calls: none
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._active_instance()
RETURNS bigint
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT i.instance_id FROM broker.broker_queueinstance AS i
             WHERE i.status OPERATOR(pg_catalog.=) 'active' ORDER BY i.instance_id DESC LIMIT 1);
END;
$$;
COMMENT ON FUNCTION broker._active_instance() IS
    'Internal: the id of the active runner instance, or NULL.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_stale_instance_holder(p_stale_after)
--   For a standby: the backend pid holding the instance lock when that
--   backend is the registered active instance and its row has not been
--   pinged for p_stale_after (an active runner pings every second): the lock
--   was left behind, typically on a server connection of a transaction-pooling
--   pooler that the runner's session went through, where it outlives the
--   runner. NULL otherwise (no holder, a live one, or a holder that is not the
--   active instance's backend). It only names the backend: the caller ends it
--   with pg_terminate_backend, which PostgreSQL allows for a backend of the
--   caller's own role (the runner's login), so a standby can never end
--   another role's session through this function.
-- Errors: 22023 p_stale_after NULL or under 1 second.
-- Example:
--   SELECT pg_terminate_backend(pid, 5000)
--     FROM broker.broker_stale_instance_holder(interval '60 seconds') AS pid WHERE pid IS NOT NULL;
--   Calls: _live_instance
--   Tables: reads broker_queueinstance
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_stale_instance_holder(p_stale_after interval)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_stale_after IS NULL OR p_stale_after OPERATOR(pg_catalog.<) interval '1 second' THEN
        RAISE EXCEPTION 'broker_stale_instance_holder: p_stale_after must be at least 1 second'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN (SELECT i.backend_pid
              FROM broker.broker_queueinstance AS i
             WHERE i.instance_id OPERATOR(pg_catalog.=) broker._live_instance()
               AND i.backend_pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
               AND i.last_ping_at OPERATOR(pg_catalog.<) (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) p_stale_after)
             LIMIT 1);
END;
$$;
COMMENT ON FUNCTION broker.broker_stale_instance_holder(interval) IS
    'For a standby: the pid of the backend holding the instance lock when it is the active instance and has not pinged for p_stale_after (a lock left behind); else NULL.';
-- source: sql/instances/finished_counts.sql
-- sql/instances/finished_counts.sql: the per-minute counters of finished jobs behind broker_queue_stats.
-- ---------------------------------------------------------------------------
-- The finished-job counters behind broker_queue_stats() (table
-- broker.broker_finished_count): triggers on broker_jobs append a delta row
-- (+n or -n per key and statement, +1 for a row inserted finished) whenever the count of
-- finished jobs of a minute, queue, tenant and final state changes, whoever
-- writes the table (the finish functions, the purge, a direct write). Rows
-- are only ever appended by writers, so concurrent finishes never wait on
-- each other here.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._finished_minute(p_finished_at)
--   The counters' minute of a finish time: date_bin, so the same whatever the
--   session's TimeZone (date_trunc would follow it). No SET clause, so that it
--   is inlined into the triggers and queries that call it (a SET clause stops
--   inlining); everything in it is qualified (sql/pgspot-no-search-path.txt).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._finished_minute(p_finished_at timestamptz)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.date_bin(interval '1 minute', p_finished_at, timestamptz '2000-01-01 00:00:00+00') $$;
COMMENT ON FUNCTION broker._finished_minute(timestamptz) IS
    'Internal: the minute (date_bin, independent of TimeZone) under which broker_finished_count counts a finish time.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished()
--   Row-level AFTER INSERT, fired only (the trigger's WHEN, checked without
--   a function call) for a job written already finished: +1 for its key. An
--   enqueue costs nothing here.
--   Calls: _finished_minute
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._count_finished()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
    VALUES (broker._finished_minute(NEW.finished_at), NEW.job_queue, NEW.tenant_id, NEW.complete_status, 1);
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished() IS
    'Internal trigger: appends to broker_finished_count the +1 of a job inserted already finished.';

CREATE OR REPLACE TRIGGER broker_jobs_count_finished_insert_trg
    AFTER INSERT ON broker.broker_jobs
    FOR EACH ROW WHEN (NEW.complete_status OPERATOR(pg_catalog.>=) 2 AND NEW.finished_at IS NOT NULL)
    EXECUTE FUNCTION broker._count_finished();
COMMENT ON TRIGGER broker_jobs_count_finished_insert_trg ON broker.broker_jobs IS
    'A job written already finished (a restore, a direct write) is counted in broker_finished_count.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished_updated()
--   Statement-level AFTER UPDATE (transition tables old_jobs, new_jobs): per
--   key, the finished rows after the statement less those before it, one
--   row per key whose count changed. A finish of a batch of jobs appends one
--   row per minute, queue, tenant and state, not one per job; a statement
--   that leaves every count as it was (a claim, a lease renewal, a rewrite
--   of a finished job's other columns) appends nothing.
--   Calls: _finished_minute, _state
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._count_finished_updated()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
    SELECT broker._finished_minute(d.finished_at), d.job_queue, d.tenant_id, d.complete_status, pg_catalog.sum(d.n)
      FROM (SELECT n.finished_at, n.job_queue, n.tenant_id, n.complete_status, 1 AS n
              FROM new_jobs AS n
             WHERE n.complete_status OPERATOR(pg_catalog.>=) broker._state('completed') AND n.finished_at IS NOT NULL
            UNION ALL
            SELECT o.finished_at, o.job_queue, o.tenant_id, o.complete_status, -1
              FROM old_jobs AS o
             WHERE o.complete_status OPERATOR(pg_catalog.>=) broker._state('completed') AND o.finished_at IS NOT NULL
           ) AS d
     GROUP BY 1, 2, 3, 4
    HAVING pg_catalog.sum(d.n) OPERATOR(pg_catalog.<>) 0;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished_updated() IS
    'Internal trigger: appends to broker_finished_count, per key, the change an UPDATE made to the count of finished jobs.';

CREATE OR REPLACE TRIGGER broker_jobs_count_finished_update_trg
    AFTER UPDATE ON broker.broker_jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished_updated();
COMMENT ON TRIGGER broker_jobs_count_finished_update_trg ON broker.broker_jobs IS
    'Per UPDATE statement: the jobs that reached, left or moved within a final state (finish time, queue, tenant) are counted again in broker_finished_count, one row per key.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished_deleted()
--   Statement-level AFTER DELETE (transition table old_jobs): -n per key for
--   the finished jobs deleted, one row per key (a purge batch appends a few).
--   Calls: _finished_minute, _state
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._count_finished_deleted()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
    SELECT broker._finished_minute(o.finished_at), o.job_queue, o.tenant_id, o.complete_status,
           OPERATOR(pg_catalog.-) pg_catalog.count(*)
      FROM old_jobs AS o
     WHERE o.complete_status OPERATOR(pg_catalog.>=) broker._state('completed') AND o.finished_at IS NOT NULL
     GROUP BY 1, 2, 3, 4;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished_deleted() IS
    'Internal trigger: uncounts from broker_finished_count the finished jobs a DELETE removed.';
CREATE OR REPLACE TRIGGER broker_jobs_count_finished_delete_trg
    AFTER DELETE ON broker.broker_jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished_deleted();
COMMENT ON TRIGGER broker_jobs_count_finished_delete_trg ON broker.broker_jobs IS
    'Per DELETE statement (the purge, a cascade): uncounts the finished jobs deleted from broker_finished_count.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._count_finished_truncate()
--   AFTER TRUNCATE of broker_jobs: no job is left, so no count either.
--   Calls: none
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._count_finished_truncate()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM broker.broker_finished_count;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._count_finished_truncate() IS
    'Internal trigger: empties broker_finished_count when broker_jobs is truncated.';
CREATE OR REPLACE TRIGGER broker_jobs_count_finished_truncate_trg
    AFTER TRUNCATE ON broker.broker_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._count_finished_truncate();
COMMENT ON TRIGGER broker_jobs_count_finished_truncate_trg ON broker.broker_jobs IS
    'TRUNCATE of broker_jobs empties broker_finished_count.';

-- ---------------------------------------------------------------------------
-- Function: broker._finished_kept()
--   How far back broker_finished_count keeps its minutes: the longest window
--   read from it (broker_queue_stats' hour, broker_finished_per_minute's
--   three hours), and a minute more for the one under way.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_kept()
RETURNS interval LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT interval '3 hours 1 minute' $$;
COMMENT ON FUNCTION broker._finished_kept() IS
    'Internal: how far back broker_finished_count keeps its minutes (the longest window read from it, and a minute).';

-- ---------------------------------------------------------------------------
-- Function: broker._merge_finished_counts()
--   Folds the deltas of broker_finished_count into the one merged row of
--   their key (read through broker_finished_count_delta_idx: with no delta
--   the merge costs an index probe) and drops the minutes older than any
--   window broker_queue_stats reads (an hour and a minute), so the table holds
--   one row per minute, queue, tenant and state plus the deltas since the
--   last merge. One merge at a time (a
--   transaction-level advisory lock; a second caller returns at once);
--   deltas committed meanwhile stay for the next merge. Does nothing where
--   it cannot write (a hot standby, a read-only transaction). Returns the
--   old rows dropped plus the deltas folded.
--   Calls: _finished_merge_lock_key, _finished_minute
--   Tables: writes broker_finished_count
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker._merge_finished_counts()
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old    bigint;
    v_deltas bigint;
    v_zero   timestamptz[];
BEGIN
    IF pg_catalog.pg_is_in_recovery() OR pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on'
       OR NOT (SELECT pg_catalog.pg_try_advisory_xact_lock(k.classid, k.objid) FROM broker._finished_merge_lock_key() AS k) THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM broker.broker_finished_count AS c WHERE NOT c.merged
        RETURNING c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, c.jobs
    ), folded AS (
        INSERT INTO broker.broker_finished_count AS m (finished_minute, job_queue, tenant_id, complete_status, jobs, merged)
        SELECT g.finished_minute, g.job_queue, g.tenant_id, g.complete_status, pg_catalog.sum(g.jobs)::bigint, true
          FROM gone AS g
         GROUP BY 1, 2, 3, 4
        ON CONFLICT (finished_minute, job_queue, tenant_id, complete_status) WHERE merged
        DO UPDATE SET jobs = m.jobs OPERATOR(pg_catalog.+) excluded.jobs
        RETURNING m.finished_minute, m.jobs
    )
    SELECT (SELECT pg_catalog.count(*) FROM gone),
           (SELECT pg_catalog.array_agg(DISTINCT f.finished_minute) FROM folded AS f WHERE f.jobs OPERATOR(pg_catalog.=) 0)
      INTO v_deltas, v_zero;
    -- keys whose jobs are all gone (purged, or moved to another key)
    DELETE FROM broker.broker_finished_count AS c
     WHERE c.merged AND c.jobs OPERATOR(pg_catalog.=) 0 AND c.finished_minute OPERATOR(pg_catalog.=) ANY (v_zero);
    -- (merged rows only, through their index: the deltas are all folded by now)
    DELETE FROM broker.broker_finished_count AS c
     WHERE c.merged AND c.finished_minute OPERATOR(pg_catalog.<)
           broker._finished_minute(pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) broker._finished_kept());
    GET DIAGNOSTICS v_old = ROW_COUNT;
    RETURN v_old OPERATOR(pg_catalog.+) v_deltas;
END;
$$;
COMMENT ON FUNCTION broker._merge_finished_counts() IS
    'Internal: folds the deltas of broker_finished_count into one row per key and drops minutes no window reads; returns the rows removed.';

-- ---------------------------------------------------------------------------
-- Function: broker._finished_counts_since(p_since)
--   The finished counts of the minutes from p_since on, as they stand:
--   merged rows and the deltas the next merge folds in, apart (each through
--   its partial index, however many dead deltas a burst of finishes left),
--   one row each; readers sum them. Read with the caller's rights, so a
--   tenant's login reads its own rows (policy broker_finished_count_select).
--   Calls: none
--   Tables: reads broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_counts_since(p_since timestamptz)
RETURNS TABLE (finished_minute timestamptz, job_queue integer, tenant_id text, complete_status smallint, jobs bigint)
LANGUAGE sql STABLE
-- (no SET clause, so that it is inlined into the queries that read it; everything in it is qualified:
-- sql/pgspot-no-search-path.txt)
AS $$
    SELECT c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, c.jobs
      FROM broker.broker_finished_count AS c
     WHERE c.merged AND c.finished_minute OPERATOR(pg_catalog.>=) p_since
    UNION ALL
    SELECT c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, c.jobs
      FROM broker.broker_finished_count AS c
     WHERE NOT c.merged AND c.finished_minute OPERATOR(pg_catalog.>=) p_since
$$;
COMMENT ON FUNCTION broker._finished_counts_since(timestamptz) IS
    'Internal: the finished counts (merged rows and deltas, unsummed) of the minutes from a time on, read with the caller''s rights.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_finished_per_minute(p_window)
--   Jobs finished per minute over the last p_window (1 minute to 3 hours,
--   default 3 hours), per queue, tenant and final state (2 completed, 3
--   failed, 4 cancelled), every tenant's: what the console's charts draw.
--   Read from broker_finished_count (a few rows a minute, whatever the
--   number of jobs), deltas not merged yet included; minutes with no finish
--   are left out.
-- Errors: 22023 a window outside 1 minute to 3 hours.
-- Example:
--   SELECT * FROM broker.broker_finished_per_minute('1 hour');
--   Calls: _finished_minute, _finished_counts_since
--   Tables: reads broker_finished_count
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_finished_per_minute(p_window interval DEFAULT '3 hours')
RETURNS TABLE (finished_minute timestamptz, job_queue integer, tenant_id text, complete_status smallint, jobs bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window OPERATOR(pg_catalog.<) interval '1 minute' OR p_window OPERATOR(pg_catalog.>) interval '3 hours' THEN
        RAISE EXCEPTION 'broker_finished_per_minute: p_window must be 1 minute to 3 hours, got %', COALESCE(p_window::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.finished_minute, c.job_queue, c.tenant_id, c.complete_status, pg_catalog.sum(c.jobs)::bigint
      FROM broker._finished_counts_since(broker._finished_minute(pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) p_window)) AS c
     GROUP BY 1, 2, 3, 4
    HAVING pg_catalog.sum(c.jobs) OPERATOR(pg_catalog.<>) 0
     ORDER BY 1, 2, 3, 4;
END;
$$;
COMMENT ON FUNCTION broker.broker_finished_per_minute(interval) IS
    'Jobs finished per minute over the last p_window (up to 3 hours), per queue, tenant and final state, every tenant''s (the console''s charts).';
-- source: sql/instances/queue_stats.sql
-- sql/instances/queue_stats.sql: queue statistics for monitoring.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_queue_stats()
--   Queue depth for monitoring, across every tenant (the runner's metrics and
--   status run as broker_runtime, which sees one tenant through row-level
--   security). One row per queue and tenant with unfinished or recently
--   finished jobs, or a pause: ready (claimable now), blocked (waiting on
--   dependencies), delayed (future run_after; jobs held back by a limit on
--   their key are in broker_key_stats), running, and completed/failed/cancelled in
--   the last hour; paused (broker_pause_queue, for every tenant or this
--   one); the age of the oldest ready job (seconds since its run_after);
--   and in the last hour: attempts lost with their lease (recovered), cancel
--   requests for running jobs and retries (broker_job_actions).
--   The finished jobs' last hour is counted in whole minutes of finished_at
--   (date_bin, UTC-aligned): the current minute and the 60 before it, so
--   between 60 and 61 minutes. The unfinished jobs come from the partial
--   indexes, the finished ones from the per-minute counters of
--   broker_finished_count, so the cost does not grow with the jobs that
--   finished in the last hour. First merges the counters' deltas
--   (broker._merge_finished_counts, skipped where it cannot write).
-- Example:
--   SELECT * FROM broker.broker_queue_stats() WHERE ready > 0 OR paused;
--   Calls: _finished_minute, _merge_finished_counts, _finished_counts_since, _claimable, _state, _parked
--   Tables: reads broker_jobs, broker_finished_count, broker_job_attempts, broker_job_actions, broker_queue_pause
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_queue_stats()
RETURNS TABLE (
    job_queue          integer,
    tenant_id          text,
    ready              bigint,
    blocked            bigint,
    delayed            bigint,
    running            bigint,
    completed_last_hour bigint,
    failed_last_hour   bigint,
    cancelled_last_hour bigint,
    paused             boolean,
    oldest_ready_seconds double precision,
    lost_last_hour     bigint,
    cancels_last_hour  bigint,
    retries_last_hour  bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- (each part through the index that holds what it counts: with many finished jobs and a few hundred
-- unfinished ones the planner may still choose to read the whole table, as PostgreSQL 17 and 18 do at
-- 30,000 rows; sql/flow/stats.sql does the same)
SET enable_seqscan = off
AS $$
DECLARE
    v_since timestamptz := broker._finished_minute(pg_catalog.statement_timestamp()) OPERATOR(pg_catalog.-) interval '60 minutes';
    v_hour  timestamptz := pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) interval '1 hour';
BEGIN
    PERFORM broker._merge_finished_counts();
    RETURN QUERY
    WITH s AS (
        SELECT j.job_queue, j.tenant_id,
               pg_catalog.count(*) FILTER (WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                                             AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS ready,
               pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                                             AND j.pending_deps OPERATOR(pg_catalog.>) 0) AS blocked,
               pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('pending')
                                             AND j.pending_deps OPERATOR(pg_catalog.=) 0
                                             AND j.parked OPERATOR(pg_catalog.<=) broker._parked('later')
                                             AND j.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()) AS delayed,
               pg_catalog.count(*) FILTER (WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')) AS running,
               0::numeric AS completed, 0::numeric AS failed, 0::numeric AS cancelled,
               pg_catalog.min(j.run_after) FILTER (WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                                                     AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS oldest,
               0::bigint AS lost, 0::bigint AS cancels, 0::bigint AS retries, false AS paused
          FROM broker.broker_jobs AS j
         -- (length(job_group) > 0, always true by its CHECK, makes broker_jobs_group_idx usable: it holds the
         -- unfinished jobs alone, so this reads them, not the finished history beside them. The index's
         -- predicate says job_group IS NOT NULL, which this implies; a query's own "job_group IS NOT NULL"
         -- on this NOT NULL column is dropped by PostgreSQL 17 and later before an index is chosen.)
         WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
           AND pg_catalog.length(j.job_group) OPERATOR(pg_catalog.>) 0
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT f.job_queue, f.tenant_id, 0, 0, 0, 0,
               COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('completed')), 0),
               COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('failed')), 0),
               COALESCE(pg_catalog.sum(f.jobs) FILTER (WHERE f.complete_status OPERATOR(pg_catalog.=) broker._state('cancelled')), 0),
               NULL::timestamptz, 0, 0, 0, false
          FROM broker._finished_counts_since(v_since) AS f
         GROUP BY f.job_queue, f.tenant_id
        HAVING pg_catalog.sum(f.jobs) OPERATOR(pg_catalog.<>) 0
        UNION ALL
        -- the last hour's lost attempts, cancel requests and retries: events, few
        SELECT j.job_queue, j.tenant_id, 0, 0, 0, 0, 0, 0, 0, NULL, pg_catalog.count(*), 0, 0, false
          FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
         WHERE a.outcome OPERATOR(pg_catalog.=) 'lost' AND a.finished_at OPERATOR(pg_catalog.>) v_hour
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT j.job_queue, j.tenant_id, 0, 0, 0, 0, 0, 0, 0, NULL, 0,
               pg_catalog.count(*) FILTER (WHERE a.action OPERATOR(pg_catalog.=) 'cancel'),
               pg_catalog.count(*) FILTER (WHERE a.action OPERATOR(pg_catalog.=) 'retry'), false
          FROM broker.broker_job_actions AS a JOIN broker.broker_jobs AS j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
         WHERE a.requested_at OPERATOR(pg_catalog.>) v_hour
         GROUP BY j.job_queue, j.tenant_id
        UNION ALL
        SELECT p.job_queue, p.tenant_id, 0, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0, true
          FROM broker.broker_queue_pause AS p
         WHERE p.tenant_id IS NOT NULL
    )
    SELECT s.job_queue, s.tenant_id,
           pg_catalog.sum(s.ready)::bigint, pg_catalog.sum(s.blocked)::bigint, pg_catalog.sum(s.delayed)::bigint,
           pg_catalog.sum(s.running)::bigint, pg_catalog.sum(s.completed)::bigint, pg_catalog.sum(s.failed)::bigint,
           pg_catalog.sum(s.cancelled)::bigint,
           pg_catalog.bool_or(s.paused)
               OR EXISTS (SELECT 1 FROM broker.broker_queue_pause AS g
                           WHERE g.job_queue OPERATOR(pg_catalog.=) s.job_queue AND g.tenant_id IS NULL),
           COALESCE(pg_catalog.date_part('epoch', pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) pg_catalog.min(s.oldest)), 0),
           pg_catalog.sum(s.lost)::bigint, pg_catalog.sum(s.cancels)::bigint, pg_catalog.sum(s.retries)::bigint
      FROM s
     GROUP BY s.job_queue, s.tenant_id
    UNION ALL
    -- a queue paused for every tenant, where no tenant has a row above (tenant '': no tenant id is blank)
    SELECT g.job_queue, ''::text, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, true,
           0::double precision, 0::bigint, 0::bigint, 0::bigint
      FROM broker.broker_queue_pause AS g
     WHERE g.tenant_id IS NULL
       AND NOT EXISTS (SELECT 1 FROM s WHERE s.job_queue OPERATOR(pg_catalog.=) g.job_queue)
     ORDER BY 1, 2;
END;
$$;
COMMENT ON FUNCTION broker.broker_queue_stats() IS
    'Queue depth across all tenants for monitoring, per queue and tenant: ready, blocked, delayed, running, finished in the last hour (whole minutes), paused, oldest ready job''s age, lost leases, cancels and retries in the last hour.';
-- source: sql/instances/runner_reads.sql
-- sql/instances/runner_reads.sql: what a runner reads on its session connection (the poll), and what status shows.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_ready_queues()
--   The queue numbers that have a job claimable now (pending, no unfinished
--   dependency, run_after reached), across every tenant, in order. What a
--   runner reads on its one session connection at each poll instead of a
--   claim per queue: it wakes a worker only where there is work, and it
--   reports queue numbers that no runner of its configuration serves.
--   Reads the claim index: one probe per queue number that has claimable
--   jobs (a loose index scan), then one bounded probe of that queue for a
--   job due now; and likewise the parked jobs: per queue, whether its
--   earliest job parked until a time is due (broker_jobs_later_idx), and
--   the queues of jobs whose key's next token is due (broker_key_limit):
--   the claim there unparks them. Runners' queues only (1 to 1000): a
--   task's queue (negative, broker_task_queue) is its workers', and the
--   walks start above it, so a runner never wakes for a task and no number
--   of task names adds to the poll.
-- Example:
--   SELECT broker.broker_ready_queues();   -- {1,3}
--   Calls: _claimable
--   Tables: reads broker_jobs, broker_key_limit
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_ready_queues()
RETURNS integer[]
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    RETURN ARRAY(
        WITH RECURSIVE queues (q) AS (
            (SELECT j.job_queue FROM broker.broker_jobs AS j
              WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                AND j.job_queue OPERATOR(pg_catalog.>=) 1   -- (tasks' queues are negative: workers', not runners')
              ORDER BY j.job_queue LIMIT 1)
            UNION ALL
            SELECT (SELECT j.job_queue FROM broker.broker_jobs AS j
                     WHERE broker._claimable(j.complete_status, j.pending_deps, j.parked)
                       AND j.job_queue OPERATOR(pg_catalog.>) s.q
                     ORDER BY j.job_queue LIMIT 1)
              FROM queues AS s
             WHERE s.q IS NOT NULL
        ),
        -- queues with jobs parked until a time: the first of each (the earliest) says whether one is due
        later (q, due) AS (
            (SELECT j.job_queue, j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()
               FROM broker.broker_jobs AS j
              WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                AND j.job_queue OPERATOR(pg_catalog.>=) 1
              ORDER BY j.job_queue, j.run_after LIMIT 1)
            UNION ALL
            SELECT n.job_queue, n.due
              FROM later AS s,
                   LATERAL (SELECT j.job_queue, j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp() AS due
                              FROM broker.broker_jobs AS j
                             WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                               AND j.job_queue OPERATOR(pg_catalog.>) s.q
                             ORDER BY j.job_queue, j.run_after LIMIT 1) AS n
        )
        SELECT r.q FROM (
            -- (a probe per queue, LATERAL with LIMIT 1, not EXISTS: with statistics that make the
            -- ready jobs a vanishing share of the table, as after a long history, EXISTS can be planned
            -- as a hash semi-join that reads every ready job at every poll)
            SELECT s.q FROM queues AS s,
                   LATERAL (SELECT FROM broker.broker_jobs AS j
                             WHERE j.job_queue OPERATOR(pg_catalog.=) s.q
                               AND broker._claimable(j.complete_status, j.pending_deps, j.parked)
                               AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()
                             LIMIT 1) AS due
             WHERE s.q IS NOT NULL
            UNION
            SELECT l.q FROM later AS l WHERE l.due
            UNION
            -- the queues of jobs whose key's next token is due
            SELECT p.job_queue
              FROM broker.broker_key_limit AS k,
                   LATERAL (SELECT j.job_queue FROM broker.broker_jobs AS j
                             WHERE j.concurrency_key OPERATOR(pg_catalog.=) k.concurrency_key
                               AND (k.tenant_id IS NULL OR j.tenant_id OPERATOR(pg_catalog.=) k.tenant_id)
                               AND j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.>=) 2
                               AND j.job_queue OPERATOR(pg_catalog.>=) 1
                             LIMIT 100) AS p
             WHERE k.wake_at OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()) AS r
         WHERE r.q OPERATOR(pg_catalog.>=) 1
         ORDER BY r.q);
END;
$$;
COMMENT ON FUNCTION broker.broker_ready_queues() IS
    'The queue numbers with a job claimable now, across tenants (what a runner polls on its session connection).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_next_due()
--   When the next parked job becomes claimable by time alone, across every
--   tenant and queue: the earliest run_after of the jobs parked until a time
--   (one probe per queue number that has any, a loose scan of
--   broker_jobs_later_idx), or the earliest wake_at of a key whose jobs wait
--   for a token; NULL when none. The runner polls then, not only every
--   queue_timer_sec, so that a delayed job or a rate's next burst starts on
--   time. A task parked until a time (its queue negative) is not the
--   runner's and does not count.
-- Example:
--   SELECT broker.broker_next_due();   -- 2026-12-06 07:31:02.5+00, or NULL
--   Calls: none
--   Tables: reads broker_jobs, broker_key_limit
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_next_due()
RETURNS timestamptz
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
BEGIN
    RETURN LEAST(
        (WITH RECURSIVE later (q, at) AS (
             (SELECT j.job_queue, j.run_after FROM broker.broker_jobs AS j
               WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                 AND j.job_queue OPERATOR(pg_catalog.>=) 1
               ORDER BY j.job_queue, j.run_after LIMIT 1)
             UNION ALL
             SELECT n.job_queue, n.run_after
               FROM later AS s,
                    LATERAL (SELECT j.job_queue, j.run_after FROM broker.broker_jobs AS j
                              WHERE j.complete_status OPERATOR(pg_catalog.=) 0 AND j.parked OPERATOR(pg_catalog.=) 1
                                AND j.job_queue OPERATOR(pg_catalog.>) s.q
                              ORDER BY j.job_queue, j.run_after LIMIT 1) AS n)
         SELECT pg_catalog.min(l.at) FROM later AS l),
        (SELECT k.wake_at FROM broker.broker_key_limit AS k
          WHERE k.wake_at IS NOT NULL ORDER BY k.wake_at LIMIT 1));
END;
$$;
COMMENT ON FUNCTION broker.broker_next_due() IS
    'When the next parked job becomes claimable by time alone (a delay, a rate''s next tokens), across every tenant; NULL when none. The runner polls then.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_job_activity()
--   The claimed jobs (status 1) across every tenant, each with what it does
--   now: 'executing' while a session of a runner login (a member of
--   broker_runtime) runs it (run_jobs names the running job in
--   application_name, which pg_stat_activity shows at once), else 'waiting':
--   claimed by a worker and not started yet, or finished and waiting for the
--   commit of its transaction of jobs (its effects are not visible before).
--   For pgsql-broker status and the dashboard.
-- Example:
--   SELECT job_id, job_name, activity FROM broker.broker_job_activity() WHERE activity = 'waiting';
--   Calls: _state
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_job_activity()
RETURNS TABLE (job_id bigint, job_queue integer, tenant_id text, job_name text, started_at timestamptz, activity text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT j.job_id, j.job_queue, j.tenant_id, j.job_name, j.started_at,
           CASE WHEN x.job_id IS NOT NULL THEN 'executing' ELSE 'waiting' END
      FROM broker.broker_jobs AS j
      LEFT JOIN (SELECT DISTINCT pg_catalog.substr(a.application_name, 18)::bigint AS job_id
                   FROM pg_catalog.pg_stat_activity AS a
                  WHERE a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
                    AND a.application_name OPERATOR(pg_catalog.~) '^pgsql_broker job [0-9]{1,18}$'
                    AND pg_catalog.pg_has_role(a.usesysid, 'broker_runtime', 'MEMBER')) AS x
        ON x.job_id OPERATOR(pg_catalog.=) j.job_id
     WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
     ORDER BY j.job_id
$$;
COMMENT ON FUNCTION broker.broker_job_activity() IS
    'Claimed jobs across tenants and whether a runner session executes each now (executing) or it waits to start or for its transaction''s commit (waiting).';
-- source: sql/retention/purge.sql
-- sql/retention/purge.sql: purging finished jobs.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_purge_jobs(p_older_than, p_batch_size, p_complete_status)
--   Retention: deletes at most p_batch_size finished jobs whose finished_at
--   is older than p_older_than, with their dependency edges,
--   oldest first: of final state p_complete_status (2 completed, 3 failed,
--   4 cancelled), or of any final state when it is NULL. Returns the number
--   deleted; call it until it returns 0 (each call is one short transaction
--   in autocommit mode). Its cost is linear in the jobs it deletes: the
--   candidates come from broker_jobs_finished_idx one state at a time, and
--   their edges from broker_job_dependency_job_id_idx. Jobs another
--   transaction holds are skipped, not waited for.
-- Errors: 22004 NULL age; 22023 negative age, batch size < 1, or a state
--   that is not final.
-- Calls: none
-- Tables: writes broker_jobs, broker_job_dependency, broker_job_attempts, broker_job_actions (by cascade,
--   each by its job_id index)
-- Example:
--   SELECT broker.broker_purge_jobs(interval '7 days');        -- every final state
--   SELECT broker.broker_purge_jobs(interval '30 days', 1000, 3::smallint);  -- failed jobs
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_purge_jobs(p_older_than interval, p_batch_size integer DEFAULT 10000,
                                         p_complete_status smallint DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n      integer := 0;
    v_one    integer;
    v_state  smallint;
    v_before timestamptz;
BEGIN
    IF p_older_than IS NULL THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_older_than must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_older_than < interval '0' OR p_batch_size IS NULL OR p_batch_size < 1 THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_older_than must be >= 0 and p_batch_size >= 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_complete_status IS NOT NULL AND p_complete_status <> ALL (ARRAY[2, 3, 4]::smallint[]) THEN
        RAISE EXCEPTION 'broker_purge_jobs: p_complete_status must be a final state (2, 3 or 4) or NULL, got %',
            p_complete_status USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_before := pg_catalog.clock_timestamp() - p_older_than;
    FOREACH v_state IN ARRAY CASE WHEN p_complete_status IS NULL THEN ARRAY[2, 3, 4]::smallint[]
                                  ELSE ARRAY[p_complete_status] END LOOP
        -- the state as a constant of the index predicate, so the planner reads the index in order
        WITH doomed AS (
            SELECT j.job_id FROM broker.broker_jobs AS j
             WHERE j.complete_status = ANY (ARRAY[2, 3, 4]::smallint[])
               AND j.complete_status = v_state
               AND j.finished_at < v_before
             ORDER BY j.complete_status, j.finished_at
             LIMIT p_batch_size - v_n
               FOR UPDATE SKIP LOCKED
        )
        DELETE FROM broker.broker_jobs AS j USING doomed WHERE j.job_id = doomed.job_id;
        GET DIAGNOSTICS v_one = ROW_COUNT;
        v_n := v_n + v_one;
        EXIT WHEN v_n >= p_batch_size;
    END LOOP;
    RETURN v_n;
END;
$$;
COMMENT ON FUNCTION broker.broker_purge_jobs(interval, integer, smallint) IS
    'Retention: deletes up to p_batch_size finished jobs (of one final state, or any) older than p_older_than, with their edges; returns how many. Call until 0.';

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
-- source: sql/security/policies/broker_jobs.sql
-- sql/security/policies/broker_jobs.sql: row-level security of broker.broker_jobs.
ALTER TABLE broker.broker_jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_jobs FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_jobs_select ON broker.broker_jobs FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_jobs_select ON broker.broker_jobs IS 'Read the jobs of the current tenant (if the role may act for it).';
CREATE POLICY broker_jobs_insert ON broker.broker_jobs FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND enqueued_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND broker._may_run_as(run_as, CURRENT_USER)
                AND (idempotency_key IS NULL OR NOT pg_catalog.starts_with(idempotency_key, 'broker_schedule:'))
                AND complete_status OPERATOR(pg_catalog.=) 0
                AND (job_language OPERATOR(pg_catalog.<>) 'task' OR broker._task_queue_is(job_name, job_queue))
                AND attempts OPERATOR(pg_catalog.=) 0
                AND pending_deps OPERATOR(pg_catalog.=) 0
                AND CASE WHEN autonomous THEN broker._check_autonomous('broker_jobs', execute_str, job_language, run_as, true)
                         ELSE true END);
COMMENT ON POLICY broker_jobs_insert ON broker.broker_jobs IS
    'New jobs: current tenant, enqueued_by = the inserting role, a run_as it may use, fresh state, a task in its name''s queue, an autonomous job''s SQL and role checked; keys broker_schedule:* are the tick''s.';
CREATE POLICY broker_jobs_update ON broker.broker_jobs FOR UPDATE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND complete_status OPERATOR(pg_catalog.=) 0)
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_jobs_update ON broker.broker_jobs IS
    'Updates (enqueuers: cancel_reason only, by column privilege) touch pending jobs of the current tenant.';
CREATE POLICY broker_jobs_delete ON broker.broker_jobs FOR DELETE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_jobs_delete ON broker.broker_jobs IS 'Deletes (for roles granted DELETE) stay in the current tenant.';
-- source: sql/security/policies/broker_claim_hint.sql
-- sql/security/policies/broker_claim_hint.sql: row-level security of broker.broker_claim_hint: no policy, no grant (only broker_get, SECURITY DEFINER, touches it).
ALTER TABLE broker.broker_claim_hint ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_claim_hint FORCE ROW LEVEL SECURITY;
-- source: sql/security/policies/broker_job_dependency.sql
-- sql/security/policies/broker_job_dependency.sql: row-level security of broker.broker_job_dependency.
ALTER TABLE broker.broker_job_dependency ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_job_dependency FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_job_dependency_select ON broker.broker_job_dependency FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_job_dependency_select ON broker.broker_job_dependency IS 'Read the edges of the current tenant.';
CREATE POLICY broker_job_dependency_insert ON broker.broker_job_dependency FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND EXISTS (SELECT 1 FROM broker.broker_jobs AS j
                             WHERE j.job_id OPERATOR(pg_catalog.=) broker_job_dependency.job_id
                               AND j.enqueued_by OPERATOR(pg_catalog.=) CURRENT_USER
                               AND j.complete_status OPERATOR(pg_catalog.=) 0));
COMMENT ON POLICY broker_job_dependency_insert ON broker.broker_job_dependency IS
    'Edges may only be added to pending jobs the inserting role enqueued, in the current tenant.';
-- source: sql/security/policies/broker_schedule_count.sql
-- sql/security/policies/broker_schedule_count.sql: row-level security of broker.broker_schedule_count: no policy, no grant (only the quota trigger, SECURITY DEFINER, touches it).
ALTER TABLE broker.broker_schedule_count ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schedule_count FORCE ROW LEVEL SECURITY;
-- source: sql/security/policies/broker_deferred_release.sql
-- sql/security/policies/broker_deferred_release.sql: row-level security of broker.broker_deferred_release (written and read only by the runtime functions).
ALTER TABLE broker.broker_deferred_release ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_deferred_release FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_deferred_release_select ON broker.broker_deferred_release FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_deferred_release_select ON broker.broker_deferred_release IS
    'Read the pending releases of the current tenant.';
-- source: sql/security/policies/broker_finished_count.sql
-- sql/security/policies/broker_finished_count.sql: row-level security of broker.broker_finished_count (a tenant reads its own counts; only its triggers and the SECURITY DEFINER stats write them).
ALTER TABLE broker.broker_finished_count ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_finished_count FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_finished_count_select ON broker.broker_finished_count FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_finished_count_select ON broker.broker_finished_count IS
    'A tenant reads its own finished counts (pgsql-broker status as its login); administrators all.';
-- source: sql/security/policies/broker_schedule.sql
-- sql/security/policies/broker_schedule.sql: row-level security of broker.broker_schedule.
ALTER TABLE broker.broker_schedule ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schedule FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_schedule_select ON broker.broker_schedule FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_schedule_select ON broker.broker_schedule IS 'Read the schedules of the current tenant.';
CREATE POLICY broker_schedule_insert ON broker.broker_schedule FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND created_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND broker._may_run_as(run_as, CURRENT_USER)
                AND CASE WHEN autonomous THEN broker._check_autonomous('broker_schedule', execute_str, job_language, run_as, true)
                         ELSE true END);
COMMENT ON POLICY broker_schedule_insert ON broker.broker_schedule IS
    'New schedules: current tenant, owned by the inserting role, a run_as it may use.';
CREATE POLICY broker_schedule_update ON broker.broker_schedule FOR UPDATE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND broker._may_run_as(created_by, CURRENT_USER))
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND broker._may_run_as(created_by, CURRENT_USER)
                AND broker._may_run_as(run_as, CURRENT_USER)
                AND CASE WHEN autonomous THEN broker._check_autonomous('broker_schedule', execute_str, job_language, run_as, true)
                         ELSE true END);
COMMENT ON POLICY broker_schedule_update ON broker.broker_schedule IS
    'Schedules are changed by their owner (or members of it), with a run_as the changing role may use.';
CREATE POLICY broker_schedule_delete ON broker.broker_schedule FOR DELETE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND broker._may_run_as(created_by, CURRENT_USER));
COMMENT ON POLICY broker_schedule_delete ON broker.broker_schedule IS 'Schedules are removed by their owner (or members of it).';
-- source: sql/security/policies/broker_queueinstance.sql
-- sql/security/policies/broker_queueinstance.sql: row-level security of broker.broker_queueinstance (database-wide: tenant default).
ALTER TABLE broker.broker_queueinstance ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_queueinstance FORCE ROW LEVEL SECURITY;
-- The runner's login and the administrators read them whatever tenant they act for: instances
-- are the broker's, not a tenant's (under strict tenancy neither is mapped to tenant default).
-- (to_regrole: NULL, not an error, before sql/roles.sql made the role)
CREATE POLICY broker_queueinstance_tenant ON broker.broker_queueinstance FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole('broker_runtime'), 'USAGE')
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queueinstance_tenant ON broker.broker_queueinstance IS
    'Instances are database-wide (tenant default), read by broker_runtime members and administrators under any tenancy; written only through the instance functions.';
-- source: sql/security/policies/broker_schema_migrations.sql
-- sql/security/policies/broker_schema_migrations.sql: row-level security of broker.broker_schema_migrations (database-wide: tenant default).
ALTER TABLE broker.broker_schema_migrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schema_migrations FORCE ROW LEVEL SECURITY;
-- The runner's login reads the schema version to check the install whatever tenant it acts for (under
-- strict tenancy none is mapped to it); the administrators too. (to_regrole: NULL, not an error, before
-- sql/roles.sql made the role)
CREATE POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole('broker_runtime'), 'USAGE')
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations IS
    'Migrations are database-wide (tenant default), read by broker_runtime members and administrators under any tenancy; written only by broker_admin.';
-- source: sql/security/policies/broker_config.sql
-- sql/security/policies/broker_config.sql: row-level security of broker.broker_config (database-wide: tenant default).
ALTER TABLE broker.broker_config ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_config FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_config_tenant ON broker.broker_config FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_config_tenant ON broker.broker_config IS 'Options are database-wide (tenant default); written only by broker_admin.';
-- source: sql/security/policies/broker_tenant_roles.sql
-- sql/security/policies/broker_tenant_roles.sql: row-level security of broker.broker_tenant_roles, keyed on the role (it defines who may act for a tenant).
ALTER TABLE broker.broker_tenant_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_tenant_roles FORCE ROW LEVEL SECURITY;
-- (to_regrole: a mapping left behind by a dropped role is hidden, not an error)
CREATE POLICY broker_tenant_roles_own ON broker.broker_tenant_roles FOR SELECT
    USING (pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole(pg_catalog.quote_ident(role_name)), 'MEMBER'));
COMMENT ON POLICY broker_tenant_roles_own ON broker.broker_tenant_roles IS 'A role sees the tenant mappings of the roles it belongs to.';
-- source: sql/security/policies/broker_job_attempts.sql
-- sql/security/policies/broker_job_attempts.sql: row-level security of broker.broker_job_attempts (written only by the runtime functions).
ALTER TABLE broker.broker_job_attempts ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_job_attempts FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_job_attempts_select ON broker.broker_job_attempts FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_job_attempts_select ON broker.broker_job_attempts IS 'Read the attempts of the current tenant''s jobs.';
-- source: sql/security/policies/broker_job_actions.sql
-- sql/security/policies/broker_job_actions.sql: row-level security of broker.broker_job_actions (inserting a row performs it: trigger broker_job_actions_trg).
ALTER TABLE broker.broker_job_actions ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_job_actions FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_job_actions_select ON broker.broker_job_actions FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_job_actions_select ON broker.broker_job_actions IS 'Read the actions on the current tenant''s jobs.';
CREATE POLICY broker_job_actions_insert ON broker.broker_job_actions FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND requested_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND EXISTS (SELECT 1 FROM broker.broker_jobs AS j
                             WHERE j.job_id OPERATOR(pg_catalog.=) broker_job_actions.job_id
                               AND j.tenant_id OPERATOR(pg_catalog.=) broker_job_actions.tenant_id));
COMMENT ON POLICY broker_job_actions_insert ON broker.broker_job_actions IS
    'Actions: on a job of the current tenant (one the inserting role can read), in the inserting role''s name.';
-- source: sql/security/policies/broker_queue_pause.sql
-- sql/security/policies/broker_queue_pause.sql: row-level security of broker.broker_queue_pause (a tenant's own pauses; pauses for every tenant (tenant_id NULL) are the administrators').
ALTER TABLE broker.broker_queue_pause ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_queue_pause FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_queue_pause_select ON broker.broker_queue_pause FOR SELECT
    USING (tenant_id IS NULL
           OR (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
               AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_select ON broker.broker_queue_pause IS
    'Read the pauses for every tenant and those of the current tenant (administrators: all).';
CREATE POLICY broker_queue_pause_insert ON broker.broker_queue_pause FOR INSERT
    WITH CHECK ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                 AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                 AND paused_by OPERATOR(pg_catalog.=) CURRENT_USER)
                OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_insert ON broker.broker_queue_pause IS
    'A tenant pauses its own jobs of a queue; administrators pause a queue for every tenant.';
CREATE POLICY broker_queue_pause_delete ON broker.broker_queue_pause FOR DELETE
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_delete ON broker.broker_queue_pause IS
    'A tenant resumes its own jobs of a queue; administrators any pause.';
-- source: sql/security/policies/broker_key_limit.sql
-- sql/security/policies/broker_key_limit.sql: row-level security of broker.broker_key_limit (a tenant's own limits; limits across tenants (tenant_id NULL) are the administrators').
ALTER TABLE broker.broker_key_limit ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_key_limit FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_key_limit_select ON broker.broker_key_limit FOR SELECT
    USING (tenant_id IS NULL
           OR (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
               AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_key_limit_select ON broker.broker_key_limit IS
    'Read the limits across tenants and those of the current tenant (administrators: all).';
CREATE POLICY broker_key_limit_write ON broker.broker_key_limit FOR ALL
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER))
    WITH CHECK ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                 AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                 AND set_by OPERATOR(pg_catalog.=) CURRENT_USER)
                OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_key_limit_write ON broker.broker_key_limit IS
    'A tenant sets and removes its own limits; administrators any, and the limits across tenants.';
-- source: sql/security/policies/broker_tenant_weight.sql
-- sql/security/policies/broker_tenant_weight.sql: row-level security of broker.broker_tenant_weight (a tenant reads its own weight; administrators set them).
ALTER TABLE broker.broker_tenant_weight ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_tenant_weight FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_tenant_weight_select ON broker.broker_tenant_weight FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_tenant_weight_select ON broker.broker_tenant_weight IS
    'A tenant reads its own weight; administrators all.';
CREATE POLICY broker_tenant_weight_admin ON broker.broker_tenant_weight FOR ALL
    USING (broker._is_broker_admin(CURRENT_USER))
    WITH CHECK (broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_tenant_weight_admin ON broker.broker_tenant_weight IS
    'Only administrators set weights.';
-- source: sql/security/policies/broker_autonomous_role.sql
-- sql/security/policies/broker_autonomous_role.sql: row-level security of broker.broker_autonomous_role, keyed on the role (as broker_tenant_roles).
ALTER TABLE broker.broker_autonomous_role ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_autonomous_role FORCE ROW LEVEL SECURITY;
-- (to_regrole: an arrangement left behind by a dropped role is hidden, not an error)
CREATE POLICY broker_autonomous_role_own ON broker.broker_autonomous_role FOR SELECT
    USING (pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole(pg_catalog.quote_ident(role_name)), 'MEMBER'));
COMMENT ON POLICY broker_autonomous_role_own ON broker.broker_autonomous_role IS 'A role sees the arrangements of the roles it belongs to.';
-- source: sql/security/policies/broker_task_queue.sql
-- sql/security/policies/broker_task_queue.sql: row-level security of broker.broker_task_queue (a tenant sees the task names it uses; only the broker's functions write them).
ALTER TABLE broker.broker_task_queue ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_task_queue FORCE ROW LEVEL SECURITY;
-- (the names a tenant uses: broker_task_name_tenant, read under its own policy, so as the tenant)
CREATE POLICY broker_task_queue_select ON broker.broker_task_queue FOR SELECT
    USING (EXISTS (SELECT FROM broker.broker_task_name_tenant AS u
                    WHERE u.task_name OPERATOR(pg_catalog.=) broker_task_queue.task_name)
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_task_queue_select ON broker.broker_task_queue IS
    'A tenant reads the task names it uses (broker_task_name_tenant) and their queues; administrators all. Names are one namespace per database: only the broker''s functions add them.';
-- source: sql/security/policies/broker_task_name_tenant.sql
-- sql/security/policies/broker_task_name_tenant.sql: row-level security of broker.broker_task_name_tenant (a tenant reads the task names it uses; broker._task_queue records them as the enqueuing role).
ALTER TABLE broker.broker_task_name_tenant ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_task_name_tenant FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_task_name_tenant_select ON broker.broker_task_name_tenant FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_task_name_tenant_select ON broker.broker_task_name_tenant IS
    'A tenant reads the task names it uses; administrators all.';
CREATE POLICY broker_task_name_tenant_insert ON broker.broker_task_name_tenant FOR INSERT
    WITH CHECK ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                 AND broker._tenant_allowed(tenant_id, CURRENT_USER))
                OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_task_name_tenant_insert ON broker.broker_task_name_tenant IS
    'A name is recorded as the current tenant''s by a role that may act for it (broker._task_queue, as the enqueuing role); administrators any tenant''s.';

-- Privileges (new functions too; the broker roles get theirs from sql/roles.sql)
-- source: sql/security/grants.sql
-- sql/security/grants.sql: privileges: nothing for PUBLIC (the broker roles get theirs from sql/roles.sql).
-- ---------------------------------------------------------------------------
-- Privileges. Nothing in schema broker is usable by PUBLIC: the extension
-- owner (a superuser) uses it directly, and other roles get exactly what
-- they are granted: sql/roles.sql creates broker_admin, broker_runtime and
-- broker_enqueue and holds every grant (README, "Security model").
-- ---------------------------------------------------------------------------
REVOKE ALL ON SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA broker FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA broker FROM PUBLIC;
