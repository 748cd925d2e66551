-- bench/enqueue_parts/setup.sql: the tables of the ladder, in schema parts of a database with
-- pgsql_broker installed (and sql/roles.sql run). Each rung adds one part of broker_jobs to the
-- one before; the driver inserts one row per transaction into each, interleaved in one pgbench run.
CREATE SCHEMA parts;
-- A peer's narrow queue table (PgQueuer 1.6's columns and its statement trigger that NOTIFYs).
CREATE TABLE parts.narrow (
    id          bigserial PRIMARY KEY,
    priority    integer     NOT NULL DEFAULT 0,
    created     timestamptz NOT NULL DEFAULT now(),
    updated     timestamptz NOT NULL DEFAULT now(),
    execute_after timestamptz NOT NULL DEFAULT now(),
    status      text        NOT NULL DEFAULT 'queued',
    entrypoint  text        NOT NULL,
    dedupe_key  text,
    payload     bytea,
    headers     jsonb);
CREATE INDEX ON parts.narrow (priority, id) WHERE status = 'queued';
CREATE UNIQUE INDEX ON parts.narrow (dedupe_key) WHERE status = 'queued' AND dedupe_key IS NOT NULL;
CREATE FUNCTION parts.narrow_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('parts', json_build_object('channel', 'parts', 'operation', lower(TG_OP))::text);
    RETURN NULL;
END $$;
CREATE TABLE parts.narrow_trg (LIKE parts.narrow INCLUDING ALL);
CREATE TRIGGER narrow_notify AFTER INSERT ON parts.narrow_trg FOR EACH STATEMENT EXECUTE FUNCTION parts.narrow_notify();

-- broker_jobs' columns and defaults only
CREATE TABLE parts.wide (LIKE broker.broker_jobs INCLUDING DEFAULTS INCLUDING IDENTITY);
-- + its primary key and indexes
CREATE TABLE parts.wide_idx (LIKE broker.broker_jobs INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES);
-- + its CHECK constraints
CREATE TABLE parts.wide_chk (LIKE broker.broker_jobs INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES INCLUDING CONSTRAINTS);
-- + the foreign key to broker_schedule
CREATE TABLE parts.wide_fk (LIKE broker.broker_jobs INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES INCLUDING CONSTRAINTS);
ALTER TABLE parts.wide_fk ADD FOREIGN KEY (tenant_id, schedule_id)
    REFERENCES broker.broker_schedule (tenant_id, schedule_id) ON DELETE SET NULL (schedule_id);
-- + the statement trigger (group keys, NOTIFY, group fan-in): broker_jobs but for row-level security
CREATE TABLE parts.wide_trg (LIKE broker.broker_jobs INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES INCLUDING CONSTRAINTS);
ALTER TABLE parts.wide_trg ADD FOREIGN KEY (tenant_id, schedule_id)
    REFERENCES broker.broker_schedule (tenant_id, schedule_id) ON DELETE SET NULL (schedule_id);
CREATE TRIGGER wide_trg_after_insert AFTER INSERT ON parts.wide_trg REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION broker._jobs_after_insert();

GRANT USAGE ON SCHEMA parts TO PUBLIC;
GRANT INSERT, SELECT ON ALL TABLES IN SCHEMA parts TO PUBLIC;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA parts TO PUBLIC;

-- The parts of broker_add_job that are not the INSERT, each called 1,000 times in one statement
-- (the driver divides): what a call of each costs inside the function.
CREATE FUNCTION parts.loop(p_what text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint := 0;
    r text[];
    v_name text := 'single';  -- (variables, not constants, which the planner would fold)
    v_sql  text := 'SELECT 1';
BEGIN
    FOR i IN 1 .. 1000 LOOP
        CASE p_what
        WHEN 'nothing' THEN
            n := n + 1;
        WHEN 'job_problem' THEN
            r := broker._job_problem(ROW(v_name, v_sql, i, 0, 'sql', NULL, NULL, NULL, NULL, 1, NULL, NULL,
                                         NULL, NULL, '"$user", public', false, NULL)::broker._job_fields);
        WHEN 'tenant_allowed' THEN
            n := n + broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER)::int;
        WHEN 'check_autonomous' THEN
            PERFORM broker._check_autonomous('broker_add_job', v_sql, 'sql', CURRENT_USER, false);
        WHEN 'executor_lookup' THEN
            n := n + (pg_catalog.to_regprocedure(pg_catalog.format('%I.run_job(text,text,text)',
                 'broker_exec_' || pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))::oid::text)) IS NULL)::int;
        WHEN 'may_run_as' THEN
            n := n + broker._may_run_as(CURRENT_USER, CURRENT_USER)::int;
        END CASE;
    END LOOP;
    RETURN n;
END $$;
