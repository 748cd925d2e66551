-- broker_jobs' CHECKs on language, queue, a task's arguments, status and parked state, written
-- with as few operators as say the same (each is prepared again at every statement that writes a
-- row): every combination a raw write can make is refused or taken exactly as by the earlier
-- forms (two bounds each; a separate CHECK for a task's arguments, which CASE keeps off other jobs).
BEGIN;
SELECT plan(17);

SELECT broker.broker_add_task('render', '{"page": 1}');
SELECT job_queue AS q FROM broker.broker_task_queue WHERE task_name = 'render' \gset

CREATE FUNCTION pg_temp.ins(p_language text, p_queue integer, p_execute_str text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_language, job_queue)
    VALUES ('render', 'render', p_execute_str, p_language, p_queue)
$$;

SELECT lives_ok($$SELECT pg_temp.ins('sql', 1, 'SELECT 1')$$, 'sql in queue 1');
SELECT lives_ok($$SELECT pg_temp.ins('plpgsql', 1000, 'PERFORM 1')$$, 'plpgsql in queue 1000');
SELECT throws_ok($$SELECT pg_temp.ins('sql', 0, 'SELECT 1')$$, '23514', NULL, 'sql in queue 0');
SELECT throws_ok($$SELECT pg_temp.ins('sql', 1001, 'SELECT 1')$$, '23514', NULL, 'sql in queue 1001');
SELECT throws_ok(format($$SELECT pg_temp.ins('sql', %s, 'SELECT 1')$$, :q), '23514', NULL, 'sql in a task''s (negative) queue');
SELECT throws_ok($$SELECT pg_temp.ins('python', 1, 'SELECT 1')$$, '23514', NULL, 'an unknown language');
SELECT throws_ok($$SELECT pg_temp.ins('SQL', 1, 'SELECT 1')$$, '23514', NULL, 'the language as written, not folded');
SELECT lives_ok(format($$SELECT pg_temp.ins('task', %s, '[1, "two"]')$$, :q), 'a task with JSON arguments in its negative queue');
SELECT throws_ok($$SELECT pg_temp.ins('task', 1, '{}')$$, '23514', NULL, 'a task in a runner''s queue');
SELECT throws_ok($$SELECT pg_temp.ins('task', 1, 'not json')$$, '23514', NULL,
    'a task in a runner''s queue with arguments that are not JSON: the queue is refused, the text never cast');
SELECT throws_ok(format($$SELECT pg_temp.ins('task', %s, 'not json')$$, :q), '22P02', NULL, 'a task whose arguments are not JSON');
SELECT lives_ok($$SELECT pg_temp.ins('sql', 2, 'SELECT ''{''')$$, 'a job''s SQL is never read as JSON');

INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) VALUES ('s', 's', 'SELECT 1');
SELECT lives_ok($$UPDATE broker.broker_jobs SET parked = 3 WHERE job_name = 's'$$, 'parked 3');
SELECT throws_ok($$UPDATE broker.broker_jobs SET parked = 4 WHERE job_name = 's'$$, '23514', NULL, 'parked 4');
SELECT throws_ok($$UPDATE broker.broker_jobs SET parked = -1 WHERE job_name = 's'$$, '23514', NULL, 'parked -1');
SELECT throws_ok($$UPDATE broker.broker_jobs SET complete_status = 5 WHERE job_name = 's'$$, '23514', NULL, 'status 5');
SELECT lives_ok($$UPDATE broker.broker_jobs SET complete_status = 4, parked = 0 WHERE job_name = 's'$$, 'status 4 (cancelled)');

SELECT * FROM finish();
ROLLBACK;
