-- sql/enqueue/parse_jobs.sql: parsing the jsonb array of broker_add_jobs.
-- ---------------------------------------------------------------------------
-- Function: broker._parse_jobs(p_jobs, p_search_path)
--   One row per element of the JSON array p_jobs (ord = 1-based position):
--   job, its keys converted to broker_add_job's parameter types (a missing
--   key takes broker_add_job's default: jsonb_populate_record keeps the base
--   row's value; job_group stays NULL, the job's name), a JSON null is NULL;
--   problem, the first rule of broker._job_problem the element breaks, else
--   NULL. Raises PostgreSQL's own conversion errors; the caller checked the
--   JSON types of the values.
--   Calls: _job_problem
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._parse_jobs(p_jobs jsonb, p_search_path text)
RETURNS TABLE (ord integer, job broker._job_fields, problem text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- (r in FROM, not in the select list: converted once per element, however
    -- many fields the inlined rules read)
    SELECT e.o::integer, r, broker._job_problem(r)
      FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(v, o)
     CROSS JOIN LATERAL pg_catalog.jsonb_populate_record(
               ROW(NULL, NULL, 1, 0, 'sql', NULL, NULL, NULL, NULL, 1, NULL, NULL, NULL, NULL, p_search_path, false,
                   NULL)::broker._job_fields,
               e.v) AS r
$$;
COMMENT ON FUNCTION broker._parse_jobs(jsonb, text) IS
    'Internal: the elements of broker_add_jobs'' JSON array as broker._job_fields with broker_add_job''s defaults, and the first rule each breaks.';
