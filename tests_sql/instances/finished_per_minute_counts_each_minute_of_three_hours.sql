-- broker_finished_per_minute: jobs finished per minute, queue, tenant and state over a window of up to three hours,
-- every tenant's, from the counters (deltas merged or not): the same numbers as counting broker_jobs itself. Minutes
-- are handed to the jobs (finished_at set), not waited for.
BEGIN;
SELECT plan(6);

INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue)
SELECT CASE WHEN g % 2 = 0 THEN 'acme' ELSE 'globex' END, 'j', 'j', 'SELECT 1', 1 + g % 2
  FROM generate_series(1, 300) AS g;
UPDATE broker.broker_jobs
   SET complete_status = 2 + (job_id % 3)::smallint,
       -- 20 minutes 7 minutes apart (30 s after a minute's start), and one past three hours: none near the edge
       -- of a window (3 hours, 10 minutes), however the clock moves between the statements below
       finished_at = date_bin('1 minute', now(), '2000-01-01 00:00:00+00') + interval '30 seconds'
                     - CASE WHEN job_id % 21 = 20 THEN interval '190 minutes' ELSE (job_id % 21) * interval '7 minutes' END;
CREATE TEMP TABLE expected AS
SELECT date_bin('1 minute', finished_at, '2000-01-01 00:00:00+00') AS finished_minute, job_queue, tenant_id, complete_status,
       count(*) AS jobs
  FROM broker.broker_jobs
 WHERE finished_at >= date_bin('1 minute', statement_timestamp() - interval '3 hours', '2000-01-01 00:00:00+00')
 GROUP BY 1, 2, 3, 4;

SELECT set_eq('SELECT * FROM broker.broker_finished_per_minute()', 'SELECT * FROM expected',
              'three hours of minutes, per queue, tenant and state, from the counters (deltas)');
SELECT ok(broker._merge_finished_counts() > 0, 'the deltas merged');
SELECT set_eq('SELECT * FROM broker.broker_finished_per_minute()', 'SELECT * FROM expected', 'the same once merged');
SELECT is((SELECT sum(jobs)::bigint FROM broker.broker_finished_per_minute('10 minutes')),
          (SELECT count(*) FROM broker.broker_jobs
            WHERE finished_at >= date_bin('1 minute', statement_timestamp() - interval '10 minutes', '2000-01-01 00:00:00+00')),
          'a shorter window, the jobs of its minutes');
SELECT throws_ok($$SELECT * FROM broker.broker_finished_per_minute('4 hours')$$, '22023', NULL, 'more than three hours: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_finished_per_minute(NULL)$$, '22023', NULL, 'NULL: 22023');

SELECT * FROM finish();
ROLLBACK;
