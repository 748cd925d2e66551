-- ---------------------------------------------------------------------------
-- Table: broker.broker_schedule
--   Cron-like schedules: a job template fired by a cron expression in a time
--   zone. The table is defined here so jobs can reference it; parsing, the
--   tick and the management functions arrive with the schedules feature.
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
    CONSTRAINT broker_schedule_pkey PRIMARY KEY (schedule_id),
    CONSTRAINT broker_schedule_tenant_name_key UNIQUE (tenant_id, schedule_name),
    CONSTRAINT broker_schedule_tenant_id_key UNIQUE (tenant_id, schedule_id),
    CONSTRAINT broker_schedule_name_check CHECK (pg_catalog.btrim(schedule_name) OPERATOR(pg_catalog.<>) ''),
    CONSTRAINT broker_schedule_execute_str_check CHECK (pg_catalog.btrim(execute_str) OPERATOR(pg_catalog.<>) ''),
    CONSTRAINT broker_schedule_job_language_check CHECK (job_language OPERATOR(pg_catalog.=) ANY (ARRAY['sql', 'plpgsql'])),
    CONSTRAINT broker_schedule_job_queue_check CHECK (job_queue OPERATOR(pg_catalog.>=) 1),
    CONSTRAINT broker_schedule_max_attempts_check CHECK (max_attempts OPERATOR(pg_catalog.>=) 1)
);

COMMENT ON TABLE broker.broker_schedule IS
    'Cron-like schedules: a job template enqueued at each fire time of a cron expression.';
COMMENT ON COLUMN broker.broker_schedule.schedule_id IS 'Schedule id; jobs it enqueues carry it in broker_jobs.schedule_id.';
COMMENT ON COLUMN broker.broker_schedule.tenant_id IS 'Owning tenant (broker.tenant_id at creation).';
COMMENT ON COLUMN broker.broker_schedule.schedule_name IS 'Name, unique per tenant.';
COMMENT ON COLUMN broker.broker_schedule.cron_expr IS 'Five-field cron expression or @macro.';
COMMENT ON COLUMN broker.broker_schedule.time_zone IS 'IANA time zone the cron fields are matched in.';
COMMENT ON COLUMN broker.broker_schedule.execute_str IS 'SQL (or PL/pgSQL body) of the jobs it enqueues.';
COMMENT ON COLUMN broker.broker_schedule.job_language IS 'Language of execute_str: sql or plpgsql.';
COMMENT ON COLUMN broker.broker_schedule.job_queue IS 'Queue (>= 1) of the jobs it enqueues.';
COMMENT ON COLUMN broker.broker_schedule.job_priority IS 'Priority of the jobs it enqueues (higher runs first).';
COMMENT ON COLUMN broker.broker_schedule.run_as IS 'Role the jobs run as (the schedule owner by default).';
COMMENT ON COLUMN broker.broker_schedule.max_attempts IS 'max_attempts of the jobs it enqueues.';
COMMENT ON COLUMN broker.broker_schedule.job_group IS 'Job group of the jobs it enqueues (NULL: the schedule name).';
COMMENT ON COLUMN broker.broker_schedule.enabled IS 'Disabled schedules do not fire.';
COMMENT ON COLUMN broker.broker_schedule.next_fire_at IS 'Next fire time.';
COMMENT ON COLUMN broker.broker_schedule.last_fire_at IS 'Last fire time that enqueued a job.';
COMMENT ON COLUMN broker.broker_schedule.created_at IS 'When the schedule was created.';
