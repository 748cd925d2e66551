-- broker_add_jobs rejects bad input with broker_add_job's SQLSTATEs, naming the array element, and all or nothing.
BEGIN;
SELECT plan(34);

-- a valid first element, so every error below is about element 2
CREATE FUNCTION pg_temp.second(p_job text) RETURNS text LANGUAGE sql AS
    $f$ SELECT format('SELECT * FROM broker.broker_add_jobs(%L::jsonb)',
                      '[{"job_name": "ok", "execute_str": "SELECT 1"}, ' || p_job || ']') $f$;

-- the array itself
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs(NULL)$$, '22004',
    'broker_add_jobs: p_jobs must not be NULL', 'NULL array: 22004');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('{"job_name": "x"}')$$, '22023',
    'broker_add_jobs: p_jobs must be a JSON array of job objects, got a JSON object', 'not an array: 22023');
SELECT throws_ok(pg_temp.second('"SELECT 1"'), '22023', 'broker_add_jobs: element 2 is a JSON string, not an object',
    'an element that is not an object: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "p_job_queue": 2}'), '22023',
    'broker_add_jobs: element 2: unknown key ''p_job_queue''', 'unknown key (with the p_ prefix): 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "job_queue": "2"}'), '22023',
    'broker_add_jobs: element 2: job_queue must be a JSON number or null, got a JSON string', 'wrong JSON type: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_groups": "g"}'), '22023',
    'broker_add_jobs: element 2: depends_on_groups must be a JSON array or null, got a JSON string', 'groups not an array: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "job_priority": 1.5}'), '22023',
    'broker_add_jobs: element 2: invalid input syntax for type integer: "1.5"', 'a number that is not an integer: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "run_after": "soon"}'), '22023', NULL,
    'a run_after that is not a timestamp: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "timeout": "forever"}'), '22023', NULL,
    'a timeout that is not an interval: 22023');
-- every key, given a value of a wrong JSON type, is caught (the quick pass lists each key by hand)
CREATE FUNCTION pg_temp.missed_type_checks() RETURNS text[] LANGUAGE plpgsql AS $f$
DECLARE
    v_missed text[] := '{}';
    k record;
BEGIN
    FOR k IN SELECT * FROM (VALUES ('job_name', '1'), ('execute_str', '[]'), ('job_queue', '"1"'), ('job_priority', 'true'),
                                   ('job_language', '{}'), ('run_as', '2'), ('schedule_id', '"1"'), ('depends_on_job_ids', '1'),
                                   ('idempotency_key', '3'), ('max_attempts', '"2"'), ('job_group', '[]'),
                                   ('depends_on_groups', '{}'), ('run_after', '0'), ('timeout', '1'), ('search_path', 'false'))
                         AS t(key, bad) LOOP
        BEGIN
            EXECUTE pg_temp.second(format('{"job_name": "x", "execute_str": "SELECT 1", %s: %s}', to_json(k.key), k.bad));
            v_missed := v_missed || k.key;
        EXCEPTION WHEN invalid_parameter_value THEN
            IF SQLERRM NOT LIKE format('broker_add_jobs: element 2: %s must be a JSON %%', k.key) THEN
                v_missed := v_missed || (k.key || ': ' || SQLERRM);
            END IF;
        END;
    END LOOP;
    RETURN v_missed;
END $f$;
SELECT is(pg_temp.missed_type_checks(), '{}'::text[], 'a value of the wrong JSON type is caught for each of the 15 keys');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_job_ids": [[1]]}'), '22023',
    'broker_add_jobs: element 2: depends_on_job_ids must be a flat array of job ids', 'nested job id array: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_groups": [["g"]]}'), '22023',
    'broker_add_jobs: element 2: depends_on_groups must be a flat array of group names', 'nested group array: 22023');

-- broker_add_job's argument checks, per element
SELECT throws_ok(pg_temp.second('{"execute_str": "SELECT 1"}'), '22004',
    'broker_add_jobs: element 2: job_name must not be NULL', 'missing name: 22004');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": null}'), '22004',
    'broker_add_jobs: element 2: execute_str must not be NULL', 'null SQL: 22004');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "job_queue": null}'), '22004',
    'broker_add_jobs: element 2: job_queue must not be NULL', 'an explicit null where broker_add_job needs a value: 22004');
SELECT throws_ok(pg_temp.second('{"job_name": " ", "execute_str": "SELECT 1"}'), '22023', NULL, 'blank name: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": " "}'), '22023',
    'broker_add_jobs: element 2: execute_str is empty; give the SQL the job should run', 'empty SQL: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "job_language": "python"}'), '22023', NULL,
    'unknown language: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "job_queue": 0}'), '22023',
    'broker_add_jobs: element 2: job_queue must be >= 1, got 0', 'queue 0: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "max_attempts": 0}'), '22023', NULL,
    'max_attempts 0: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "idempotency_key": ""}'), '22023', NULL,
    'blank idempotency key: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "idempotency_key": "broker_schedule:1:x"}'),
    '22023', NULL, 'an idempotency key reserved for schedules: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "timeout": "0 s"}'), '22023', NULL,
    'non-positive timeout: 22023');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_job_ids": [null]}'), '22004', NULL,
    'null dependency id: 22004');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_groups": ["a", ""]}'), '22023', NULL,
    'blank dependency group: 22023');

-- checks against the database
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "run_as": "no_such_role_xyz"}'), '42704',
    'broker_add_jobs: element 2: run_as role no_such_role_xyz does not exist', 'unknown run_as: 42704');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "schedule_id": 987654321}'), '23503',
    'broker_add_jobs: element 2: schedule 987654321 does not exist', 'unknown schedule: 23503');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_job_ids": [987654321]}'), '23503',
    'broker_add_jobs: element 2: dependency job 987654321 does not exist', 'unknown dependency job: 23503');
SELECT throws_ok(pg_temp.second('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_groups": ["x"]}'), '23514',
    'broker_add_jobs: element 2: job ''x'' cannot depend on its own group ''x''', 'own (default) group: 23514');
CREATE TEMP TABLE dead AS SELECT job_id FROM broker.broker_add_job('dead', 'SELECT 1');
SELECT broker.broker_cancel_job((SELECT job_id FROM dead));
SELECT throws_ok(pg_temp.second(format('{"job_name": "x", "execute_str": "SELECT 1", "depends_on_job_ids": [%s]}',
                                       (SELECT job_id FROM dead))), '55000', NULL, 'dependency on a cancelled job: 55000');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "p", "execute_str": "SELECT 1", "depends_on_groups": ["q"]},
                                                         {"job_name": "q", "execute_str": "SELECT 1", "depends_on_groups": ["p"]}]')$$,
    '23514', NULL, 'a cycle within the array: 23514');

-- the first bad element is reported, and nothing of a rejected call stays behind
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "a", "execute_str": "SELECT 1"},
                                                         {"job_name": "b", "execute_str": "SELECT 1", "job_queue": 0},
                                                         {"job_name": "c"}]')$$,
    '22023', 'broker_add_jobs: element 2: job_queue must be >= 1, got 0', 'the first bad element is named');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE job_name <> 'dead'), 0::bigint, 'no rejected call left a job behind');
SELECT is_empty($$SELECT * FROM broker.broker_add_jobs('[]')$$, 'an empty array adds nothing');

SELECT * FROM finish();
ROLLBACK;
