-- ---------------------------------------------------------------------------
-- Function: broker._schedule_fire(s, p_fires)
--   Enqueues one job per fire time in p_fires for schedule row s, in the
--   schedule owner's name (enqueued_by = created_by), for its tenant, and
--   returns how many were new. The idempotency key
--   'broker_schedule:<schedule_id>:<fire time as epoch>' makes a fire that
--   still has an unfinished job a no-op. Called only by the tick.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_fire(s broker.broker_schedule, p_fires timestamptz[])
RETURNS TABLE (jobs integer, last_job_id bigint)
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
        END IF;
    END LOOP;
    RETURN NEXT;
END;
$$;
COMMENT ON FUNCTION broker._schedule_fire(broker.broker_schedule, timestamptz[]) IS
    'Internal: the tick''s enqueue of one job per fire time for a schedule, idempotent per (schedule, fire time).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_schedule_tick()
--   Enqueues the jobs of every due fire of every enabled schedule (all
--   tenants) and plans each schedule's next fire. Returns how many jobs it
--   enqueued, the earliest next fire time of all enabled schedules, and the
--   seconds from now until then (server clock), so a runner can sleep
--   exactly that long.
--   * Exactly once: each due schedule row is locked (FOR UPDATE SKIP LOCKED)
--     and its next_fire_at moves past now in the same transaction, so two
--     runners or two transactions ticking at the same moment enqueue each
--     fire once; the idempotency key per (schedule, fire time) backs it up.
--   * Missed fires (the runner was down): a fire more than 60 seconds late
--     is missed. catch_up = none drops them, one (default) enqueues one job
--     for the latest missed fire, all enqueues one per missed fire (the
--     latest catch_up_max). A fire on time always enqueues its job.
--     Dropped fires are counted in skipped_fires.
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
    s        broker.broker_schedule;
    v_now    timestamptz := pg_catalog.now();
    v_grace  constant interval := interval '60 seconds';
    v_due    timestamptz[];
    v_fire   timestamptz;
    v_fires  timestamptz[];
    v_result record;
    v_error  text;
BEGIN
    jobs_enqueued := 0;
    FOR s IN
        SELECT * FROM broker.broker_schedule AS x
         WHERE x.enabled AND (x.next_fire_at IS NULL OR x.next_fire_at OPERATOR(pg_catalog.<=) v_now)
         ORDER BY x.next_fire_at NULLS FIRST
           FOR UPDATE SKIP LOCKED
    LOOP
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
                s.next_fire_at := broker.broker_cron_next(s.cron_expr, v_now, s.time_zone);
                v_error := CASE WHEN s.next_fire_at IS NULL THEN 'the cron expression never fires' END;
            ELSIF v_error IS NULL THEN
                v_due := ARRAY[]::timestamptz[];
                v_fire := s.next_fire_at;
                WHILE v_fire OPERATOR(pg_catalog.<=) v_now LOOP
                    v_due := v_due OPERATOR(pg_catalog.||) v_fire;
                    v_fire := broker.broker_cron_next(s.cron_expr, v_fire, s.time_zone);
                END LOOP;
                s.next_fire_at := v_fire;   -- NULL if it never fires again
                v_fires := CASE
                    WHEN v_due[pg_catalog.cardinality(v_due)] OPERATOR(pg_catalog.>=) (v_now OPERATOR(pg_catalog.-) v_grace)
                         AND s.catch_up OPERATOR(pg_catalog.<>) 'all'
                        THEN v_due[pg_catalog.cardinality(v_due):]              -- on time
                    WHEN s.catch_up OPERATOR(pg_catalog.=) 'none'
                        THEN ARRAY[]::timestamptz[]
                    WHEN s.catch_up OPERATOR(pg_catalog.=) 'one'
                        THEN v_due[pg_catalog.cardinality(v_due):]
                    ELSE v_due[GREATEST(1, pg_catalog.cardinality(v_due) OPERATOR(pg_catalog.-) s.catch_up_max OPERATOR(pg_catalog.+) 1):]
                END;
                IF s.overlap OPERATOR(pg_catalog.=) 'skip' AND EXISTS (
                    SELECT 1 FROM broker.broker_jobs AS j
                     WHERE j.job_id OPERATOR(pg_catalog.=) s.last_job_id
                       AND j.complete_status OPERATOR(pg_catalog.<=) 1) THEN
                    v_fires := ARRAY[]::timestamptz[];
                END IF;
                s.skipped_fires := s.skipped_fires OPERATOR(pg_catalog.+) pg_catalog.cardinality(v_due)
                                   OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_fires);
                IF pg_catalog.cardinality(v_fires) OPERATOR(pg_catalog.>) 0 THEN
                    SELECT * INTO v_result FROM broker._schedule_fire(s, v_fires);
                    jobs_enqueued := jobs_enqueued OPERATOR(pg_catalog.+) v_result.jobs;
                    s.last_job_id := COALESCE(v_result.last_job_id, s.last_job_id);
                    s.last_fire_at := v_fires[pg_catalog.cardinality(v_fires)];
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
            UPDATE broker.broker_schedule AS t
               SET next_fire_at = s.next_fire_at, last_fire_at = s.last_fire_at, last_job_id = s.last_job_id,
                   skipped_fires = s.skipped_fires
             WHERE t.schedule_id OPERATOR(pg_catalog.=) s.schedule_id;
        END IF;
    END LOOP;
    next_fire_at := (SELECT pg_catalog.min(x.next_fire_at) FROM broker.broker_schedule AS x WHERE x.enabled);
    seconds_until_next := GREATEST(0, pg_catalog.date_part('epoch', next_fire_at OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()));
END;
$$;
COMMENT ON FUNCTION broker.broker_schedule_tick() IS
    'Enqueues each due schedule fire exactly once (catch-up and overlap policies), plans the next fires; returns (jobs_enqueued, next_fire_at, seconds_until_next).';
