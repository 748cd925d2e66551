-- broker_job_attempts: every attempt with its outcome (completed, failed, lost, interrupted),
-- SQLSTATE, message, instance; a completed one with the command status of the job's last
-- statement, its row count and the value it set with broker_set_output (capped); purged with
-- its job.
BEGIN;
SELECT plan(13);
\ir ../lib/run_next.psql

-- the jobs run as a role with an executor made now (one made by 0.1.0 reports no row count)
CREATE ROLE broker_test_writer NOLOGIN IN ROLE broker_enqueue;
SELECT broker.broker_create_executor('broker_test_writer');
CREATE TABLE public.broker_test_t (n integer);
GRANT ALL ON public.broker_test_t TO broker_test_writer;
SELECT broker.broker_add_job('insert', 'INSERT INTO public.broker_test_t SELECT generate_series(1, 5)', 1, p_run_as => 'broker_test_writer');
SELECT broker.broker_add_job('two statements', 'INSERT INTO public.broker_test_t VALUES (0); UPDATE public.broker_test_t SET n = n + 1 WHERE n < 3', 1,
                             p_run_as => 'broker_test_writer');
SELECT broker.broker_add_job('output', $$SELECT broker.broker_set_output('archived ' || count(*)) FROM public.broker_test_t$$, 1,
                             p_run_as => 'broker_test_writer');
SELECT broker.broker_add_job('long output', $$SELECT broker.broker_set_output(repeat('y', 5000))$$, 1, p_run_as => 'broker_test_writer');
SELECT broker.broker_add_job('by hand', $$SELECT set_config('broker.job_output', 'set by hand', true)$$, 1, p_run_as => 'broker_test_writer');
SELECT broker.broker_add_job('plpgsql', 'BEGIN PERFORM 1; END', 1, p_job_language => 'plpgsql', p_run_as => 'broker_test_writer');
SELECT broker.broker_add_job('fails', 'SELECT 1/0', 2, p_max_attempts => 2);

-- a batch (run_jobs) and a single run (run_job)
CREATE TEMP TABLE b AS SELECT job_id, lease_token FROM broker.broker_get(1, NULL, 60, 5);
SELECT broker.broker_run_batch((SELECT array_agg(job_id ORDER BY job_id) FROM b), (SELECT array_agg(lease_token ORDER BY job_id) FROM b));
SELECT is(pg_temp.run_next(1), 'plpgsql', 'a plpgsql job through broker_run');
SELECT results_eq($$SELECT j.job_name, a.attempt, a.outcome, a.command_status, a.rows_affected, a.output
                      FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j USING (job_id) ORDER BY a.attempt_id$$,
                  $$VALUES ('insert'::text, 1, 'completed'::text, 'INSERT 0 5'::text, 5::bigint, NULL::text),
                           ('two statements', 1, 'completed', 'UPDATE 3', 3, NULL),
                           ('output', 1, 'completed', 'SELECT 1', 1, 'archived 6'),
                           ('long output', 1, 'completed', 'SELECT 1', 1, broker._error_text(repeat('y', 5000))),
                           ('by hand', 1, 'completed', 'SELECT 1', 1, 'set by hand'),
                           ('plpgsql', 1, 'completed', 'DO', NULL, NULL)$$,
                  'completed attempts: command status, rows, output (capped at 2,000 characters)');
SELECT ok((SELECT bool_and(started_at IS NOT NULL AND finished_at >= started_at) FROM broker.broker_job_attempts),
          'each attempt has its start and end');

-- failed, then lost (lease recovery), with the instance that held it
SELECT is(pg_temp.run_next(2), 'fails', 'the failing job runs');
UPDATE broker.broker_jobs SET run_after = now() WHERE job_name = 'fails';
SELECT broker.broker_register_instance('test', 'host', 1, 1, NULL);
CREATE TEMP TABLE lost AS SELECT job_id FROM broker.broker_get(2, (SELECT instance_id FROM broker.broker_queueinstance), 60);
UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 second' WHERE job_name = 'fails';
SELECT is((SELECT complete_status FROM broker.broker_recover_stale_jobs()), 3::smallint, 'its lease is lost on its last attempt: failed');
SELECT results_eq($$SELECT a.attempt, a.outcome, a.error_sqlstate, a.instance_id IS NOT NULL, a.error_message ~ '^lease expired'
                      FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j USING (job_id)
                     WHERE j.job_name = 'fails' ORDER BY a.attempt_id$$,
                  $$VALUES (1, 'failed'::text, '22012'::text, false, false), (2, 'lost', NULL, true, true)$$,
                  'a failed attempt with its SQLSTATE, then the lost one with its instance');
SELECT is((SELECT lost_last_hour FROM broker.broker_queue_stats() WHERE job_queue = 2), 1::bigint,
          'broker_queue_stats counts the lost lease');

-- interrupted at shutdown: an attempt too, not counted
SELECT broker.broker_add_job('interrupted', 'SELECT 1', 3);
CREATE TEMP TABLE i AS SELECT job_id, lease_token FROM broker.broker_get(3, (SELECT instance_id FROM broker.broker_queueinstance));
SELECT broker.broker_interrupt_jobs((SELECT array_agg(job_id) FROM i), (SELECT array_agg(lease_token) FROM i));
SELECT results_eq($$SELECT attempt, outcome FROM broker.broker_job_attempts WHERE job_id = (SELECT job_id FROM i)$$,
                  $$VALUES (1, 'interrupted'::text)$$, 'an interrupted run is in the history');

-- the command status rule
SELECT is(broker._command_status(E'-- comment\n  delete from x', 'sql', 2), 'DELETE 2', 'leading comment skipped, keyword upper-cased');
SELECT is(broker._command_status('CREATE TABLE x (a int);  ', 'sql', 0), 'CREATE', 'a tag without rows');
SELECT is(broker._command_status('  ', 'sql', 0), NULL, 'no keyword: NULL');

-- purged with its job (ON DELETE CASCADE)
DELETE FROM broker.broker_jobs WHERE job_name = 'insert';
SELECT is((SELECT count(*) FROM broker.broker_job_attempts a WHERE NOT EXISTS (SELECT 1 FROM broker.broker_jobs j WHERE j.job_id = a.job_id)),
          0::bigint, 'a deleted job takes its attempts along');
SELECT is(broker.broker_set_output(NULL), '', 'broker_set_output(NULL) clears the output');

SELECT * FROM finish();
ROLLBACK;
