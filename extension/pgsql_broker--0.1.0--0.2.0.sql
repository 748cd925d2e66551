-- pgsql_broker 0.1.0 -> 0.2.0 (hand-written upgrade; the full 0.2.0 script is built from sql/).
\echo Use "ALTER EXTENSION pgsql_broker UPDATE TO '0.2.0'" to load this file. \quit

-- source: sql/functions/broker_queue_stats.sql
CREATE FUNCTION broker.broker_queue_stats()
RETURNS TABLE (
    job_queue          integer,
    tenant_id          text,
    ready              bigint,
    blocked            bigint,
    delayed            bigint,
    running            bigint,
    completed_last_hour bigint,
    failed_last_hour   bigint,
    cancelled_last_hour bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.job_queue, s.tenant_id,
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 0 AND s.pending_deps OPERATOR(pg_catalog.=) 0
                                         AND s.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 0 AND s.pending_deps OPERATOR(pg_catalog.>) 0),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 0 AND s.pending_deps OPERATOR(pg_catalog.=) 0
                                         AND s.run_after OPERATOR(pg_catalog.>) pg_catalog.statement_timestamp()),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 1),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 2),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 3),
           pg_catalog.count(*) FILTER (WHERE s.complete_status OPERATOR(pg_catalog.=) 4)
      FROM (SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.run_after
              FROM broker.broker_jobs AS j
             WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[0, 1]::smallint[])
            UNION ALL
            SELECT j.job_queue, j.tenant_id, j.complete_status, j.pending_deps, j.run_after
              FROM broker.broker_jobs AS j
             WHERE j.complete_status OPERATOR(pg_catalog.=) ANY (ARRAY[2, 3, 4]::smallint[])
               AND j.finished_at OPERATOR(pg_catalog.>) (pg_catalog.statement_timestamp() OPERATOR(pg_catalog.-) interval '1 hour')) AS s
     GROUP BY s.job_queue, s.tenant_id
     ORDER BY s.job_queue, s.tenant_id
$$;
COMMENT ON FUNCTION broker.broker_queue_stats() IS
    'Queue depth across all tenants for monitoring: ready, blocked, delayed, running, and finished in the last hour, per queue and tenant.';
REVOKE ALL ON FUNCTION broker.broker_queue_stats() FROM PUBLIC;

-- ===========================================================================
-- cron schedules (0.2.0): schedule columns and policies, the cron functions,
-- schedule management and the tick
-- ===========================================================================
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
COMMENT ON COLUMN broker.broker_schedule.skipped_fires IS 'Fires that enqueued no job (missed beyond the catch-up policy, or skipped for overlap).';
COMMENT ON COLUMN broker.broker_schedule.last_error IS 'Why the tick disabled the schedule (say its owner lost the right to run as run_as), else NULL.';
COMMENT ON INDEX broker.broker_schedule_due_idx IS 'The tick: enabled schedules by next fire time.';

DROP POLICY broker_schedule_tenant ON broker.broker_schedule;
CREATE POLICY broker_schedule_select ON broker.broker_schedule FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_schedule_select ON broker.broker_schedule IS 'Read the schedules of the current tenant.';
CREATE POLICY broker_schedule_insert ON broker.broker_schedule FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND created_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND broker._may_run_as(run_as, CURRENT_USER));
COMMENT ON POLICY broker_schedule_insert ON broker.broker_schedule IS
    'New schedules: current tenant, owned by the inserting role, a run_as it may use.';
CREATE POLICY broker_schedule_update ON broker.broker_schedule FOR UPDATE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND broker._may_run_as(created_by, CURRENT_USER))
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND broker._may_run_as(created_by, CURRENT_USER)
                AND broker._may_run_as(run_as, CURRENT_USER));
COMMENT ON POLICY broker_schedule_update ON broker.broker_schedule IS
    'Schedules are changed by their owner (or members of it), with a run_as the changing role may use.';
CREATE POLICY broker_schedule_delete ON broker.broker_schedule FOR DELETE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND broker._may_run_as(created_by, CURRENT_USER));
COMMENT ON POLICY broker_schedule_delete ON broker.broker_schedule IS 'Schedules are removed by their owner (or members of it).';


DROP POLICY broker_jobs_insert ON broker.broker_jobs;
CREATE POLICY broker_jobs_insert ON broker.broker_jobs FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND enqueued_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND broker._may_run_as(run_as, CURRENT_USER)
                AND (idempotency_key IS NULL OR NOT pg_catalog.starts_with(idempotency_key, 'broker_schedule:'))
                AND complete_status OPERATOR(pg_catalog.=) 0
                AND attempts OPERATOR(pg_catalog.=) 0
                AND pending_deps OPERATOR(pg_catalog.=) 0);
