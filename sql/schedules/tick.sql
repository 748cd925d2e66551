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
CREATE FUNCTION broker._skipped_fires_cap()
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
CREATE FUNCTION broker._schedule_due(s broker.broker_schedule, p_now timestamptz,
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
CREATE FUNCTION broker._schedule_tick_at(p_now timestamptz, p_max_schedules integer DEFAULT 100,
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
CREATE FUNCTION broker.broker_schedule_tick(
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
