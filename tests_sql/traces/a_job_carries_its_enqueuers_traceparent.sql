-- The enqueuer's trace context: the transaction's setting broker.traceparent, read when a job is
-- made, on every enqueue path (one job, many, arrays, a task), stored with the job and returned by
-- the claims (broker_claim_batches, broker_claim_tasks); unset or empty: none; anything that is not
-- a W3C traceparent of version 00 is refused with 22023 and enqueues nothing, also after another
-- value passed the check in the same transaction.
BEGIN;
SELECT plan(14);

SET LOCAL broker.traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
CREATE TEMP TABLE made (path text, job_id bigint);
INSERT INTO made SELECT 'one', job_id FROM broker.broker_add_job('t one', 'SELECT 1');
INSERT INTO made SELECT 'many plain', job_id FROM broker.broker_add_jobs('[{"job_name": "t many", "execute_str": "SELECT 1"}]');
INSERT INTO made SELECT 'many general', job_id
  FROM broker.broker_add_jobs('[{"job_name": "t keyed", "execute_str": "SELECT 1", "idempotency_key": "tp-k"}]');
INSERT INTO made SELECT 'arrays', job_id FROM broker.broker_add_jobs_arrays(ARRAY['t arr'], ARRAY['SELECT 1']);
INSERT INTO made SELECT 'task', job_id FROM broker.broker_add_task('tp_task', '{"n": 1}');
INSERT INTO made SELECT 'with deps', job_id FROM broker.broker_add_job('t dep', 'SELECT 1', p_depends_on_groups => ARRAY['t one']);

SELECT is((SELECT count(*) FROM made), 6::bigint, 'six jobs made by six enqueue paths');
SELECT is_empty($$SELECT m.path FROM made AS m JOIN broker.broker_jobs AS j USING (job_id)
                   WHERE j.traceparent IS DISTINCT FROM '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'$$,
                'each carries the transaction''s traceparent');

SELECT is((SELECT traceparent FROM broker.broker_claim_tasks(ARRAY['tp_task'], 1)),
          '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'broker_claim_tasks returns a task''s traceparent');
SELECT is(ARRAY(SELECT DISTINCT traceparent FROM broker.broker_claim_batches(1, NULL, 60, 10)),
          ARRAY['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'], 'broker_claim_batches returns a job''s traceparent');

SET LOCAL broker.traceparent = '';
SELECT is((SELECT j.traceparent FROM broker.broker_add_job('t empty', 'SELECT 1') AS a JOIN broker.broker_jobs AS j USING (job_id)),
          NULL, 'an empty setting: no trace context');
RESET broker.traceparent;
SELECT is((SELECT j.traceparent FROM broker.broker_add_job('t reset', 'SELECT 1') AS a JOIN broker.broker_jobs AS j USING (job_id)),
          NULL, 'a reset setting: no trace context');

SET LOCAL broker.traceparent = 'not a traceparent';
SELECT throws_like($$SELECT broker.broker_add_job('t bad', 'SELECT 1')$$,
                   'broker.traceparent must be a W3C traceparent%got ''not a traceparent''', 'a bad value is refused by its name');
SELECT throws_ok($$SELECT broker.broker_add_job('t bad', 'SELECT 1')$$, '22023', NULL, 'with 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "t bad", "execute_str": "SELECT 1"}]')$$, '22023', NULL,
                 'by broker_add_jobs too');
SELECT throws_ok($$SELECT broker.broker_add_task('tp_task', '{}')$$, '22023', NULL, 'and by broker_add_task');
SET LOCAL broker.traceparent = '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01';
SELECT throws_ok($$SELECT broker.broker_add_job('t upper', 'SELECT 1')$$, '22023', NULL, 'upper-case hex is refused (W3C: lower case)');
SET LOCAL broker.traceparent = '00-00000000000000000000000000000000-b7ad6b7169203331-01';
SELECT throws_ok($$SELECT broker.broker_add_job('t zero', 'SELECT 1')$$, '22023', NULL, 'an all-zero trace id is refused');
SET LOCAL broker.traceparent = '01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
SELECT throws_ok($$SELECT broker.broker_add_job('t v1', 'SELECT 1')$$, '22023', NULL, 'a version other than 00 is refused');
SET LOCAL broker.traceparent = 'x';
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) VALUES ('t raw', 't raw', 'SELECT 1')$$,
                 '22023', NULL, 'a plain INSERT takes the setting through the column''s default, checked the same way');

SELECT * FROM finish();
ROLLBACK;
