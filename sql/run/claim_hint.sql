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
CREATE FUNCTION broker._jobs_ready_xid()
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
CREATE TRIGGER broker_jobs_ready_xid_trg
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

CREATE TRIGGER broker_jobs_ready_xid_insert_trg
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