COMMENT ON POLICY broker_jobs_insert ON broker.broker_jobs IS
    'New jobs: current tenant, enqueued_by = the inserting role, a run_as it may use, fresh state; keys broker_schedule:* are the tick''s.';
-- source: sql/functions/broker_add_job.sql (reserved key prefix)
-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_job(p_job_name, p_execute_str, p_job_queue,
--     p_job_priority, p_job_language, p_run_as, p_schedule_id,
--     p_depends_on_job_ids, p_idempotency_key, p_max_attempts, p_job_group,
--     p_depends_on_groups, p_run_after, p_timeout, p_search_path)
--   Enqueues a job for the caller's tenant and returns (job_id, is_new).
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
--   * SECURITY INVOKER on purpose: the rows are written with the caller's
--     rights, so the row-level security policies check the caller's tenant,
--     identity (enqueued_by) and run_as as that caller; the triggers on the
--     tables do the bookkeeping that needs more rights (dependency counters,
--     cycle checks). The job runs as run_as through its executor, created
--     here when missing (see broker_create_executor).
-- Errors: 22004 NULL where a value is required; 22023 invalid value (also an
--   idempotency key starting with 'broker_schedule:', reserved for the tick);
--   42704 unknown run_as role; 42501 run_as not allowed; 23503 unknown
--   schedule or dependency job; 55000 dependency job already failed or
--   cancelled; 23514 self-dependency or dependency cycle.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION broker.broker_add_job(
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
    p_search_path         text        DEFAULT pg_catalog.current_setting('search_path'))
