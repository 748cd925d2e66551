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
            v_error := broker._authority_lost(s.created_by, s.tenant_id, s.run_as, 'owner');
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
