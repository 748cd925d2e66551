-- Tasks (jobs run by application code): enqueued by name with JSON arguments, claimed by name
-- (never by a runner's claim), renewed, completed with an output; SQL jobs and tasks wait on
-- each other both ways; idempotency keys and priorities hold as for SQL jobs.
BEGIN;
SELECT plan(26);

SELECT broker.broker_create_executor(current_user);
CREATE TEMP TABLE ids (name text PRIMARY KEY, id bigint);
INSERT INTO ids SELECT 'extract', job_id FROM broker.broker_add_job('extract', 'SELECT 1');
INSERT INTO ids SELECT 'call_api', job_id
  FROM broker.broker_add_task('call_api', '{"url": "http://127.0.0.1/x", "n": 3}',
                              p_depends_on_job_ids => ARRAY[(SELECT id FROM ids WHERE name = 'extract')]);
INSERT INTO ids SELECT 'load', job_id
  FROM broker.broker_add_job('load', 'SELECT 2', p_depends_on_job_ids => ARRAY[(SELECT id FROM ids WHERE name = 'call_api')]);

SELECT is((SELECT (job_language, job_name, execute_str::jsonb, pending_deps)::text FROM broker.broker_jobs
            WHERE job_id = (SELECT id FROM ids WHERE name = 'call_api')),
          '(task,call_api,"{""n"": 3, ""url"": ""http://127.0.0.1/x""}",1)', 'a task is a job row: its name, its arguments, its dependency');
SELECT ok((SELECT job_queue < 0 FROM broker.broker_jobs WHERE job_id = (SELECT id FROM ids WHERE name = 'call_api')),
          'in its name''s queue, which no runner serves');
SELECT is_empty($$SELECT * FROM broker.broker_claim_tasks(ARRAY['call_api'])$$, 'a task waiting on a SQL job is not claimed');

-- the SQL job runs; the task is released
SELECT is(r.complete_status, 2::smallint, 'the SQL job completes')
  FROM broker.broker_get(1, NULL, 60, 10) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
SELECT is_empty($$SELECT * FROM broker.broker_get(1, NULL, 60, 10)$$, 'a runner''s claim never returns a task (nor the load, which waits on it)');
SELECT is(broker.broker_ready_queues(), '{}'::integer[], 'nor does a runner''s poll see the task''s queue');
CREATE TEMP TABLE c AS SELECT * FROM broker.broker_claim_tasks(ARRAY['call_api', 'no_such_task'], 5, 30);
SELECT is((SELECT (task, args, attempt, max_attempts, timeout)::text FROM c),
          '(call_api,"{""n"": 3, ""url"": ""http://127.0.0.1/x""}",1,1,)', 'claimed by name with its arguments and attempt');
SELECT ok((SELECT lease_token IS NOT NULL AND lease_expires_at > now() FROM c), 'under a lease');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)), 1::smallint, 'running');
SELECT is(broker.broker_extend_task((SELECT job_id FROM c), (SELECT lease_token FROM c), 600), 'extended', 'the heartbeat renews the lease');
SELECT ok((SELECT lease_expires_at > now() + interval '599 seconds' FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)),
          'by the seconds asked for');
SELECT is(broker.broker_extend_task((SELECT job_id FROM c), gen_random_uuid(), 60), 'lost', 'another token''s heartbeat: lost');
SELECT is(broker.broker_complete_task((SELECT job_id FROM c), gen_random_uuid()), false, 'another token cannot complete it');

-- the worker's own write and the completion, in one transaction
CREATE TEMP TABLE effects (job_id bigint);
INSERT INTO effects SELECT job_id FROM c;
SELECT is(broker.broker_complete_task((SELECT job_id FROM c), (SELECT lease_token FROM c), '{"status": 200}'), true, 'completed');
SELECT is((SELECT (complete_status, lease_token)::text FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)), '(2,)',
          'completed, lease gone');
SELECT is((SELECT (outcome, output::jsonb, command_status)::text FROM broker.broker_job_attempts WHERE job_id = (SELECT job_id FROM c)),
          '(completed,"{""status"": 200}",)', 'its attempt is recorded with its output');
SELECT is(broker.broker_complete_task((SELECT job_id FROM c), (SELECT lease_token FROM c)), false, 'a second completion: false');
SELECT is(r.complete_status, 2::smallint, 'the SQL job that waited on the task runs')
  FROM broker.broker_get(1, NULL, 60, 10) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;

-- idempotency and priority, as for SQL jobs
SELECT is((SELECT array_agg(is_new) FROM (
              SELECT (broker.broker_add_task('mail', '{"to": 1}', p_idempotency_key => 'mail-1')).is_new
              UNION ALL SELECT (broker.broker_add_task('mail', '{"to": 1}', p_idempotency_key => 'mail-1')).is_new) AS x),
          ARRAY[true, false], 'an idempotency key returns the unfinished task');
SELECT broker.broker_add_task('mail', '{"to": 2}', p_priority => 5);
SELECT broker.broker_add_task('mail', '{"to": 3}');
SELECT is(ARRAY(SELECT args->>'to' FROM broker.broker_claim_tasks(ARRAY['mail'], 10)), ARRAY['2', '1', '3'],
          'priority first, then age');
SELECT is_empty($$SELECT * FROM broker.broker_claim_tasks(ARRAY['mail'], 10)$$, 'nothing left');
-- names share a claim
SELECT broker.broker_add_task('a', '1') FROM generate_series(1, 3);
SELECT broker.broker_add_task('b', '2') FROM generate_series(1, 3);
SELECT is((SELECT count(*) FROM broker.broker_claim_tasks(ARRAY['a', 'b'], 4)), 4::bigint, 'a claim of two names takes up to its limit');
SELECT is((SELECT count(DISTINCT job_queue) FROM broker.broker_task_queue WHERE task_name IN ('a', 'b', 'mail', 'call_api')), 4::bigint,
          'one queue per name');

-- many at once, for handlers that wrote nothing: one statement
SELECT broker.broker_add_task('batch', '{}') FROM generate_series(1, 4);
CREATE TEMP TABLE b AS SELECT * FROM broker.broker_claim_tasks(ARRAY['batch'], 4);
SELECT broker.broker_cancel_job((SELECT max(job_id) FROM b));
SELECT is(ARRAY(SELECT t.outcome FROM broker.broker_complete_tasks(
              ARRAY(SELECT job_id FROM b ORDER BY job_id),
              ARRAY(SELECT CASE WHEN job_id = (SELECT min(job_id) FROM b) THEN gen_random_uuid() ELSE lease_token END FROM b ORDER BY job_id),
              ARRAY(SELECT jsonb_build_object('id', job_id) FROM b ORDER BY job_id)) AS t),
          ARRAY['lost', 'completed', 'completed', 'cancelled'], 'a batch completion: each task''s outcome, in order');
SELECT is(ARRAY(SELECT complete_status FROM broker.broker_jobs WHERE job_id IN (SELECT job_id FROM b) ORDER BY job_id),
          ARRAY[1, 2, 2, 4]::smallint[], 'the lost one untouched, the cancelled one cancelled');
SELECT is((SELECT count(*) FROM broker.broker_job_attempts WHERE job_id IN (SELECT job_id FROM b) AND outcome = 'completed'
              AND output::jsonb->>'id' = job_id::text), 2::bigint, 'each completed attempt with its own output');

SELECT * FROM finish();
ROLLBACK;