RETURNS TABLE (job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant   text := broker.broker_current_tenant();
    v_language text := pg_catalog.lower(pg_catalog.btrim(p_job_language));
    v_group    text := COALESCE(p_job_group, p_job_name);
    v_run_as   name;
    v_role     record;
    v_ids      bigint[];
    v_groups   text[];
    v_id       bigint;
    v_has_deps boolean;
BEGIN
    ---- argument validation ------------------------------------------------
    IF p_job_name IS NULL OR p_execute_str IS NULL OR p_job_queue IS NULL OR p_job_priority IS NULL
       OR p_job_language IS NULL OR p_max_attempts IS NULL THEN
        RAISE EXCEPTION 'broker_add_job: % must not be NULL',
            CASE WHEN p_job_name IS NULL THEN 'p_job_name' WHEN p_execute_str IS NULL THEN 'p_execute_str'
                 WHEN p_job_queue IS NULL THEN 'p_job_queue' WHEN p_job_priority IS NULL THEN 'p_job_priority'
                 WHEN p_job_language IS NULL THEN 'p_job_language' ELSE 'p_max_attempts' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_job_name) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_job_name) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'broker_add_job: p_job_name must be 1 to 200 characters and not blank'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.btrim(p_execute_str) OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'broker_add_job: p_execute_str is empty; give the SQL the job should run'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_language OPERATOR(pg_catalog.<>) ALL (ARRAY['sql', 'plpgsql']) THEN
        RAISE EXCEPTION 'broker_add_job: unknown job language %', pg_catalog.quote_literal(p_job_language)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use ''sql'' or ''plpgsql''.';
    END IF;
    IF p_job_queue OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_add_job: p_job_queue must be >= 1, got %', p_job_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_attempts OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_add_job: p_max_attempts must be >= 1, got %', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.btrim(v_group) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(v_group) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'broker_add_job: p_job_group must be 1 to 200 characters and not blank'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.btrim(p_idempotency_key) OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'broker_add_job: p_idempotency_key must not be blank (use NULL for none)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.starts_with(p_idempotency_key, 'broker_schedule:') THEN
        RAISE EXCEPTION 'broker_add_job: idempotency keys starting with broker_schedule: are reserved for schedules'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_timeout OPERATOR(pg_catalog.<=) interval '0' THEN
        RAISE EXCEPTION 'broker_add_job: p_timeout must be positive, got %', p_timeout
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_depends_on_job_ids IS NOT NULL AND pg_catalog.array_position(p_depends_on_job_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'broker_add_job: p_depends_on_job_ids must not contain NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.unnest(p_depends_on_groups) AS g
                WHERE g IS NULL OR pg_catalog.btrim(g) OPERATOR(pg_catalog.=) '') THEN
        RAISE EXCEPTION 'broker_add_job: p_depends_on_groups must not contain NULL or blank group names'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_add_job: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Strict tenancy is on: broker_admin maps roles to tenants in broker.broker_tenant_roles.';
    END IF;

    ---- run_as: the enqueuer, or a role it is a member of ---------------------
    IF p_run_as IS NULL THEN
        v_run_as := CURRENT_USER;
    ELSE
        SELECT r.rolname, r.rolsuper, r.rolbypassrls INTO v_role
          FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) p_run_as;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'broker_add_job: run_as role % does not exist', pg_catalog.quote_ident(p_run_as)
                USING ERRCODE = 'undefined_object';
        END IF;
        IF NOT pg_catalog.pg_has_role(CURRENT_USER, v_role.rolname, 'MEMBER') THEN
            RAISE EXCEPTION 'broker_add_job: role % may not enqueue jobs that run as %',
                pg_catalog.quote_ident(CURRENT_USER), pg_catalog.quote_ident(p_run_as)
                USING ERRCODE = 'insufficient_privilege',
                      HINT = pg_catalog.format('Only members of %I may: GRANT %I TO %I.', p_run_as, p_run_as, CURRENT_USER);
        END IF;
        IF (v_role.rolsuper OR v_role.rolbypassrls) AND v_role.rolname OPERATOR(pg_catalog.<>) CURRENT_USER
           AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
            RAISE EXCEPTION 'broker_add_job: only a superuser may enqueue jobs that run as superuser or BYPASSRLS role %',
                pg_catalog.quote_ident(p_run_as)
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        v_run_as := v_role.rolname;
    END IF;

    IF p_schedule_id IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM broker.broker_schedule AS s
         WHERE s.schedule_id OPERATOR(pg_catalog.=) p_schedule_id AND s.tenant_id OPERATOR(pg_catalog.=) v_tenant) THEN
        RAISE EXCEPTION 'broker_add_job: schedule % does not exist', p_schedule_id
            USING ERRCODE = 'foreign_key_violation';
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

    v_ids := ARRAY(SELECT DISTINCT x FROM pg_catalog.unnest(p_depends_on_job_ids) AS x ORDER BY 1);
    v_groups := ARRAY(SELECT DISTINCT g FROM pg_catalog.unnest(p_depends_on_groups) AS g ORDER BY 1);

    IF v_group OPERATOR(pg_catalog.=) ANY (v_groups) THEN
        RAISE EXCEPTION 'broker_add_job: job % cannot depend on its own group %',
            pg_catalog.quote_literal(p_job_name), pg_catalog.quote_literal(v_group)
            USING ERRCODE = 'check_violation';
    END IF;

    -- Take every dependency lock this enqueue needs now, in the global order
    -- (the triggers below take the same ones again, which is then free).
    PERFORM broker._lock_dependency_keys(v_tenant, ARRAY[v_group], v_groups, NULL, v_ids);

    -- The job will run inside its run_as role's executor: make sure it has one.
    IF broker._executor(v_run_as) IS NULL THEN
        PERFORM broker.broker_create_executor(v_run_as);
    END IF;

    ---- insert -------------------------------------------------------------
    v_has_deps := pg_catalog.cardinality(v_ids) OPERATOR(pg_catalog.>) 0 OR pg_catalog.cardinality(v_groups) OPERATOR(pg_catalog.>) 0;
    IF v_has_deps THEN
        PERFORM pg_catalog.set_config('broker.defer_notify', 'on', true);
    END IF;
    LOOP
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, schedule_id, idempotency_key, max_attempts, run_after, job_timeout, job_search_path)
        VALUES (p_job_name, v_group, p_execute_str, v_language, p_job_queue, p_job_priority,
                v_run_as, p_schedule_id, p_idempotency_key, p_max_attempts,
                COALESCE(p_run_after, pg_catalog.now()), p_timeout, COALESCE(p_search_path, ''))
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
        -- Each edge is validated, cycle-checked and counted by its trigger.
        INSERT INTO broker.broker_job_dependency (job_id, depends_on_job_id)
        SELECT v_id, x FROM pg_catalog.unnest(v_ids) AS x;
        INSERT INTO broker.broker_job_dependency (job_id, depends_on_group)
        SELECT v_id, g FROM pg_catalog.unnest(v_groups) AS g;
        -- wake a runner only if nothing it waits on is unfinished
        PERFORM broker._notify_queues(ARRAY[p_job_queue])
           FROM broker.broker_jobs AS j
          WHERE j.job_id OPERATOR(pg_catalog.=) v_id
            AND j.pending_deps OPERATOR(pg_catalog.=) 0
            AND j.run_after OPERATOR(pg_catalog.<=) pg_catalog.statement_timestamp();
    END IF;

    RETURN QUERY SELECT v_id, true;
