-- Queue numbers are 1 to 1000 everywhere a job or schedule names one: broker_add_job,
-- broker_add_jobs (both of its paths), the schedule functions (22023), and the tables' CHECKs
-- (23514 for raw INSERTs), so one INSERT cannot spread jobs over 20,000 queues (metric series
-- and runner memory grow with every queue number in use).
BEGIN;
SELECT plan(13);

SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', 1001)$$, '22023',
    'broker_add_job: p_job_queue must be <= 1000, got 1001', 'broker_add_job: queue 1001 is 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', 2147483647)$$, '22023', NULL,
    'broker_add_job: the largest integer queue is 22023');
SELECT ok((SELECT job_id FROM broker.broker_add_job('top', 'SELECT 1', 1000)) IS NOT NULL, 'queue 1000 is accepted');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "a", "execute_str": "SELECT 1"},
                                                          {"job_name": "b", "execute_str": "SELECT 1", "job_queue": 20000}]')$$,
    '22023', 'broker_add_jobs: element 2: job_queue must be <= 1000, got 20000', 'broker_add_jobs (plain path): 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "b", "execute_str": "SELECT 1", "job_queue": 1001,
                                                           "idempotency_key": "k"}]')$$,
    '22023', 'broker_add_jobs: element 1: job_queue must be <= 1000, got 1001', 'broker_add_jobs (full path): 22023');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
                   SELECT 'n' || i, 'n', 'SELECT 1', i FROM generate_series(1, 20000) AS i$$,
    '23514', NULL, 'a raw INSERT into 20,000 queues violates the table CHECK');
SELECT throws_ok($$UPDATE broker.broker_jobs SET job_queue = 5000 WHERE job_name = 'top'$$,
    '23514', NULL, 'so does moving a job to queue 5000');

SELECT throws_ok($$SELECT * FROM broker.broker_add_schedule('s', '* * * * *', 'SELECT 1', 'UTC', 1001)$$, '22023',
    'broker_add_schedule: p_job_queue must be <= 1000, got 1001', 'broker_add_schedule: 22023');
SELECT ok((SELECT schedule_id FROM broker.broker_add_schedule('s', '* * * * *', 'SELECT 1', 'UTC', 1000)) IS NOT NULL,
    'a schedule on queue 1000 is accepted');
SELECT throws_ok($$SELECT * FROM broker.broker_alter_schedule('s', p_job_queue => 1001)$$, '22023',
    'broker_alter_schedule: p_job_queue must be <= 1000, got 1001', 'broker_alter_schedule: 22023');
SELECT throws_ok($$INSERT INTO broker.broker_schedule (schedule_name, cron_expr, execute_str, job_queue)
                   VALUES ('raw', '* * * * *', 'SELECT 1', 1001)$$,
    '23514', NULL, 'a raw INSERT of a schedule on queue 1001 violates the table CHECK');
SELECT is((SELECT pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint
            WHERE conname = 'broker_jobs_job_queue_check'),
    'CHECK (((job_queue <@ ''[1,1001)''::int4range) OR (job_language = ''task''::text)))',
    'broker_jobs: CHECK job_queue 1..1000 (a task: its name''s negative queue, by broker_jobs_job_language_check)');
SELECT is((SELECT pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint
            WHERE conname = 'broker_schedule_job_queue_check'),
    'CHECK ((((job_queue >= 1) AND (job_queue <= 1000)) OR ((job_queue < 0) AND (job_language = ''task''::text))))',
    'broker_schedule: CHECK job_queue 1..1000 (a schedule of tasks: its name''s negative queue)');

SELECT * FROM finish();
ROLLBACK;
