-- broker_add_jobs: defaults, input order, idempotency, dependencies, search_path, run_as, as broker_add_job does them
-- (its NOTIFY: tests_py/test_notify.py).
BEGIN;
SELECT plan(25);
\ir ../lib/run_next.psql

-- defaults: broker_add_job's, and the caller's search_path
SET LOCAL search_path = app_schema, public;
CREATE TEMP TABLE r1 AS SELECT * FROM broker.broker_add_jobs('[
    {"job_name": "plain", "execute_str": "SELECT 1"},
    {"job_name": "full", "execute_str": "PERFORM 1", "job_queue": 3, "job_priority": 7, "job_language": " PLpgSQL ",
     "max_attempts": 4, "job_group": "grp", "run_after": "2999-01-01T00:00:00Z", "timeout": "90 s",
     "search_path": "other", "idempotency_key": "k-full"},
    {"job_name": "no path", "execute_str": "SELECT 1", "search_path": null}]');
RESET search_path;
SELECT is(ARRAY(SELECT ord FROM r1 ORDER BY ord), ARRAY[1, 2, 3], 'one row per element, ord 1..n');
SELECT ok((SELECT bool_and(is_new) FROM r1), 'all new');
SELECT is(ARRAY(SELECT j.job_name FROM r1 JOIN broker.broker_jobs AS j USING (job_id) ORDER BY r1.ord),
          ARRAY['plain', 'full', 'no path'], 'each ord maps to its own element''s job');
SELECT is((SELECT ROW(job_queue, job_priority, job_language, max_attempts, job_group, job_timeout, run_as::text, schedule_id,
                      idempotency_key)::text
             FROM broker.broker_jobs WHERE job_name = 'plain'),
          ROW(1, 0, 'sql', 1, 'plain', NULL::interval, current_user::text, NULL::bigint, NULL::text)::text,
          'missing keys take broker_add_job''s defaults (group = name, run_as = caller)');
SELECT is((SELECT job_search_path FROM broker.broker_jobs WHERE job_name = 'plain'), 'app_schema, public',
          'search_path defaults to the caller''s');
SELECT is((SELECT ROW(job_queue, job_priority, job_language, max_attempts, job_group, job_timeout, job_search_path,
                      run_after)::text
             FROM broker.broker_jobs WHERE job_name = 'full'),
          ROW(3, 7, 'plpgsql', 4, 'grp', interval '90 s', 'other', timestamptz '2999-01-01T00:00:00Z')::text,
          'every key is taken (language normalised like broker_add_job)');
SELECT is((SELECT job_search_path FROM broker.broker_jobs WHERE job_name = 'no path'), '',
          'an explicit null search_path is empty, as in broker_add_job');
SELECT ok((SELECT min(job_id) < max(job_id) FROM r1), 'ids increase with the order');

-- many jobs: order kept
CREATE TEMP TABLE r2 AS SELECT * FROM broker.broker_add_jobs(
    (SELECT jsonb_agg(jsonb_build_object('job_name', 'bulk ' || i, 'execute_str', 'SELECT ' || i, 'job_queue', 5) ORDER BY i)
       FROM generate_series(1, 500) AS i));
SELECT is((SELECT count(*) FROM r2 JOIN broker.broker_jobs AS j USING (job_id) WHERE j.job_name = 'bulk ' || r2.ord), 500::bigint,
          '500 elements, each ord with its own job');

-- idempotency: existing unfinished key, and a key repeated within the array
CREATE TEMP TABLE r3 AS SELECT * FROM broker.broker_add_jobs('[
    {"job_name": "again", "execute_str": "SELECT 2", "idempotency_key": "k-full"},
    {"job_name": "k1 first", "execute_str": "SELECT 1", "idempotency_key": "k1"},
    {"job_name": "between", "execute_str": "SELECT 1"},
    {"job_name": "k1 second", "execute_str": "SELECT 1", "idempotency_key": "k1"}]');
SELECT is((SELECT ROW(job_id, is_new)::text FROM r3 WHERE ord = 1),
          ROW((SELECT job_id FROM r1 WHERE ord = 2), false)::text, 'an unfinished job with the key is returned');
SELECT is((SELECT ROW(job_id, is_new)::text FROM r3 WHERE ord = 4),
          ROW((SELECT job_id FROM r3 WHERE ord = 2), false)::text, 'a key repeated in the array returns its first element''s job');
SELECT ok((SELECT is_new FROM r3 WHERE ord = 2) AND (SELECT is_new FROM r3 WHERE ord = 3), 'the others are new');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE idempotency_key = 'k1'), 1::bigint, 'one job for the key');

