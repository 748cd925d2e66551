-- sql/run/release.sql: handing claimed jobs back (broker_release_jobs, broker_release_claim) and the argument checks.
-- ---------------------------------------------------------------------------
-- Function: broker._check_lease_args(p_fn, p_job_ids, p_lease_tokens)
--   The argument rules that broker_release_jobs and broker_interrupt_jobs
--   share: neither array NULL (22004), one token per job and at most 1000
--   jobs (22023); p_fn names the caller in the messages.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._check_lease_args(p_fn text, p_job_ids bigint[], p_lease_tokens uuid[])
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_job_ids IS NULL OR p_lease_tokens IS NULL THEN
        RAISE EXCEPTION '%: p_job_ids and p_lease_tokens must not be NULL', p_fn
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(p_lease_tokens) THEN
        RAISE EXCEPTION '%: % lease tokens for % jobs; pass one token per job',
            p_fn, pg_catalog.cardinality(p_lease_tokens), pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(p_job_ids) OPERATOR(pg_catalog.>) 1000 THEN
        RAISE EXCEPTION '%: at most 1000 jobs per call, got %', p_fn, pg_catalog.cardinality(p_job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._check_lease_args(text, bigint[], uuid[]) IS
    'Internal: the argument checks of broker_release_jobs and broker_interrupt_jobs (22004, 22023).';

-- ---------------------------------------------------------------------------
-- Function: broker._check_lease_seconds(p_fn, p_seconds, p_hint)
--   Raises 22023 (as p_fn, with p_hint) unless a lease of p_seconds is 1 to
--   3600 seconds: a lease only bounds how long a crashed claimer holds what
--   it claimed, and a claim never holds anything longer than an hour.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._check_lease_seconds(p_fn text, p_seconds integer, p_hint text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_seconds IS NOT NULL AND p_seconds OPERATOR(pg_catalog.>=) 1 AND p_seconds OPERATOR(pg_catalog.<=) 3600 THEN
        RETURN;
    END IF;
    IF p_hint IS NULL THEN
        RAISE EXCEPTION '%: the lease must be 1 to 3600 seconds, got %', p_fn, COALESCE(p_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RAISE EXCEPTION '%: the lease must be 1 to 3600 seconds, got %', p_fn, COALESCE(p_seconds::text, 'NULL')
        USING ERRCODE = 'invalid_parameter_value', HINT = p_hint;
END;
$$;
COMMENT ON FUNCTION broker._check_lease_seconds(text, integer, text) IS
    'Internal: 22023 unless a lease is 1 to 3600 seconds (every function that gives or renews a lease).';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_release_jobs(p_job_ids, p_lease_tokens, p_run_alone)
--   Hands claimed jobs back that their claimer will not run (say its session
--   to the database was lost before it ran them): each job that is still
--   running under the lease token given with it, and that no session is
--   executing (row-locked by broker_run), returns to pending at once with
--   the attempt of its claim not counted, unless a cancel request was made
--   for it while it was claimed: then it ends cancelled, its dependents
--   too (_cancel_handed_back). Only the claimer knows the token,
--   so no one else can release a job. Jobs under another lease, executing,
--   finished or unknown are left as they are. p_run_alone marks the jobs
--   released to run in a transaction of their own from now on (run_alone):
--   they shared a transaction whose session died, and whichever of them
--   ended it (or nothing: a network reset) must not take the others down
--   again; run alone, such a job counts its attempt when it does it again
--   (lease recovery). Returns the ids released.
-- Errors: 22004 an argument is NULL; 22023 arrays of different lengths, or
--   more than 1000 jobs.
-- Example:
--   SELECT broker.broker_release_jobs(ARRAY[43, 44], ARRAY['1d2e...'::uuid, '5f6a...'::uuid]);   -- claimed, not started
--   Calls: _check_lease_args, _count_pending_deps, _cancel_handed_back, _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_release_jobs(p_job_ids bigint[], p_lease_tokens uuid[],
                                           p_run_alone boolean DEFAULT false)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues integer[];
BEGIN
    PERFORM broker._check_lease_args('broker_release_jobs', p_job_ids, p_lease_tokens);
    WITH mine AS (
        SELECT j.job_id FROM broker.broker_jobs AS j
          JOIN ROWS FROM (pg_catalog.unnest(p_job_ids), pg_catalog.unnest(p_lease_tokens)) AS u(id, token)
            ON j.job_id OPERATOR(pg_catalog.=) u.id
         WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
           AND j.lease_token OPERATOR(pg_catalog.=) u.token
         ORDER BY j.job_id
           FOR NO KEY UPDATE OF j SKIP LOCKED
    ), released AS (
        UPDATE broker.broker_jobs AS j
           SET complete_status = broker._state('pending'),
               attempts = j.attempts OPERATOR(pg_catalog.-) 1,
               pending_deps = broker._count_pending_deps(j.tenant_id, j.job_id),
               lease_token = NULL, lease_expires_at = NULL, lease_instance_id = NULL,
               run_alone = j.run_alone OR COALESCE(p_run_alone, false)
          FROM mine
         WHERE j.job_id OPERATOR(pg_catalog.=) mine.job_id
        RETURNING j.job_id, j.job_queue
    )
    SELECT pg_catalog.array_agg(r.job_id ORDER BY r.job_id), pg_catalog.array_agg(r.job_queue)
      INTO p_job_ids, v_queues FROM released AS r;
    -- a job with a cancel request made while it was claimed is not run again: cancelled
    PERFORM broker._cancel_handed_back(p_job_ids);
    PERFORM broker._notify_queues(v_queues);
    RETURN QUERY SELECT u.id FROM pg_catalog.unnest(p_job_ids) AS u(id);
END;
$$;
COMMENT ON FUNCTION broker.broker_release_jobs(bigint[], uuid[], boolean) IS
    'Hands claimed jobs back to pending without counting the attempt (only under the lease token of their claim, and not while executing; p_run_alone: each runs in a transaction of its own from now on); returns the ids released.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_release_claim(p_lease_token)
--   Hands back a whole claim whose answer its claimer never received (its
--   connection died while broker_get or broker_claim_batches committed),
--   named by the lease token the claimer chose for it (p_lease_token of the
--   claim): every job still running under the token derived from it
--   (_claim_job_token) that no session is executing returns to pending as
--   broker_release_jobs returns it (attempt not counted). The claimer never saw those jobs, so none of them started.
--   Returns the ids released (at most 1000 a call: call again while it
--   returns some).
-- Errors: 22004 p_lease_token is NULL.
-- Example:
--   SELECT broker.broker_release_claim('9b2c...'::uuid);   -- the claim's answer was lost
--   Calls: broker_release_jobs, _claim_job_token
--   Tables: reads broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_release_claim(p_lease_token uuid)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids    bigint[];
    v_tokens uuid[];
BEGIN
    IF p_lease_token IS NULL THEN
        RAISE EXCEPTION 'broker_release_claim: p_lease_token must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- (the running jobs: few, by the lease index; each one's token derived as the claim derived it)
    SELECT pg_catalog.array_agg(j.job_id), pg_catalog.array_agg(j.lease_token) INTO v_ids, v_tokens
      FROM (SELECT j.job_id, j.lease_token FROM broker.broker_jobs AS j
             WHERE j.complete_status OPERATOR(pg_catalog.=) broker._state('running')
               AND j.lease_token OPERATOR(pg_catalog.=) broker._claim_job_token(p_lease_token, j.job_id)
             LIMIT 1000) AS j;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT r.job_id FROM broker.broker_release_jobs(v_ids, v_tokens) AS r;
END;
$$;
COMMENT ON FUNCTION broker.broker_release_claim(uuid) IS
    'Hands back, without counting the attempt, every job still running under a claim''s lease token that no session executes (a claim whose answer its claimer lost); returns the ids released.';
