-- sql/tables/broker_schedule.sql: table of cron schedules.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_schedule
--   Cron-like schedules: a job template enqueued at each fire time of a cron
--   expression matched in a time zone (broker_cron_next), by the tick
--   (broker_schedule_tick) that the runner calls. Written through
--   broker_add_schedule / broker_alter_schedule / broker_enable_schedule /
--   broker_remove_schedule. Columns after created_at came with 0.2.0.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_schedule (
    schedule_id     bigint      GENERATED ALWAYS AS IDENTITY,
    tenant_id       text        NOT NULL DEFAULT broker.broker_current_tenant(),
    schedule_name   text        NOT NULL,
    cron_expr       text        NOT NULL,
    time_zone       text        NOT NULL DEFAULT 'UTC',
    execute_str     text        NOT NULL,
    job_language    text        NOT NULL DEFAULT 'sql',
    job_queue       integer     NOT NULL DEFAULT 1,
    job_priority    integer     NOT NULL DEFAULT 0,
    run_as          name        NOT NULL DEFAULT CURRENT_USER,
    max_attempts    integer     NOT NULL DEFAULT 1,
    job_group       text,
    enabled         boolean     NOT NULL DEFAULT true,
    next_fire_at    timestamptz,
    last_fire_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    created_by      name        NOT NULL DEFAULT CURRENT_USER,
    job_timeout     interval,
    job_search_path text        NOT NULL DEFAULT '',
    catch_up        text        NOT NULL DEFAULT 'one',
    catch_up_max    integer     NOT NULL DEFAULT 100,
    overlap         text        NOT NULL DEFAULT 'skip',
    last_job_id     bigint,
    skipped_fires   bigint      NOT NULL DEFAULT 0,
    last_error      text,
    skipped_fires_capped boolean NOT NULL DEFAULT false,
    autonomous      boolean     NOT NULL DEFAULT false,
    concurrency_key text,
    CONSTRAINT broker_schedule_pkey PRIMARY KEY (schedule_id),
    CONSTRAINT broker_schedule_tenant_name_key UNIQUE (tenant_id, schedule_name),
    CONSTRAINT broker_schedule_tenant_id_key UNIQUE (tenant_id, schedule_id),
    CONSTRAINT broker_schedule_name_check CHECK (pg_catalog.btrim(schedule_name) OPERATOR(pg_catalog.<>) ''),
    CONSTRAINT broker_schedule_execute_str_check CHECK (pg_catalog.btrim(execute_str) OPERATOR(pg_catalog.<>) ''),
    -- (a schedule of tasks: its task name's queue, negative (broker_task_queue), and JSON arguments,
    -- as broker_jobs holds a task)
    CONSTRAINT broker_schedule_job_language_check
        CHECK (job_language OPERATOR(pg_catalog.=) ANY (ARRAY['sql', 'plpgsql'])
               OR job_language OPERATOR(pg_catalog.=) 'task' AND job_queue OPERATOR(pg_catalog.<) 0),
    CONSTRAINT broker_schedule_job_queue_check
        CHECK (job_queue OPERATOR(pg_catalog.>=) 1 AND job_queue OPERATOR(pg_catalog.<=) 1000
               OR job_queue OPERATOR(pg_catalog.<) 0 AND job_language OPERATOR(pg_catalog.=) 'task'),
    CONSTRAINT broker_schedule_task_args_check
        CHECK (CASE WHEN job_language OPERATOR(pg_catalog.=) 'task' THEN execute_str::pg_catalog.jsonb IS NOT NULL ELSE true END),
    CONSTRAINT broker_schedule_max_attempts_check CHECK (max_attempts OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_schedule_job_timeout_check CHECK (job_timeout OPERATOR(pg_catalog.>) interval '0'),
    CONSTRAINT broker_schedule_catch_up_check CHECK (catch_up OPERATOR(pg_catalog.=) ANY (ARRAY['none', 'one', 'all'])),
    CONSTRAINT broker_schedule_catch_up_max_check CHECK (catch_up_max OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_schedule_overlap_check CHECK (overlap OPERATOR(pg_catalog.=) ANY (ARRAY['skip', 'allow'])),
    CONSTRAINT broker_schedule_cron_expr_check CHECK (pg_catalog.length(cron_expr) OPERATOR(pg_catalog.<=) 256),
    CONSTRAINT broker_schedule_concurrency_key_check
        CHECK (pg_catalog.btrim(concurrency_key) OPERATOR(pg_catalog.<>) '' AND pg_catalog.length(concurrency_key) OPERATOR(pg_catalog.<=) 200)
);

-- The tick: enabled schedules by next fire time.
CREATE INDEX broker_schedule_due_idx ON broker.broker_schedule (next_fire_at) WHERE enabled;

COMMENT ON TABLE broker.broker_schedule IS
    'Cron-like schedules: a job template enqueued at each fire time of a cron expression.';
COMMENT ON COLUMN broker.broker_schedule.schedule_id IS 'Schedule id; jobs it enqueues carry it in broker_jobs.schedule_id.';
COMMENT ON COLUMN broker.broker_schedule.tenant_id IS 'Owning tenant (broker.tenant_id at creation).';
COMMENT ON COLUMN broker.broker_schedule.schedule_name IS 'Name, unique per tenant.';
COMMENT ON COLUMN broker.broker_schedule.cron_expr IS 'Five-field cron expression or @macro.';
COMMENT ON COLUMN broker.broker_schedule.time_zone IS 'IANA time zone the cron fields are matched in.';
COMMENT ON COLUMN broker.broker_schedule.execute_str IS 'SQL (or PL/pgSQL body) of the jobs it enqueues.';
COMMENT ON COLUMN broker.broker_schedule.job_language IS 'Language of execute_str: sql or plpgsql; task: a schedule of tasks (broker_add_task_schedule), execute_str their arguments, job_queue their name''s queue.';
COMMENT ON COLUMN broker.broker_schedule.job_queue IS 'Queue (1 to 1000) of the jobs it enqueues.';
COMMENT ON COLUMN broker.broker_schedule.job_priority IS 'Priority of the jobs it enqueues (higher runs first).';
COMMENT ON COLUMN broker.broker_schedule.run_as IS 'Role the jobs run as (the schedule owner by default).';
COMMENT ON COLUMN broker.broker_schedule.max_attempts IS 'max_attempts of the jobs it enqueues.';
COMMENT ON COLUMN broker.broker_schedule.job_group IS 'Job group of the jobs it enqueues (NULL: the schedule name).';
COMMENT ON COLUMN broker.broker_schedule.enabled IS 'Disabled schedules do not fire.';
COMMENT ON COLUMN broker.broker_schedule.next_fire_at IS 'Next fire time.';
COMMENT ON COLUMN broker.broker_schedule.last_fire_at IS 'Last fire time that enqueued a job.';
COMMENT ON COLUMN broker.broker_schedule.created_at IS 'When the schedule was created.';
COMMENT ON COLUMN broker.broker_schedule.created_by IS 'Owner: the role that created it; members of it may alter or remove it, and its jobs are enqueued in its name.';
COMMENT ON COLUMN broker.broker_schedule.job_timeout IS 'statement_timeout of the jobs it enqueues (NULL: none).';
COMMENT ON COLUMN broker.broker_schedule.job_search_path IS 'search_path the jobs run with (the creator''s, by default).';
COMMENT ON COLUMN broker.broker_schedule.catch_up IS 'Missed fires after downtime: none (skip them), one (one job for them all, the default) or all (one job each, at most catch_up_max).';
COMMENT ON COLUMN broker.broker_schedule.catch_up_max IS 'With catch_up = all: at most this many jobs for the missed fires (the latest ones).';
COMMENT ON COLUMN broker.broker_schedule.overlap IS 'skip (default): no job while an earlier job of this schedule is pending or running; allow: always enqueue.';
COMMENT ON COLUMN broker.broker_schedule.last_job_id IS 'The last job it enqueued.';
COMMENT ON COLUMN broker.broker_schedule.skipped_fires IS 'Due fires that enqueued no job (dropped by the catch-up policy, skipped for overlap, or their key still taken): exact, except that one tick adds at most 1,000 (see skipped_fires_capped).';
COMMENT ON COLUMN broker.broker_schedule.skipped_fires_capped IS 'true once a tick skipped more fires than it counts (1,000): skipped_fires is then a lower bound.';
COMMENT ON COLUMN broker.broker_schedule.autonomous IS 'Its jobs run outside a transaction block (autonomous jobs, see broker_allow_autonomous).';
COMMENT ON COLUMN broker.broker_schedule.concurrency_key IS 'Concurrency key of the jobs it enqueues (broker_jobs.concurrency_key; NULL: none).';
COMMENT ON COLUMN broker.broker_schedule.last_error IS 'Why the tick disabled the schedule (say its owner lost the right to run as run_as), else NULL.';
COMMENT ON INDEX broker.broker_schedule_due_idx IS 'The tick: enabled schedules by next fire time.';
