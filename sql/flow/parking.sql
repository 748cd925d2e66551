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
