-- A job's concurrency key (the key broker_set_limit limits) is stored by every enqueue path: broker_add_job
-- (each of its inserts, and the re-call for p_tenant_id), both paths of broker_add_jobs, broker_add_jobs_arrays,
-- a schedule through its tick, and a raw INSERT by an enqueuer. NULL is no key; a blank key or one over 200
-- characters is 22023, the message naming the parameter (or key) as the caller names it. (The same rules on
-- the other paths, side by side: every_path_states_a_rule_the_same_way.sql.)
BEGIN;
SELECT plan(49);
SET LOCAL TimeZone = 'UTC';

-- 'SQLSTATE: message' of a statement, or 'no error'
CREATE FUNCTION pg_temp.err(p_sql text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$f$;
-- (functions: a query of their own sees the job that its argument's call just made)
CREATE FUNCTION pg_temp.key_of(p_job_id bigint) RETURNS text LANGUAGE sql AS
$$ SELECT concurrency_key FROM broker.broker_jobs WHERE job_id = p_job_id $$;
CREATE FUNCTION pg_temp.tenant_and_key(p_job_id bigint) RETURNS text LANGUAGE sql AS
$$ SELECT tenant_id || '/' || concurrency_key FROM broker.broker_jobs WHERE job_id = p_job_id $$;
CREATE FUNCTION pg_temp.schedule_key(p_name text) RETURNS text LANGUAGE sql AS
$$ SELECT concurrency_key FROM broker.broker_schedule WHERE schedule_name = p_name $$;

---- broker_add_job ---------------------------------------------------------------
SELECT is(pg_temp.key_of((SELECT job_id FROM broker.broker_add_job('plain', 'SELECT 1', p_concurrency_key => 'crm-api'))),
          'crm-api', 'broker_add_job stores the key');
SELECT is(pg_temp.key_of((SELECT job_id FROM broker.broker_add_job('once', 'SELECT 1', p_idempotency_key => 'i-1',
                                                                   p_concurrency_key => 'crm-api'))),
          'crm-api', 'broker_add_job with an idempotency key stores it');
SELECT is(pg_temp.key_of((SELECT job_id FROM broker.broker_add_job('waits', 'SELECT 1', p_depends_on_groups => ARRAY['plain'],
                                                                   p_concurrency_key => 'crm-api'))),
          'crm-api', 'broker_add_job with dependencies stores it');
SELECT is(pg_temp.tenant_and_key((SELECT job_id FROM broker.broker_add_job('acme', 'SELECT 1', p_tenant_id => 'acme',
                                                                           p_concurrency_key => 'crm-api'))),
          'acme/crm-api', 'broker_add_job with p_tenant_id keeps the key for the tenant''s job');
SELECT is(pg_temp.key_of((SELECT job_id FROM broker.broker_add_job('no key', 'SELECT 1'))), NULL::text,
          'no key by default');
SELECT is(pg_temp.key_of((SELECT job_id FROM broker.broker_add_job('null key', 'SELECT 1', p_concurrency_key => NULL))),
          NULL::text, 'p_concurrency_key NULL: no key');
SELECT is(pg_temp.key_of((SELECT job_id FROM broker.broker_add_job_simple('simple', 'SELECT 1'))), NULL::text,
          'broker_add_job_simple: no key');
SELECT is(pg_temp.key_of((SELECT job_id FROM broker.broker_add_job('long key', 'SELECT 1',
                                                                   p_concurrency_key => repeat('k', 200)))),
          repeat('k', 200), '200 characters are allowed');
SELECT is(pg_temp.err($$SELECT broker.broker_add_job('b', 'SELECT 1', p_concurrency_key => ' ')$$),
          '22023: broker_add_job: p_concurrency_key must not be blank (NULL for none)', 'broker_add_job: a blank key is 22023');
SELECT is(pg_temp.err($$SELECT broker.broker_add_job('b', 'SELECT 1', p_concurrency_key => '')$$),
          '22023: broker_add_job: p_concurrency_key must not be blank (NULL for none)', 'broker_add_job: an empty key is 22023');
SELECT is(pg_temp.err($$SELECT broker.broker_add_job('b', 'SELECT 1', p_concurrency_key => repeat('k', 201))$$),
          '22023: broker_add_job: p_concurrency_key must be at most 200 characters, got 201',
          'broker_add_job: a key over 200 characters is 22023');
SELECT is(pg_temp.err($$SELECT broker.broker_add_job('b', 'SELECT 1', p_tenant_id => 'acme', p_concurrency_key => ' ')$$),
          '22023: broker_add_job: p_concurrency_key must not be blank (NULL for none)',
          'broker_add_job with p_tenant_id checks the key too');

---- broker_add_jobs ---------------------------------------------------------------
-- no element with a key of the general path: the plain path
CREATE TEMP TABLE bulk_plain AS SELECT * FROM broker.broker_add_jobs('[
    {"job_name": "p1", "execute_str": "SELECT 1", "concurrency_key": "crm-api"},
    {"job_name": "p2", "execute_str": "SELECT 1"},
    {"job_name": "p3", "execute_str": "SELECT 1", "concurrency_key": null}]');
SELECT is(ARRAY(SELECT pg_temp.key_of(job_id) FROM bulk_plain ORDER BY ord), ARRAY['crm-api', NULL, NULL],
          'broker_add_jobs (plain path): the key of each element; missing or null is none');
-- an idempotency key and dependencies: the general path
CREATE TEMP TABLE bulk_general AS SELECT * FROM broker.broker_add_jobs('[
    {"job_name": "g1", "execute_str": "SELECT 1", "concurrency_key": "crm-api", "idempotency_key": "i-2"},
    {"job_name": "g2", "execute_str": "SELECT 1", "concurrency_key": "mail", "depends_on_groups": ["g1"]},
    {"job_name": "g3", "execute_str": "SELECT 1"}]');
SELECT is(ARRAY(SELECT pg_temp.key_of(job_id) FROM bulk_general ORDER BY ord), ARRAY['crm-api', 'mail', NULL],
          'broker_add_jobs (general path): the key of each element');
CREATE TEMP TABLE bulk_acme AS SELECT * FROM broker.broker_add_jobs(
    '[{"job_name": "t1", "execute_str": "SELECT 1", "concurrency_key": "crm-api"}]', p_tenant_id => 'acme');
SELECT is((SELECT pg_temp.tenant_and_key(job_id) FROM bulk_acme),
          'acme/crm-api', 'broker_add_jobs with p_tenant_id keeps the key');
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "j", "execute_str": "SELECT 1", "concurrency_key": 7}]')$$),
          '22023: broker_add_jobs: element 1: concurrency_key must be a JSON string or null, got a JSON number',
          'broker_add_jobs: a key that is not a JSON string is 22023');
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "j", "execute_str": "SELECT 1", "concurrency_key": " "}]')$$),
          '22023: broker_add_jobs: element 1: concurrency_key must not be blank (NULL for none)',
          'broker_add_jobs: a blank key is 22023, naming the element');
