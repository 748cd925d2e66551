-- broker_add_jobs_arrays: plain jobs from one array per field, with broker_add_jobs' rules, messages (the element
-- named), defaults, tenancy and row-level security, in array order, all or nothing.
BEGIN;
SELECT plan(32);

CREATE FUNCTION pg_temp.err(p_sql text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$f$;

-- rows in array order, increasing ids, broker_add_job's defaults for the arrays left out
SET LOCAL search_path = public, pg_temp;
CREATE TEMP TABLE r1 AS SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b', 'c'], ARRAY['SELECT 1', 'SELECT 2', 'SELECT 3']);
RESET search_path;
SELECT is((SELECT array_agg(ord ORDER BY ord) FROM r1), ARRAY[1, 2, 3], 'one row per element, ord 1..3');
SELECT ok((SELECT bool_and(is_new) FROM r1), 'every job is new');
SELECT is((SELECT array_agg(j.job_name ORDER BY r1.ord) FROM r1 JOIN broker.broker_jobs AS j USING (job_id)),
          ARRAY['a', 'b', 'c'], 'job k is element k');
SELECT ok((SELECT bool_and(x.job_id > x.prev) FROM (SELECT job_id, lag(job_id, 1, 0::bigint) OVER (ORDER BY ord) AS prev FROM r1) AS x),
          'ids increase in array order');
SELECT is((SELECT DISTINCT ROW(j.job_queue, j.job_priority, j.max_attempts, j.job_language, j.job_timeout IS NULL,
                               j.run_as = CURRENT_USER, j.enqueued_by = CURRENT_USER, j.tenant_id, j.complete_status)::text
             FROM r1 JOIN broker.broker_jobs AS j USING (job_id)),
          ROW(1, 0, 1, 'sql', true, true, true, 'default', 0)::text, 'the defaults of broker_add_job');
SELECT is((SELECT array_agg(j.job_group ORDER BY r1.ord) FROM r1 JOIN broker.broker_jobs AS j USING (job_id)),
          ARRAY['a', 'b', 'c'], 'the group defaults to the name');
SELECT is((SELECT DISTINCT j.job_search_path FROM r1 JOIN broker.broker_jobs AS j USING (job_id)), 'public, pg_temp',
          'the search path defaults to the caller''s');

-- every field given
CREATE TEMP TABLE r2 AS SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['x', 'y'], ARRAY['SELECT 1', 'PERFORM 1'],
    p_job_queues => ARRAY[3, 4], p_job_priorities => ARRAY[5, -1], p_job_groups => ARRAY['gx', NULL],
    p_max_attempts => ARRAY[2, 3], p_run_afters => ARRAY['2030-01-01 00:00+00', NULL]::timestamptz[],
    p_timeouts => ARRAY['1 minute', NULL]::interval[], p_job_languages => ARRAY['SQL', ' plpgsql'], p_search_path => 'app');
SELECT is((SELECT array_agg(ROW(j.job_queue, j.job_priority, j.job_group, j.max_attempts, j.run_after = '2030-01-01 00:00+00',
                                j.job_timeout, j.job_language, j.job_search_path)::text ORDER BY r2.ord)
             FROM r2 JOIN broker.broker_jobs AS j USING (job_id)),
          ARRAY[ROW(3, 5, 'gx', 2, true, '00:01:00'::interval, 'sql', 'app')::text,
                ROW(4, -1, 'y', 3, false, NULL::interval, 'plpgsql', 'app')::text],
          'each array gives its field; a NULL group is the name, a NULL run_after now, languages normalised');
SELECT is((SELECT count(*) FROM broker.broker_add_jobs_arrays('{}', '{}')), 0::bigint, 'empty arrays: no rows');