END;
$$;
COMMENT ON FUNCTION broker.broker_add_job(text, text, integer, integer, text, text, bigint, bigint[], text, integer, text, text[], timestamptz, interval, text) IS
    'Enqueues a job (SQL or PL/pgSQL) for the current tenant with optional id/group dependencies, idempotency key, retries, delay and timeout; returns (job_id, is_new).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_job_simple(p_job_name, p_execute_str,
--     p_job_priority, p_depends_on_groups)
--   Shortcut for the common case: queue 1, SQL, one attempt, group = name.
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

-- source: sql/functions/cron_parse.sql
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
--   clause makes each call save and restore the setting, which made
--   broker_cron_next up to twice as slow. tests_sql/32 guards this.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._cron_field(p_field, p_label, p_min, p_max, p_names, p_expr)
--   The bit mask of one field: '*', lists 'a,b', ranges 'a-b', steps '*/s',
--   'a-b/s' and 'a/s' (= a-max/s), values as numbers or (month, day of week)
--   three-letter names, case-insensitive. p_names[i] names the value
--   p_min + i - 1. Day of week 7 is Sunday like 0 (the caller folds bit 7).
-- Errors: 22023 naming the field, the offending part and the whole expression.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_field(p_field text, p_label text, p_min integer, p_max integer, p_names text[],
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
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_parse(p_expr text,
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

-- source: sql/functions/cron_next.sql
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
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_next_wall(p_minutes bigint, p_hours bigint, p_days bigint, p_months bigint,
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
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._cron_utc_offset(p_utc timestamp, p_timezone text)
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
--   the field) or unknown time zone.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_cron_next(p_expr text, p_after timestamptz, p_timezone text DEFAULT 'UTC')
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

-- source: sql/functions/schedules.sql
-- ---------------------------------------------------------------------------
-- Schedules: add, alter, enable/disable, remove.
--   All SECURITY INVOKER: rows are written with the caller's rights, so the
--   row-level security policies check tenant, owner (created_by) and run_as
--   as the caller, exactly as for jobs. Each change sends NOTIFY
--   pgsql_broker_schedule '<database>' (on commit) so a runner re-reads its
--   next tick time at once.
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_check(p_fn, s)
--   Validates a schedule row (new or altered) as p_fn and returns its next
--   fire time after now. Resolves nothing; raises on the first bad value.
-- Errors: 22004 NULL where a value is required; 22023 invalid value, bad
--   cron expression (the message names the field), unknown time zone, or an
--   expression that never fires; 42704 unknown run_as role; 42501 run_as
--   not allowed for the caller.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_check(p_fn text, s broker.broker_schedule)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_next timestamptz;
BEGIN
    IF s.schedule_name IS NULL OR s.cron_expr IS NULL OR s.execute_str IS NULL OR s.time_zone IS NULL
       OR s.job_queue IS NULL OR s.job_priority IS NULL OR s.job_language IS NULL OR s.max_attempts IS NULL
       OR s.catch_up IS NULL OR s.catch_up_max IS NULL OR s.overlap IS NULL OR s.enabled IS NULL THEN
        RAISE EXCEPTION '%: arguments must not be NULL (except p_run_as, p_job_group, p_job_timeout)', p_fn
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(s.schedule_name) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(s.schedule_name) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION '%: the schedule name must be 1 to 200 characters and not blank', p_fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.btrim(s.execute_str) OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION '%: p_execute_str is empty; give the SQL the jobs should run', p_fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.job_language OPERATOR(pg_catalog.<>) ALL (ARRAY['sql', 'plpgsql']) THEN
        RAISE EXCEPTION '%: unknown job language %', p_fn, pg_catalog.quote_literal(s.job_language)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Use ''sql'' or ''plpgsql''.';
    END IF;
    IF s.job_queue OPERATOR(pg_catalog.<) 1 OR s.max_attempts OPERATOR(pg_catalog.<) 1 OR s.catch_up_max OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION '%: % must be >= 1', p_fn,
            CASE WHEN s.job_queue OPERATOR(pg_catalog.<) 1 THEN 'p_job_queue'
                 WHEN s.max_attempts OPERATOR(pg_catalog.<) 1 THEN 'p_max_attempts' ELSE 'p_catch_up_max' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.btrim(s.job_group) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(s.job_group) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION '%: p_job_group must be 1 to 200 characters and not blank (NULL: the schedule name)', p_fn
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
    IF s.job_timeout OPERATOR(pg_catalog.<=) interval '0' THEN
        RAISE EXCEPTION '%: p_job_timeout must be positive, got %', p_fn, s.job_timeout
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) s.run_as) THEN
        RAISE EXCEPTION '%: run_as role % does not exist', p_fn, pg_catalog.quote_ident(s.run_as)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT broker._may_run_as(s.run_as, CURRENT_USER) THEN
        RAISE EXCEPTION '%: role % may not schedule jobs that run as %', p_fn, pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_ident(s.run_as)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Be a member of that role (superuser and BYPASSRLS roles: only superusers).';
    END IF;
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
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_notify()
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_notify('pgsql_broker_schedule', pg_catalog.current_database())
$$;
COMMENT ON FUNCTION broker._schedule_notify() IS
    'Internal: NOTIFY pgsql_broker_schedule, ''<database>'' so runners re-plan their next tick (sent on commit).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_add_schedule(p_schedule_name, p_cron_expr,