SELECT is(pg_temp.err(format($$SELECT * FROM broker.broker_add_jobs(%L)$$,
              jsonb_build_array(jsonb_build_object('job_name', 'ok', 'execute_str', 'SELECT 1', 'idempotency_key', 'i-3'),
                                jsonb_build_object('job_name', 'j', 'execute_str', 'SELECT 1', 'concurrency_key', repeat('k', 201))))),
          '22023: broker_add_jobs: element 2: concurrency_key must be at most 200 characters, got 201',
          'broker_add_jobs (general path): a key over 200 characters is 22023');

---- broker_add_jobs_arrays --------------------------------------------------------
CREATE TEMP TABLE arrays AS SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a1', 'a2', 'a3'],
    ARRAY['SELECT 1', 'SELECT 1', 'SELECT 1'], p_concurrency_keys => ARRAY['crm-api', NULL, 'mail']);
SELECT is(ARRAY(SELECT pg_temp.key_of(job_id) FROM arrays ORDER BY ord), ARRAY['crm-api', NULL, 'mail'],
          'broker_add_jobs_arrays: job k has the k-th key; a NULL element is none');
SELECT is((SELECT pg_temp.key_of(job_id) FROM broker.broker_add_jobs_arrays(ARRAY['a4'], ARRAY['SELECT 1'])), NULL::text,
          'broker_add_jobs_arrays without p_concurrency_keys: no key');
