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