--     p_execute_str, p_time_zone, p_job_queue, p_job_priority,
--     p_job_language, p_run_as, p_max_attempts, p_job_group, p_catch_up,
--     p_catch_up_max, p_overlap, p_enabled, p_job_timeout, p_search_path)
--   Creates a schedule for the caller's tenant, owned by the caller, and
--   returns (schedule_id, next_fire_at). Jobs are named after the schedule
--   and run as p_run_as (default: the caller).
-- Errors: those of broker._schedule_check; 23505 a schedule of that name
--   exists in the tenant; 42501 the role may not act for the tenant.
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
    p_search_path   text     DEFAULT pg_catalog.current_setting('search_path'))
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s      broker.broker_schedule;
    v_next timestamptz;
BEGIN
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
    v_next := broker._schedule_check('broker_add_schedule', s);
    IF NOT broker._tenant_allowed(broker.broker_current_tenant(), CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_add_schedule: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(broker.broker_current_tenant())
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM broker.broker_schedule AS x
                WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                  AND x.schedule_name OPERATOR(pg_catalog.=) p_schedule_name) THEN
        RAISE EXCEPTION 'broker_add_schedule: schedule % exists already', pg_catalog.quote_literal(p_schedule_name)
            USING ERRCODE = 'unique_violation', HINT = 'Change it with broker_alter_schedule.';
    END IF;
    -- its jobs run inside the run_as role's executor: create it now, with the caller's rights
    IF broker._executor(s.run_as) IS NULL THEN
        PERFORM broker.broker_create_executor(s.run_as);
    END IF;
    RETURN QUERY
    INSERT INTO broker.broker_schedule AS t
           (schedule_name, cron_expr, time_zone, execute_str, job_language, job_queue, job_priority, run_as,
            max_attempts, job_group, enabled, next_fire_at, job_timeout, job_search_path, catch_up, catch_up_max,
            overlap)
    VALUES (s.schedule_name, s.cron_expr, s.time_zone, s.execute_str, s.job_language, s.job_queue, s.job_priority,
            s.run_as, s.max_attempts, s.job_group, s.enabled, CASE WHEN s.enabled THEN v_next END, s.job_timeout,
            COALESCE(p_search_path, ''), s.catch_up, s.catch_up_max, s.overlap)
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
END;
$$;
COMMENT ON FUNCTION broker.broker_add_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, boolean, interval, text) IS
    'Creates a cron schedule (expression, IANA time zone, job template, catch-up and overlap policy) for the current tenant; returns (schedule_id, next_fire_at).';

-- ---------------------------------------------------------------------------
-- Function: broker._schedule_row(p_fn, p_schedule_name)
--   The caller's tenant's schedule p_schedule_name, locked FOR UPDATE (as the
--   caller: row-level security applies).
-- Errors: 22004 NULL name; 42704 no such schedule (or not visible).
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_row(p_fn text, p_schedule_name text)
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
--   p_job_group '' resets it to the schedule name) and returns
--   (schedule_id, next_fire_at). A change of expression or time zone plans
--   the next fire from now: fires missed meanwhile are dropped.
-- Errors: those of broker._schedule_check and broker._schedule_row;
--   23505 p_new_name is taken.
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
    p_new_name      text     DEFAULT NULL)