SELECT is((SELECT pg_temp.tenant_and_key(a.job_id)
             FROM broker.broker_add_jobs_arrays(ARRAY['a5'], ARRAY['SELECT 1'], p_tenant_id => 'acme',
                                                p_concurrency_keys => ARRAY['crm-api']) AS a),
          'acme/crm-api', 'broker_add_jobs_arrays with p_tenant_id keeps the keys');
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b'], ARRAY['SELECT 1', 'SELECT 1'],
                                                                    p_concurrency_keys => ARRAY['k'])$$),
          '22023: broker_add_jobs_arrays: p_concurrency_keys must be a flat array of 2 elements, one per job name (NULL: the default for every job), got 1',
          'broker_add_jobs_arrays: p_concurrency_keys shorter than the names is 22023');
SELECT is(split_part(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b'], ARRAY['SELECT 1', 'SELECT 1'],
                                                                               p_concurrency_keys => ARRAY[['k'], ['k']])$$), ':', 1),
          '22023', 'broker_add_jobs_arrays: p_concurrency_keys in two dimensions is 22023');
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b'], ARRAY['SELECT 1', 'SELECT 1'],
                                                                    p_concurrency_keys => ARRAY['k', ' '])$$),
          '22023: broker_add_jobs_arrays: element 2: concurrency_key must not be blank (NULL for none)',
          'broker_add_jobs_arrays: a blank key is 22023, naming the element');
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['a', 'b'], ARRAY['SELECT 1', 'SELECT 1'],
                                                                    p_concurrency_keys => ARRAY['k', repeat('k', 201)])$$),
          '22023: broker_add_jobs_arrays: element 2: concurrency_key must be at most 200 characters, got 201',
          'broker_add_jobs_arrays: a key over 200 characters is 22023');
-- (a text that may never run in a transaction takes the checks that come before the INSERT)
SELECT is(pg_temp.err($$SELECT * FROM broker.broker_add_jobs_arrays(ARRAY['v', 'b'], ARRAY['VACUUM', 'SELECT 1'],
                                                                    p_concurrency_keys => ARRAY['k', ''])$$),
          '22023: broker_add_jobs_arrays: element 2: concurrency_key must not be blank (NULL for none)',
          'broker_add_jobs_arrays: the key''s rule comes before the refusal of VACUUM, as the other fields'' do');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name IN ('a', 'b', 'j', 'v', 'ok')), 0::bigint,
          'nothing was written by the refused calls');

---- schedules and their tick ------------------------------------------------------
CREATE ROLE broker_test_keys NOLOGIN IN ROLE broker_enqueue;
SET LOCAL ROLE broker_test_keys;
SELECT broker.broker_add_schedule('keyed', '* * * * *', 'SELECT 1', p_overlap => 'allow', p_concurrency_key => 'crm-api');
SELECT broker.broker_add_schedule('unkeyed', '* * * * *', 'SELECT 1', p_overlap => 'allow');
RESET ROLE;
SELECT is(pg_temp.schedule_key('keyed'), 'crm-api', 'broker_add_schedule stores the key');
SELECT is(pg_temp.schedule_key('unkeyed'), NULL::text, 'broker_add_schedule: no key by default');
SELECT broker.broker_add_schedule('acme keyed', '0 3 * * *', 'SELECT 1', p_enabled => false, p_tenant_id => 'acme',
                                  p_concurrency_key => 'crm-api');
SELECT is((SELECT tenant_id || '/' || concurrency_key FROM broker.broker_schedule WHERE schedule_name = 'acme keyed'),
          'acme/crm-api', 'broker_add_schedule with p_tenant_id keeps the key for the tenant''s schedule');
UPDATE broker.broker_schedule SET next_fire_at = '2027-06-15 10:00:00+00' WHERE schedule_name IN ('keyed', 'unkeyed');
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at('2027-06-15 10:00:30+00')), 2, 'the tick enqueues a job for each');
SELECT is(ARRAY(SELECT j.concurrency_key FROM broker.broker_jobs AS j
                  JOIN broker.broker_schedule AS s ON s.schedule_id = j.schedule_id
                 WHERE s.schedule_name = 'keyed'), ARRAY['crm-api'], 'the tick gives a schedule''s job its key');
SELECT is(ARRAY(SELECT j.concurrency_key FROM broker.broker_jobs AS j
                  JOIN broker.broker_schedule AS s ON s.schedule_id = j.schedule_id
                 WHERE s.schedule_name = 'unkeyed'), ARRAY[NULL::text], 'and none to the job of a schedule without one');