-- the rules of broker._job_problem, stated as broker_add_jobs states them (the second element breaks the rule)
CREATE TEMP TABLE rule_case (args text, field text, state text, says text);
INSERT INTO rule_case VALUES
    ($$ARRAY['ok', ' '], ARRAY['SELECT 1', 'SELECT 1']$$, 'job_name', '22023', 'must be 1 to 200 characters and not blank'),
    ($$ARRAY['ok', NULL], ARRAY['SELECT 1', 'SELECT 1']$$, 'job_name', '22004', 'must not be NULL'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', '  ']$$, 'execute_str', '22023', 'is empty; give the SQL the job should run'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', NULL]$$, 'execute_str', '22004', 'must not be NULL'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', 'SELECT 1'], p_job_languages => ARRAY['sql', 'perl']$$, 'job_language', '22023',
     'must be sql or plpgsql, got ''perl'''),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', 'SELECT 1'], p_job_queues => ARRAY[1, 0]$$, 'job_queue', '22023', 'must be >= 1, got 0'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', 'SELECT 1'], p_job_queues => ARRAY[1, 1001]$$, 'job_queue', '22023',
     'must be <= 1000, got 1001'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', 'SELECT 1'], p_job_priorities => ARRAY[1, NULL]$$, 'job_priority', '22004',
     'must not be NULL'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', 'SELECT 1'], p_max_attempts => ARRAY[1, 0]$$, 'max_attempts', '22023',
     'must be >= 1, got 0'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', 'SELECT 1'], p_job_groups => ARRAY['g', '']$$, 'job_group', '22023',
     'must be 1 to 200 characters and not blank'),
    ($$ARRAY['ok', 'j'], ARRAY['SELECT 1', 'SELECT 1'], p_timeouts => ARRAY['1 s', '0 s']::interval[]$$, 'timeout', '22023',
     'must be positive, got 00:00:00');
SELECT is(pg_temp.err(format('SELECT * FROM broker.broker_add_jobs_arrays(%s)', c.args)),
          format('%s: broker_add_jobs_arrays: element 2: %s %s', c.state, c.field, c.says),
          'broker_add_jobs_arrays: ' || c.field || ' ' || c.says)
  FROM rule_case AS c;

-- the arrays themselves
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs_arrays(NULL, ARRAY['SELECT 1'])$$, '22004',
    'broker_add_jobs_arrays: p_job_names must not be NULL', 'NULL names: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b'], ARRAY['SELECT 1'])$$, '22023',
    'broker_add_jobs_arrays: p_execute_strs must be a flat array of 2 elements, one per job name (NULL: the default for every job), got 1',
    'an array shorter than the names: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY[['a'], ['b']], ARRAY['SELECT 1', 'SELECT 1'])$$, '22023', NULL,
    'names in two dimensions: 22023');
-- a text that can never run in a transaction, as broker_add_jobs refuses it
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['ok', 'v'], ARRAY['SELECT 1', 'VACUUM ANALYZE'])$$),
          '0A000: broker_add_jobs_arrays: element 2: VACUUM cannot run inside a transaction, and a job runs inside one',
          'VACUUM: 0A000, naming the element');
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['v', 'x'], ARRAY['VACUUM', 'SELECT 1'], ARRAY[1, 0])$$),
          '22023: broker_add_jobs_arrays: element 2: job_queue must be >= 1, got 0',
          'the fields'' rules come first, as in broker_add_jobs');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name IN ('ok', 'j', 'v')), 0::bigint, 'nothing was written');

-- a tenant named in the call, for the call only
CREATE TEMP TABLE r3 AS SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['t1', 't2'], ARRAY['SELECT 1', 'SELECT 1'],
                                                                    p_tenant_id => 'acme');
SELECT is((SELECT array_agg(j.tenant_id ORDER BY r3.ord) FROM r3 JOIN broker.broker_jobs AS j USING (job_id)),
          ARRAY['acme', 'acme'], 'p_tenant_id: the jobs are the tenant''s');
SELECT is(broker.broker_current_tenant(), 'default', 'and the transaction''s tenant is as it was');

-- as a broker_enqueue member: row-level security as the caller, strict tenancy
CREATE ROLE broker_test_arrays NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_arrays;
SELECT lives_ok($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['mine'], ARRAY['SELECT 1'])$$,
    'broker_enqueue members may call it');
RESET ROLE;
SELECT is((SELECT run_as::text || '/' || enqueued_by::text FROM broker.broker_jobs WHERE job_name = 'mine'),
          'broker_test_arrays/broker_test_arrays', 'run_as and enqueued_by are the caller');
SELECT broker.broker_set_strict_tenancy(true);
SET LOCAL ROLE broker_test_arrays;
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['x'], ARRAY['SELECT 1'])$$),
          '42501: broker_add_jobs_arrays: role broker_test_arrays may not act for tenant ''default''',
          'strict tenancy: a role not mapped to the tenant may not enqueue: 42501');
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['x'], ARRAY['SELECT 1'], ARRAY[0])$$),
          '22023: broker_add_jobs_arrays: element 1: job_queue must be >= 1, got 0',
          'the fields'' rules before tenancy, as in broker_add_jobs');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
