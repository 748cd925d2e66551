-- sql/enqueue/add_plain_jobs.sql: the fast path of broker_add_jobs for jobs without dependencies.
-- ---------------------------------------------------------------------------
-- Function: broker._add_plain_jobs(p_jobs, p_search_path)
--   broker_add_jobs for an array whose elements have no run_as, schedule_id,
--   idempotency_key, depends_on_job_ids or depends_on_groups key, from a
--   caller allowed to act for its tenant (_add_jobs checked both, and the
--   JSON shape): one INSERT straight from the parsed elements, in element
--   order, no arrays in between. An element with a problem raises it when
--   the INSERT reaches it (element order, so the first one is reported) and
--   nothing is written; the jobs run as the caller, whose executor is made
--   when missing. Same rows, checks and notifications as the general path:
--   the table's triggers do the bookkeeping. A value that does not convert
--   raises PostgreSQL's own error (22xxx); _add_jobs then takes the general
--   path, which names the element.
--   Calls: _job_field_error, _parse_jobs, _executor, broker_create_executor
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._add_plain_jobs(p_jobs jsonb, p_search_path text)
RETURNS TABLE (ord integer, job_id bigint, is_new boolean)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
BEGIN
    WITH ins AS (
        INSERT INTO broker.broker_jobs AS j
               (job_name, job_group, execute_str, job_language, job_queue, job_priority,
                run_as, max_attempts, run_after, job_timeout, job_search_path, concurrency_key)
        SELECT (p.job).job_name, COALESCE((p.job).job_group, (p.job).job_name), (p.job).execute_str,
               CASE WHEN p.problem IS NULL THEN pg_catalog.lower(pg_catalog.btrim((p.job).job_language))
                    ELSE broker._job_field_error(pg_catalog.format('broker_add_jobs: element %s', p.ord), p.problem[2], p.problem) END,
               (p.job).job_queue, (p.job).job_priority, CURRENT_USER, (p.job).max_attempts,
               COALESCE((p.job).run_after, pg_catalog.now()), (p.job).timeout, COALESCE((p.job).search_path, ''),
               (p.job).concurrency_key
          FROM broker._parse_jobs(p_jobs, p_search_path) AS p
         ORDER BY p.ord
        RETURNING j.job_id
    )
    SELECT pg_catalog.array_agg(i.job_id ORDER BY i.job_id) INTO v_ids FROM ins AS i;
    IF v_ids IS NULL THEN
        RETURN;  -- an empty array
    END IF;
    -- the jobs run inside the caller's executor: make sure it exists
    IF broker._executor(CURRENT_USER) IS NULL THEN
        PERFORM broker.broker_create_executor(CURRENT_USER);
    END IF;
    -- identity ids increase in the order the INSERT took the rows: element order
    RETURN QUERY SELECT u.o::integer, u.id, true FROM pg_catalog.unnest(v_ids) WITH ORDINALITY AS u(id, o);
END;
$$;
COMMENT ON FUNCTION broker._add_plain_jobs(jsonb, text) IS
    'Internal: broker_add_jobs for elements without run_as, schedule, idempotency key or dependencies: one INSERT in element order.';