RETURNS TABLE (schedule_id bigint, next_fire_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
           job_search_path = s.job_search_path, next_fire_at = CASE WHEN s.enabled THEN v_next END, last_error = NULL
     WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id
    RETURNING t.schedule_id, t.next_fire_at;
    PERFORM broker._schedule_notify();
END;
$$;
COMMENT ON FUNCTION broker.broker_alter_schedule(text, text, text, text, integer, integer, text, text, integer, text, text, integer, text, interval, text, text) IS
    'Changes a schedule (NULL arguments keep a property); returns (schedule_id, next_fire_at).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_enable_schedule(p_schedule_name, p_enabled)
--   Enables (default) or disables a schedule; returns its next fire time
--   (NULL when disabled). Enabling plans the next fire from now: nothing is
--   caught up for the time it was disabled.
-- Errors: those of broker._schedule_row; 22004 NULL p_enabled.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_enable_schedule(p_schedule_name text, p_enabled boolean DEFAULT true)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
    RETURN v_next;
END;
$$;
COMMENT ON FUNCTION broker.broker_enable_schedule(text, boolean) IS
    'Enables or disables a schedule; returns the next fire time (NULL when disabled).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_remove_schedule(p_schedule_name, p_missing_ok)
--   Deletes a schedule. Its jobs stay (their schedule_id becomes NULL).
--   Returns true when removed, false when missing and p_missing_ok.
-- Errors: those of broker._schedule_row (unless p_missing_ok).
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_remove_schedule(p_schedule_name text, p_missing_ok boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s broker.broker_schedule;
BEGIN
    IF p_missing_ok AND NOT EXISTS (SELECT 1 FROM broker.broker_schedule AS x
                                     WHERE x.tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                                       AND x.schedule_name OPERATOR(pg_catalog.=) p_schedule_name) THEN
        RETURN false;
    END IF;
    s := broker._schedule_row('broker_remove_schedule', p_schedule_name);
    DELETE FROM broker.broker_schedule AS t WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
    PERFORM broker._schedule_notify();
    RETURN true;
END;
$$;
COMMENT ON FUNCTION broker.broker_remove_schedule(text, boolean) IS
    'Removes a schedule (its jobs stay, unlinked); false if it did not exist and p_missing_ok.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._schedule_before_write()
--   Row-level BEFORE INSERT OR UPDATE on broker_schedule, SECURITY INVOKER:
--   for writers without BYPASSRLS (enqueuers, through the functions or
--   directly) a next_fire_at in the past becomes now, so nobody can make the
--   tick walk years of missed fires; the tick itself (the owner) is exempt.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_before_write()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.next_fire_at OPERATOR(pg_catalog.<) pg_catalog.now()
       AND (TG_OP OPERATOR(pg_catalog.=) 'INSERT' OR NEW.next_fire_at IS DISTINCT FROM OLD.next_fire_at)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r
                        WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND (r.rolsuper OR r.rolbypassrls)) THEN
        NEW.next_fire_at := pg_catalog.now();
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._schedule_before_write() IS
    'Internal trigger: a next_fire_at in the past written by a role without BYPASSRLS becomes now (no unbounded catch-up).';

CREATE TRIGGER broker_schedule_before_write_trg
    BEFORE INSERT OR UPDATE OF next_fire_at ON broker.broker_schedule
    FOR EACH ROW EXECUTE FUNCTION broker._schedule_before_write();
COMMENT ON TRIGGER broker_schedule_before_write_trg ON broker.broker_schedule IS
    'Clamps a past next_fire_at written by non-BYPASSRLS roles to now.';

-- source: sql/functions/schedule_tick.sql
-- ---------------------------------------------------------------------------
-- Function: broker._schedule_fire(s, p_fires)
--   Enqueues one job per fire time in p_fires for schedule row s, in the
--   schedule owner's name (enqueued_by = created_by), for its tenant, and
--   returns how many were new. The idempotency key
--   'broker_schedule:<schedule_id>:<fire time as epoch>' makes a fire that
--   still has an unfinished job a no-op. Called only by the tick.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_fire(s broker.broker_schedule, p_fires timestamptz[])
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
                enqueued_by, schedule_id, idempotency_key, max_attempts, run_after, job_timeout, job_search_path)
        VALUES (s.tenant_id, s.schedule_name, COALESCE(s.job_group, s.schedule_name), s.execute_str, s.job_language,
                s.job_queue, s.job_priority, s.run_as, s.created_by, s.schedule_id,
                pg_catalog.format('broker_schedule:%s:%s', s.schedule_id, pg_catalog.date_part('epoch', v_fire)),
                s.max_attempts, pg_catalog.now(), s.job_timeout, s.job_search_path)
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
-- Function: broker._schedule_due(s, p_now)
--   The due fires of schedule row s (fire times <= p_now) that its catch-up
--   policy may still enqueue, oldest first, the number of due fires it
--   looked at, and the next fire after p_now. Bounded work whatever
--   next_fire_at says: it needs only the latest fire (catch_up none/one) or
--   the latest catch_up_max fires (all), so it scans back from p_now over a
--   window that grows fourfold until it holds that many fires, or reaches
--   next_fire_at; fires older than the window are dropped without being
--   enumerated (and not counted). At most 100,000 fires are evaluated.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_due(s broker.broker_schedule, p_now timestamptz,
    OUT fires timestamptz[], OUT seen integer, OUT next_fire timestamptz)
