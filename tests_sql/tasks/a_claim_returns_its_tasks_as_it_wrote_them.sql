-- broker_claim_tasks returns each task it claimed as the claim left it in the table (attempt,
-- lease, arguments, timeout), name by name, each name's tasks in claim order (priority, then
-- age), without reading them again.
BEGIN;
SELECT plan(5);

SELECT broker.broker_add_task('ra', jsonb_build_object('n', g), p_priority => g % 2) FROM generate_series(1, 3) AS g;
SELECT broker.broker_add_task('rb', jsonb_build_object('n', 10 + g), p_timeout => interval '5 minutes', p_max_attempts => 2)
  FROM generate_series(1, 3) AS g;
CREATE TEMP TABLE got AS SELECT row_number() OVER () AS o, c.* FROM broker.broker_claim_tasks(ARRAY['ra', 'rb'], 5, 30) AS c;

SELECT is((SELECT count(*) FROM got), 5::bigint, 'five of the six claimed');
SELECT is_empty($$SELECT job_id, task, args, tenant_id, attempt, max_attempts, lease_token, lease_expires_at, timeout FROM got
                  EXCEPT
                  SELECT j.job_id, j.job_name, j.execute_str::jsonb, j.tenant_id, j.attempts, j.max_attempts, j.lease_token,
                         j.lease_expires_at, j.job_timeout
                    FROM broker.broker_jobs AS j
                   WHERE j.complete_status = 1 AND j.attempts = 1 AND j.lease_expires_at > now() + interval '29 seconds'$$,
                'each row is the task as the claim wrote it: running, first attempt, the lease asked for');
SELECT is(ARRAY(SELECT args->>'n' FROM got WHERE task = 'ra' ORDER BY o),
          (ARRAY['1', '3', '2'])[1:(SELECT count(*) FROM got WHERE task = 'ra')::integer],
          'a name''s tasks in claim order: priority, then age');
SELECT is(ARRAY(SELECT args->>'n' FROM got WHERE task = 'rb' ORDER BY o),
          (ARRAY['11', '12', '13'])[1:(SELECT count(*) FROM got WHERE task = 'rb')::integer],
          'the other name''s too');
SELECT is((SELECT count(*) FROM got AS a JOIN got AS b ON b.o = a.o + 1 WHERE a.task <> b.task), 1::bigint,
          'name by name');

SELECT * FROM finish();
ROLLBACK;