-- dependencies: on groups (members of the same array count), on ids; counters as broker_add_job keeps them
CREATE TEMP TABLE r4 AS SELECT * FROM broker.broker_add_jobs('[
    {"job_name": "load", "execute_str": "SELECT 1", "job_queue": 6, "depends_on_groups": ["extract", "transform"]},
    {"job_name": "e1", "execute_str": "SELECT 1", "job_queue": 6, "job_group": "extract"},
    {"job_name": "e2", "execute_str": "SELECT 1", "job_queue": 6, "job_group": "extract"},
    {"job_name": "transform", "execute_str": "SELECT 1", "job_queue": 6, "depends_on_groups": ["extract", "extract"]}]');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'transform'), 2, 'transform waits on both extracts');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'load'), 3,
          'load waits on the extracts and transform, whatever the order in the array');
SELECT is((SELECT count(*) FROM broker.broker_job_dependency WHERE job_id = (SELECT job_id FROM r4 WHERE ord = 4)), 1::bigint,
          'a repeated group makes one edge');
CREATE TEMP TABLE r5 AS SELECT * FROM broker.broker_add_jobs(format('[{"job_name": "after e1", "execute_str": "SELECT 1",
    "job_queue": 6, "depends_on_job_ids": [%s, %s]}]', (SELECT job_id FROM r4 WHERE ord = 2), (SELECT job_id FROM r4 WHERE ord = 2))::jsonb);
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM r5)), 1, 'an id dependency (repeated once)');
SELECT is(ARRAY[pg_temp.run_next(6), pg_temp.run_next(6), pg_temp.run_next(6), pg_temp.run_next(6), pg_temp.run_next(6),
                pg_temp.run_next(6)],
          ARRAY['e1', 'e2', 'transform', 'load', 'after e1', NULL], 'they run in dependency order');
-- a later member joins a group an earlier bulk dependent waits on
CREATE TEMP TABLE r6 AS SELECT * FROM broker.broker_add_jobs('[{"job_name": "final", "execute_str": "SELECT 1", "job_queue": 7,
                                                               "depends_on_groups": ["late"]}]');
SELECT broker.broker_add_jobs('[{"job_name": "late 1", "execute_str": "SELECT 1", "job_queue": 7, "job_group": "late"},
                                {"job_name": "late 2", "execute_str": "SELECT 1", "job_queue": 7, "job_group": "late"}]');
SELECT is((SELECT pending_deps FROM broker.broker_jobs WHERE job_name = 'final'), 2, 'members added later are waited for');
-- a cycle through existing jobs
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "late 3", "execute_str": "SELECT 1", "job_group": "late",
                                                          "depends_on_groups": ["final"]}]')$$,
    '23514', NULL, 'a cycle through an existing job: 23514');

-- run_as: a role the caller is a member of; executors are created as broker_add_job does
CREATE ROLE broker_test_bulk NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_other NOLOGIN;
SET LOCAL ROLE broker_test_bulk;
SELECT lives_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "mine", "execute_str": "SELECT 1"}]')$$,
    'broker_enqueue members may call it');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "x", "execute_str": "SELECT 1"},
                                                         {"job_name": "y", "execute_str": "SELECT 1", "run_as": "broker_test_other"}]')$$,
    '42501', NULL, 'run_as a role the caller is not a member of: 42501');
-- tenants: keys and groups are per tenant, rows take the caller's tenant
SELECT broker.broker_set_tenant('tenant_bulk');
CREATE TEMP TABLE r7 AS SELECT * FROM broker.broker_add_jobs('[{"job_name": "t", "execute_str": "SELECT 1",
                                                               "idempotency_key": "k1", "depends_on_groups": ["late"]}]');
SELECT is((SELECT ROW(r7.is_new, j.tenant_id, j.pending_deps)::text FROM r7 JOIN broker.broker_jobs AS j USING (job_id)),
          ROW(true, 'tenant_bulk', 0)::text, 'another tenant: the key is free and the default tenant''s group does not block');
SELECT broker.broker_set_tenant('default');
RESET ROLE;
SELECT is((SELECT run_as::text || '/' || enqueued_by::text FROM broker.broker_jobs WHERE job_name = 'mine'),
          'broker_test_bulk/broker_test_bulk', 'run_as and enqueued_by are the caller');
SELECT broker.broker_set_strict_tenancy(true);
SET LOCAL ROLE broker_test_bulk;
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "x", "execute_str": "SELECT 1"}]')$$, '42501', NULL,
    'strict tenancy: a role not mapped to the tenant may not enqueue: 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