RETURNS record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_need   integer := CASE WHEN s.catch_up OPERATOR(pg_catalog.=) 'all' THEN s.catch_up_max ELSE 1 END;
    v_window interval := pg_catalog.make_interval(mins => v_need OPERATOR(pg_catalog.+) 1);
    v_from   timestamptz;
    v_fire   timestamptz;
    v_budget integer := 100000;
BEGIN
    LOOP
        fires := ARRAY[]::timestamptz[];
        IF s.next_fire_at OPERATOR(pg_catalog.>=) (p_now OPERATOR(pg_catalog.-) v_window) THEN
            v_fire := s.next_fire_at;                      -- the whole backlog fits the window
            v_from := NULL;
        ELSE
            v_from := p_now OPERATOR(pg_catalog.-) v_window;
            v_fire := broker.broker_cron_next(s.cron_expr, v_from, s.time_zone);
        END IF;
        WHILE v_fire OPERATOR(pg_catalog.<=) p_now LOOP
            fires := fires OPERATOR(pg_catalog.||) v_fire;
            v_budget := v_budget OPERATOR(pg_catalog.-) 1;
            IF v_budget OPERATOR(pg_catalog.<) 0 THEN
                RAISE EXCEPTION 'catch-up of schedule % evaluated 100000 fires without reaching now', s.schedule_id
                    USING ERRCODE = 'program_limit_exceeded';
            END IF;
            v_fire := broker.broker_cron_next(s.cron_expr, v_fire, s.time_zone);
        END LOOP;
        EXIT WHEN v_from IS NULL OR pg_catalog.cardinality(fires) OPERATOR(pg_catalog.>=) v_need;
        v_window := v_window OPERATOR(pg_catalog.*) 4;
    END LOOP;
    seen := pg_catalog.cardinality(fires);
    next_fire := v_fire;
    -- keep what the policy may enqueue
    fires := CASE
        WHEN seen OPERATOR(pg_catalog.=) 0 THEN fires
        WHEN fires[seen] OPERATOR(pg_catalog.>=) (p_now OPERATOR(pg_catalog.-) interval '60 seconds')
             AND s.catch_up OPERATOR(pg_catalog.<>) 'all'
            THEN fires[seen:]                                        -- on time
        WHEN s.catch_up OPERATOR(pg_catalog.=) 'none' THEN ARRAY[]::timestamptz[]
        WHEN s.catch_up OPERATOR(pg_catalog.=) 'one' THEN fires[seen:]
        ELSE fires[GREATEST(1, seen OPERATOR(pg_catalog.-) s.catch_up_max OPERATOR(pg_catalog.+) 1):]
    END;
END;
$$;
COMMENT ON FUNCTION broker._schedule_due(broker.broker_schedule, timestamptz) IS
    'Internal: a schedule''s due fires its catch-up policy keeps, how many due fires were seen, and the next fire (bounded work).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_schedule_tick()
--   Enqueues the jobs of every due fire of every enabled schedule (all
--   tenants) and plans each schedule's next fire. Returns how many jobs it
--   enqueued, the earliest next fire time of all enabled schedules, and the
--   seconds from now until then (server clock), so a runner can sleep
--   exactly that long: NULL when no schedule is enabled, 1 when a due
--   schedule was locked by someone else and must be tried again.
--   * Exactly once: each due schedule row is locked (FOR NO KEY UPDATE SKIP LOCKED)
--     and its next_fire_at moves past now in the same transaction, so two
--     runners or two transactions ticking at the same moment enqueue each
--     fire once; the idempotency key per (schedule, fire time) backs it up.
--   * Missed fires (the runner was down): a fire more than 60 seconds late
--     is missed. catch_up = none drops them, one (default) enqueues one job
--     for the latest missed fire, all enqueues one per missed fire (the
--     latest catch_up_max). A fire on time always enqueues its job. Fires
--     that enqueue nothing are counted in skipped_fires (after a long outage
--     only those in the window broker._schedule_due looks at).
--   * Overlap: with overlap = skip (default), nothing is enqueued while the
--     previous job of the schedule (last_job_id) is pending or running;
--     those fires are counted in skipped_fires.
--   * A schedule whose owner (created_by) may no longer run jobs as run_as
--     or act for its tenant, or that cannot be evaluated any more (say its
--     time zone was removed), is disabled, with the reason in last_error.
--   SECURITY DEFINER (the runner has no BYPASSRLS): it must see every
--   tenant's schedules; the jobs carry the schedule's tenant and owner.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_schedule_tick(
    OUT jobs_enqueued integer, OUT next_fire_at timestamptz, OUT seconds_until_next double precision)
