-- broker_add_jobs' plain path (elements without run_as, schedule_id, idempotency_key or dependencies):
-- taken when it may be, never otherwise, and the same jobs, errors and all-or-nothing as the general path.
BEGIN;
SELECT plan(12);

SET LOCAL track_functions = 'all';  -- pg_stat_get_xact_function_calls counts this transaction's calls
CREATE FUNCTION pg_temp.plain_calls() RETURNS bigint LANGUAGE sql AS
    $f$ SELECT COALESCE(pg_stat_get_xact_function_calls('broker._add_plain_jobs(jsonb,text)'::regprocedure), 0) $f$;
-- the same elements, as they are (plain) and with "run_as": null added (general path, same meaning)
CREATE FUNCTION pg_temp.elements(p_general boolean) RETURNS jsonb LANGUAGE sql AS $f$
    SELECT jsonb_agg(CASE WHEN p_general THEN e || '{"run_as": null}' ELSE e END ORDER BY o)
      FROM jsonb_array_elements('[
        {"job_name": "p1", "execute_str": "SELECT 1"},
        {"job_name": "p2", "execute_str": "PERFORM 1", "job_queue": 3, "job_priority": 7, "job_language": " PLpgSQL ",
         "max_attempts": 4, "job_group": "grp", "run_after": "2999-01-01T00:00:00Z", "timeout": "90 s",
         "search_path": "other"},
        {"job_name": "p3", "execute_str": "SELECT 3", "search_path": null, "timeout": null},
        {"job_name": "p4", "execute_str": "SELECT 4", "job_priority": -2}]'::jsonb) WITH ORDINALITY AS x(e, o) $f$;
-- where an error was raised (its context), for the calls that fail
CREATE FUNCTION pg_temp.error_context(p_sql text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE v_context text;
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_context = PG_EXCEPTION_CONTEXT;
    RETURN v_context;
END $f$;
CREATE FUNCTION pg_temp.rows_of(p_ids bigint[]) RETURNS text[] LANGUAGE sql AS $f$
    SELECT array_agg(ROW(j.tenant_id, j.job_name, j.job_group, j.execute_str, j.job_language, j.job_queue, j.job_priority,
                         j.run_as, j.enqueued_by, j.schedule_id, j.idempotency_key, j.max_attempts, j.attempts,
                         j.complete_status, j.pending_deps, j.run_after, j.job_timeout, j.job_search_path,
                         j.created_at)::text ORDER BY u.o)
      FROM unnest(p_ids) WITH ORDINALITY AS u(id, o) JOIN broker.broker_jobs AS j ON j.job_id = u.id $f$;

SET LOCAL search_path = app_schema, public;
CREATE TEMP TABLE plain AS SELECT * FROM broker.broker_add_jobs(pg_temp.elements(false));
SELECT is(pg_temp.plain_calls(), 1::bigint, 'elements without run_as, schedule, key or dependencies take the plain path');
CREATE TEMP TABLE general AS SELECT * FROM broker.broker_add_jobs(pg_temp.elements(true));
SELECT is(pg_temp.plain_calls(), 1::bigint, 'an element with one of those keys (even null) takes the general path');
RESET search_path;

SELECT is(ARRAY(SELECT ROW(ord, is_new)::text FROM plain ORDER BY ord), ARRAY(SELECT ROW(ord, is_new)::text FROM general ORDER BY ord),
          'the same (ord, is_new) rows');
SELECT is(ARRAY(SELECT job_id FROM plain ORDER BY ord), ARRAY(SELECT job_id FROM plain ORDER BY job_id),
          'ids increase in element order');
SELECT is(pg_temp.rows_of(ARRAY(SELECT job_id FROM plain ORDER BY ord)),
          pg_temp.rows_of(ARRAY(SELECT job_id FROM general ORDER BY ord)),
          'the same jobs as the general path, column by column (defaults, language, group, search_path)');

-- errors: the element's own problem from the plain path, a conversion error named by the general path;
-- nothing written either way
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "ok", "execute_str": "SELECT 1"},
                   {"job_name": "ok2", "execute_str": "SELECT 1"}, {"job_name": " ", "execute_str": "SELECT 1"}]')$$,
    '22023', 'broker_add_jobs: element 3: job_name must be 1 to 200 characters and not blank',
    'a blank name in element 3: 22023 naming it');
SELECT ok(pg_temp.error_context($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "ok", "execute_str": "SELECT 1"},
                   {"job_name": " ", "execute_str": "SELECT 1"}]')$$) LIKE '%broker._add_plain_jobs%',
          '... raised by the plain path');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "ok", "execute_str": "SELECT 1"},
                   {"job_name": "x", "execute_str": "SELECT 1", "max_attempts": 0}]')$$,
    '22023', 'broker_add_jobs: element 2: max_attempts must be >= 1, got 0', 'max_attempts 0: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "ok", "execute_str": "SELECT 1"},
                   {"job_name": "x", "execute_str": "SELECT 1", "timeout": "soon"}]')$$,
    '22023', 'broker_add_jobs: element 2: invalid input syntax for type interval: "soon"',
    'a value that does not convert: 22023 naming the element (general path)');
SELECT ok(pg_temp.error_context($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "ok", "execute_str": "SELECT 1"},
                   {"job_name": "x", "execute_str": "SELECT 1", "timeout": "soon"}]')$$)
          ~ '^PL/pgSQL function broker._add_jobs\(jsonb,text,text\) line [0-9]+ at RAISE',
          '... raised by the general path');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name IN ('ok', 'ok2', 'x')), 0::bigint,
          'nothing written by the failed calls');
SELECT is((SELECT count(*) FROM broker.broker_add_jobs('[]')), 0::bigint, 'an empty array: no rows');

SELECT * FROM finish();
ROLLBACK;
