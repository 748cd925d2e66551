-- The runtime side of autonomous jobs keeps the claim's rules: only the claim's lease token starts a job, keeps its
-- lease alive or records its outcome; a regular job is not started this way (nor an autonomous one by broker_run's
-- callers by mistake: broker_get says which is which); the enqueuer's rights and the role's arrangement are checked
-- again when it starts; its outcome goes through the usual completion and retry functions, and every attempt has its
-- row in the attempt history, as a regular job's has.
BEGIN;
SELECT plan(18);

CREATE ROLE broker_test_ac_maint NOLOGIN IN ROLE broker_enqueue;
GRANT broker_test_ac_maint TO broker_runtime;
SELECT broker.broker_allow_autonomous('broker_test_ac_maint');
SELECT broker.broker_set('retry_base_seconds', '0');

SET LOCAL ROLE broker_test_ac_maint;
SELECT broker.broker_add_job('vacuum', 'VACUUM t', 31, p_autonomous => true, p_max_attempts => 2);
SELECT broker.broker_add_job('after', 'SELECT 1', 31, p_depends_on_groups => ARRAY['vacuum']);
SELECT broker.broker_add_job('regular', 'SELECT 1', 32);
RESET ROLE;

CREATE TEMP TABLE c AS SELECT * FROM broker.broker_get(31, p_batch_size => 10);
CREATE TEMP TABLE r AS SELECT * FROM broker.broker_get(32);
SELECT is((SELECT array_agg(job_name || ':' || autonomous) FROM c), ARRAY['vacuum:true'], 'broker_get says a job is autonomous');
SELECT is((SELECT autonomous FROM r), false, 'and that a regular one is not');

SELECT throws_ok($$SELECT * FROM broker.broker_autonomous_begin((SELECT job_id FROM r), (SELECT lease_token FROM r))$$,
    '55000', NULL, 'a regular job is not started as an autonomous one');
SELECT throws_ok($$SELECT * FROM broker.broker_autonomous_begin((SELECT job_id FROM c), gen_random_uuid())$$,
    '55000', NULL, 'another token starts nothing');
SELECT is((SELECT row(execute_str, run_as, via, refused)::text FROM broker.broker_autonomous_begin((SELECT job_id FROM c), (SELECT lease_token FROM c))),
    '("VACUUM t",broker_test_ac_maint,set_role,)', 'the claim''s token starts it: its SQL, role and how');
SELECT is((SELECT count(*) FROM broker.broker_autonomous_extend(ARRAY[(SELECT job_id FROM c)], ARRAY[gen_random_uuid()], 60)),
    0::bigint, 'another token extends nothing');
UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 hour' WHERE job_id = (SELECT job_id FROM c);
SELECT is((SELECT count(*) FROM broker.broker_autonomous_extend(ARRAY[(SELECT job_id FROM c)], ARRAY[(SELECT lease_token FROM c)], 60)),
    1::bigint, 'the claim''s token keeps the lease alive');
SELECT ok((SELECT lease_expires_at > now() FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)), 'extended');
SELECT throws_ok($$SELECT * FROM broker.broker_autonomous_end((SELECT job_id FROM c), gen_random_uuid(), NULL, NULL, '1 second')$$,
    '55000', NULL, 'another token records nothing');
SELECT is((SELECT complete_status FROM broker.broker_autonomous_end((SELECT job_id FROM c), (SELECT lease_token FROM c), '57014', 'canceling statement', '1 second')),
    0::smallint, 'a failed attempt is retried (attempts left)');
DELETE FROM c;
INSERT INTO c SELECT * FROM broker.broker_get(31);
SELECT is((SELECT complete_status FROM broker.broker_autonomous_end((SELECT job_id FROM c), (SELECT lease_token FROM c), NULL, NULL, '1 second')),
    2::smallint, 'a completed one is completed');
SELECT is((SELECT job_name FROM broker.broker_get(31)), 'after', 'and releases its dependents');

-- the arrangement withdrawn: the next start fails the job for good, with nothing returned to run
SET LOCAL ROLE broker_test_ac_maint;
SELECT broker.broker_add_job('vacuum again', 'VACUUM t', 33, p_autonomous => true, p_max_attempts => 3);
RESET ROLE;
SELECT broker.broker_disallow_autonomous('broker_test_ac_maint');
DELETE FROM c;
INSERT INTO c SELECT * FROM broker.broker_get(33);
SELECT is((SELECT row(execute_str, refused)::text FROM broker.broker_autonomous_begin((SELECT job_id FROM c), (SELECT lease_token FROM c))),
    '(,"role broker_test_ac_maint may no longer run autonomous jobs (broker_allow_autonomous)")', 'refused: no SQL to run');
SELECT is((SELECT row(complete_status, last_error_sqlstate)::text FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)),
    '(3,42501)', 'failed for good with 42501');


-- the attempt history: every attempt, as for a regular job (broker_run)
CREATE FUNCTION pg_temp.history(p_name text) RETURNS text[] LANGUAGE sql AS $$
    SELECT array_agg(row(a.attempt, a.outcome, a.error_sqlstate, a.command_status)::text ORDER BY a.attempt_id)
      FROM broker.broker_job_attempts AS a JOIN broker.broker_jobs AS j USING (job_id) WHERE j.job_name = p_name $$;
SELECT is(pg_temp.history('vacuum'), ARRAY['(1,failed,57014,)', '(2,completed,,VACUUM)'],
    'the attempt history has the failed attempt and the completed one');
SELECT is(pg_temp.history('vacuum again'), ARRAY['(1,failed,42501,)'], 'and a start refused');
SELECT broker.broker_allow_autonomous('broker_test_ac_maint');
SET LOCAL ROLE broker_test_ac_maint;
SELECT broker.broker_add_job('refused text', 'VACUUM t', 34, p_autonomous => true, p_max_attempts => 3);
RESET ROLE;
DELETE FROM c;
INSERT INTO c SELECT * FROM broker.broker_get(34);
SELECT is((SELECT complete_status FROM broker.broker_autonomous_end((SELECT job_id FROM c), (SELECT lease_token FROM c), '42501',
                                                                    'refused: not one statement', '0', true)),
    3::smallint, 'p_final fails it for good, attempts left or not');
SELECT is(pg_temp.history('refused text'), ARRAY['(1,failed,42501,)'], 'with its attempt');

SELECT * FROM finish();
ROLLBACK;