RETURNS record
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s       broker.broker_schedule;
    v_now   timestamptz := pg_catalog.now();
    v_fires     timestamptz[];
    v_next      timestamptz;
    v_seen      integer;
    v_jobs      integer;
    v_last_job  bigint;
    v_last_fire timestamptz;
    v_error     text;
BEGIN
    jobs_enqueued := 0;
    FOR s IN
        -- NO KEY UPDATE: does not wait for, nor skip on, the key-share locks that inserting a job of the
        -- schedule takes; SKIP LOCKED: a schedule another tick (or its owner) holds is left to it
        SELECT * FROM broker.broker_schedule AS x
         WHERE x.enabled AND (x.next_fire_at IS NULL OR x.next_fire_at OPERATOR(pg_catalog.<=) v_now)
         ORDER BY x.next_fire_at NULLS FIRST
           FOR NO KEY UPDATE SKIP LOCKED
    LOOP
        v_next := NULL;
        v_seen := 0;
        v_jobs := 0;
        v_last_job := NULL;
        v_last_fire := NULL;
        BEGIN
            v_error := CASE
                WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) s.created_by)
                    THEN pg_catalog.format('owner role %I no longer exists', s.created_by)
                WHEN NOT broker._tenant_allowed(s.tenant_id, s.created_by)
                    THEN pg_catalog.format('owner %I may no longer act for tenant %L', s.created_by, s.tenant_id)
                WHEN NOT broker._may_run_as(s.run_as, s.created_by)
                    THEN pg_catalog.format('owner %I may no longer run jobs as %I', s.created_by, s.run_as) END;
            IF v_error IS NULL AND s.next_fire_at IS NULL THEN
                -- written directly without a plan: plan it, fire nothing now
                v_next := broker.broker_cron_next(s.cron_expr, v_now, s.time_zone);
                v_error := CASE WHEN v_next IS NULL THEN 'the cron expression never fires' END;
            ELSIF v_error IS NULL THEN
                SELECT d.fires, d.seen, d.next_fire INTO v_fires, v_seen, v_next   -- v_next NULL: never again
                  FROM broker._schedule_due(s, v_now) AS d;
                IF s.overlap OPERATOR(pg_catalog.=) 'skip' AND EXISTS (
                    SELECT 1 FROM broker.broker_jobs AS j
                     WHERE j.job_id OPERATOR(pg_catalog.=) s.last_job_id
                       AND j.complete_status OPERATOR(pg_catalog.<=) 1) THEN
                    v_fires := ARRAY[]::timestamptz[];
                END IF;
                IF pg_catalog.cardinality(v_fires) OPERATOR(pg_catalog.>) 0 THEN
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
             WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
        ELSE
            jobs_enqueued := jobs_enqueued OPERATOR(pg_catalog.+) v_jobs;
            -- fires that enqueued nothing (policy, overlap, or a key still taken) count as skipped
            UPDATE broker.broker_schedule AS t
               SET next_fire_at = v_next,
                   last_fire_at = COALESCE(v_last_fire, t.last_fire_at),
                   last_job_id = COALESCE(v_last_job, t.last_job_id),
                   skipped_fires = t.skipped_fires OPERATOR(pg_catalog.+) v_seen OPERATOR(pg_catalog.-) v_jobs
             WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
        END IF;
    END LOOP;
    next_fire_at := (SELECT pg_catalog.min(x.next_fire_at) FROM broker.broker_schedule AS x WHERE x.enabled);
    -- a fire still due here belongs to a schedule that was locked: come back in a second
    seconds_until_next := CASE
        WHEN next_fire_at IS NULL THEN NULL
        WHEN next_fire_at OPERATOR(pg_catalog.<=) v_now THEN 1
        ELSE GREATEST(0, pg_catalog.date_part('epoch', next_fire_at OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp())) END;
END;
$$;
COMMENT ON FUNCTION broker.broker_schedule_tick() IS
    'Enqueues each due schedule fire exactly once (catch-up and overlap policies), plans the next fires; returns (jobs_enqueued, next_fire_at, seconds_until_next).';

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA broker FROM PUBLIC;
