-- sql/enqueue/parse_jobs.sql: parsing the jsonb array of broker_add_jobs.
-- ---------------------------------------------------------------------------
-- Function: broker._parse_jobs(p_jobs, p_search_path)
--   One row per element of the JSON array p_jobs (ord = 1-based position),
--   its keys converted to broker_add_job's parameter types: a missing key
--   takes broker_add_job's default (job_group stays NULL: the job's name),
--   a JSON null is NULL. problem is the first error broker_add_job would
--   raise for the element's arguments alone, as ARRAY[sqlstate, message]
--   (NULLs, blanks, lengths, language, queue, attempts, group, key, timeout,
--   NULL or blank dependencies), else NULL. Raises PostgreSQL's own
--   conversion errors; the caller checked the JSON types of the values.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._parse_jobs(p_jobs jsonb, p_search_path text)
RETURNS TABLE (ord integer, job_name text, execute_str text, job_queue integer, job_priority integer,
               job_language text, run_as text, schedule_id bigint, depends_on_job_ids bigint[],
               idempotency_key text, max_attempts integer, job_group text, depends_on_groups text[],
               run_after timestamptz, job_timeout interval, search_path text, autonomous boolean, problem text[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p.*, CASE
                 WHEN p.job_name IS NULL THEN ARRAY['22004', 'job_name must not be NULL']
                 WHEN p.execute_str IS NULL THEN ARRAY['22004', 'execute_str must not be NULL']
                 WHEN p.job_queue IS NULL THEN ARRAY['22004', 'job_queue must not be NULL']
                 WHEN p.job_priority IS NULL THEN ARRAY['22004', 'job_priority must not be NULL']
                 WHEN p.job_language IS NULL THEN ARRAY['22004', 'job_language must not be NULL']
                 WHEN p.max_attempts IS NULL THEN ARRAY['22004', 'max_attempts must not be NULL']
                 WHEN pg_catalog.btrim(p.job_name) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p.job_name) OPERATOR(pg_catalog.>) 200
                     THEN ARRAY['22023', 'job_name must be 1 to 200 characters and not blank']
                 WHEN pg_catalog.btrim(p.execute_str) OPERATOR(pg_catalog.=) ''
                     THEN ARRAY['22023', 'execute_str is empty; give the SQL the job should run']
                 WHEN pg_catalog.lower(pg_catalog.btrim(p.job_language)) OPERATOR(pg_catalog.<>) ALL (ARRAY['sql', 'plpgsql'])
                     THEN ARRAY['22023', pg_catalog.format('unknown job language %L (use ''sql'' or ''plpgsql'')', p.job_language)]
                 WHEN p.job_queue OPERATOR(pg_catalog.<) 1 THEN ARRAY['22023', pg_catalog.format('job_queue must be >= 1, got %s', p.job_queue)]
                 WHEN p.job_queue OPERATOR(pg_catalog.>) 1000 THEN ARRAY['22023', pg_catalog.format('job_queue must be <= 1000, got %s', p.job_queue)]
                 WHEN p.max_attempts OPERATOR(pg_catalog.<) 1
                     THEN ARRAY['22023', pg_catalog.format('max_attempts must be >= 1, got %s', p.max_attempts)]
                 WHEN pg_catalog.btrim(COALESCE(p.job_group, p.job_name)) OPERATOR(pg_catalog.=) ''
                      OR pg_catalog.length(COALESCE(p.job_group, p.job_name)) OPERATOR(pg_catalog.>) 200
                     THEN ARRAY['22023', 'job_group must be 1 to 200 characters and not blank']
                 WHEN pg_catalog.btrim(p.idempotency_key) OPERATOR(pg_catalog.=) ''
                     THEN ARRAY['22023', 'idempotency_key must not be blank (use null or leave it out for none)']
                 WHEN pg_catalog.length(p.idempotency_key) OPERATOR(pg_catalog.>) 512
                     THEN ARRAY['22023', pg_catalog.format('idempotency_key must be at most 512 characters, got %s',
                                                           pg_catalog.length(p.idempotency_key))]
                 WHEN pg_catalog.starts_with(p.idempotency_key, 'broker_schedule:')
                     THEN ARRAY['22023', 'idempotency keys starting with broker_schedule: are reserved for schedules']
                 WHEN p.job_timeout OPERATOR(pg_catalog.<=) interval '0'
                     THEN ARRAY['22023', pg_catalog.format('timeout must be positive, got %s', p.job_timeout)]
                 WHEN pg_catalog.array_ndims(p.depends_on_job_ids) OPERATOR(pg_catalog.>) 1
                     THEN ARRAY['22023', 'depends_on_job_ids must be a flat array of job ids']
                 WHEN pg_catalog.array_position(p.depends_on_job_ids, NULL) IS NOT NULL
                     THEN ARRAY['22004', 'depends_on_job_ids must not contain null']
                 WHEN pg_catalog.array_ndims(p.depends_on_groups) OPERATOR(pg_catalog.>) 1
                     THEN ARRAY['22023', 'depends_on_groups must be a flat array of group names']
                 WHEN pg_catalog.cardinality(p.depends_on_groups) OPERATOR(pg_catalog.>) 100
                     THEN ARRAY['22023', pg_catalog.format('depends_on_groups may name at most 100 groups, got %s',
                                                           pg_catalog.cardinality(p.depends_on_groups))]
                 WHEN EXISTS (SELECT 1 FROM pg_catalog.unnest(p.depends_on_groups) AS g
                               WHERE g IS NULL OR pg_catalog.btrim(g) OPERATOR(pg_catalog.=) '')
                     THEN ARRAY['22023', 'depends_on_groups must not contain null or blank group names']
            END
      FROM (
        -- jsonb_to_record converts every value at once (the caller checked the
        -- JSON types); a key that is missing, not null, takes the default
        SELECT e.o::integer AS ord, r.job_name, r.execute_str,
               CASE WHEN e.v OPERATOR(pg_catalog.?) 'job_queue' THEN r.job_queue ELSE 1 END AS job_queue,
               CASE WHEN e.v OPERATOR(pg_catalog.?) 'job_priority' THEN r.job_priority ELSE 0 END AS job_priority,
               CASE WHEN e.v OPERATOR(pg_catalog.?) 'job_language' THEN r.job_language ELSE 'sql' END AS job_language,
               r.run_as, r.schedule_id, r.depends_on_job_ids, r.idempotency_key,
               CASE WHEN e.v OPERATOR(pg_catalog.?) 'max_attempts' THEN r.max_attempts ELSE 1 END AS max_attempts,
               r.job_group, r.depends_on_groups, r.run_after, r.timeout AS job_timeout,
               CASE WHEN e.v OPERATOR(pg_catalog.?) 'search_path' THEN r.search_path ELSE p_search_path END AS search_path,
               COALESCE(r.autonomous, false) AS autonomous
          FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS e(v, o)
         CROSS JOIN LATERAL pg_catalog.jsonb_to_record(e.v) AS r(
               job_name pg_catalog.text, execute_str pg_catalog.text, job_queue pg_catalog.int4,
               job_priority pg_catalog.int4, job_language pg_catalog.text, run_as pg_catalog.text,
               schedule_id pg_catalog.int8, depends_on_job_ids pg_catalog.int8[], idempotency_key pg_catalog.text,
               max_attempts pg_catalog.int4, job_group pg_catalog.text, depends_on_groups pg_catalog.text[],
               run_after pg_catalog.timestamptz, timeout pg_catalog.interval, search_path pg_catalog.text,
               autonomous pg_catalog.bool)) AS p
$$;
COMMENT ON FUNCTION broker._parse_jobs(jsonb, text) IS
    'Internal: the elements of broker_add_jobs'' JSON array as typed rows with broker_add_job''s defaults.';