SET LOCAL ROLE broker_test_keys;
SELECT broker.broker_alter_schedule('keyed', p_job_priority => 2);
SELECT is(pg_temp.schedule_key('keyed'), 'crm-api', 'broker_alter_schedule: NULL leaves the key as it is');
SELECT broker.broker_alter_schedule('unkeyed', p_concurrency_key => 'mail');
SELECT is(pg_temp.schedule_key('unkeyed'), 'mail', 'broker_alter_schedule sets a key');
SELECT is(pg_temp.err($$SELECT broker.broker_alter_schedule('keyed', p_concurrency_key => ' ')$$),
          '22023: broker_alter_schedule: p_concurrency_key must not be blank (NULL for none)',
          'broker_alter_schedule: a blank key is 22023 (only '''' clears it)');
SELECT is(pg_temp.err($$SELECT broker.broker_alter_schedule('keyed', p_concurrency_key => repeat('k', 201))$$),
          '22023: broker_alter_schedule: p_concurrency_key must be at most 200 characters, got 201',
          'broker_alter_schedule: a key over 200 characters is 22023');
SELECT broker.broker_alter_schedule('keyed', p_concurrency_key => '');
SELECT is(pg_temp.schedule_key('keyed'), NULL::text, 'broker_alter_schedule: p_concurrency_key '''' clears the key');
SELECT is(pg_temp.err($$SELECT broker.broker_add_schedule('blank', '* * * * *', 'SELECT 1', p_concurrency_key => '')$$),
          '22023: broker_add_schedule: p_concurrency_key must not be blank (NULL for none)',
          'broker_add_schedule: an empty key is 22023 (NULL for none)');
RESET ROLE;
UPDATE broker.broker_schedule SET next_fire_at = '2027-06-15 10:01:00+00' WHERE schedule_name IN ('keyed', 'unkeyed');
SELECT is((SELECT jobs_enqueued FROM broker._schedule_tick_at('2027-06-15 10:01:30+00')), 2, 'the next tick enqueues a job for each');
SELECT is(ARRAY(SELECT j.concurrency_key FROM broker.broker_jobs AS j
                  JOIN broker.broker_schedule AS s ON s.schedule_id = j.schedule_id
                 WHERE s.schedule_name = 'keyed' ORDER BY j.job_id), ARRAY['crm-api', NULL],
          'a cleared key: the next job has none, the earlier one keeps its own');
SELECT is(ARRAY(SELECT j.concurrency_key FROM broker.broker_jobs AS j
                  JOIN broker.broker_schedule AS s ON s.schedule_id = j.schedule_id
                 WHERE s.schedule_name = 'unkeyed' ORDER BY j.job_id), ARRAY[NULL, 'mail'],
          'a key set later: the next job has it');

---- raw writes by an enqueuer (column grants; the table's CHECK) -------------------
SET LOCAL ROLE broker_test_keys;
SELECT lives_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, concurrency_key)
                  VALUES ('raw', 'raw', 'SELECT 1', 'crm-api')$$, 'an enqueuer may INSERT a job with a key');
SELECT is(split_part(pg_temp.err($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, concurrency_key)
                                   VALUES ('raw blank', 'raw', 'SELECT 1', ' ')$$), ':', 1),
          '23514', 'a raw INSERT of a blank key breaks the table''s CHECK');
SELECT is(split_part(pg_temp.err($$UPDATE broker.broker_jobs SET concurrency_key = 'other' WHERE job_name = 'raw'$$), ':', 1),
          '42501', 'an enqueuer may not change the key of a job');
SELECT lives_ok($$UPDATE broker.broker_schedule SET concurrency_key = 'raw-key' WHERE schedule_name = 'keyed'$$,
                'an enqueuer may UPDATE the key of its schedule');
SELECT lives_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, concurrency_key)
                  VALUES ('raw schedule', '0 3 * * *', 'SELECT 1', 'crm-api')$$,
                'an enqueuer may INSERT a schedule with a key');
RESET ROLE;
SELECT is(ARRAY[(SELECT concurrency_key FROM broker.broker_jobs WHERE job_name = 'raw'), pg_temp.schedule_key('keyed'),
                pg_temp.schedule_key('raw schedule')],
          ARRAY['crm-api', 'raw-key', 'crm-api'], 'the raw writes stored their keys');
SELECT is(split_part(pg_temp.err($$UPDATE broker.broker_schedule SET concurrency_key = repeat('k', 201) WHERE schedule_name = 'keyed'$$), ':', 1),
          '23514', 'a schedule''s key over 200 characters breaks the table''s CHECK');

SELECT * FROM finish();
ROLLBACK;
