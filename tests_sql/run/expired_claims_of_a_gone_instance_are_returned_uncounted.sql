-- A claim whose lease expired while the instance that made it is gone (its session ended: the runner was
-- killed, or cut off until the server ended its session, and a standby took over) returns to pending
-- without counting the attempt, as an interrupted one: the runner that is gone cannot say which of its
-- claims it had started, and a job that ends its own session while its runner lives is counted by that
-- runner. After _restart_interruptions_max() interruptions it counts, and so does an autonomous job's
-- (its run has a session of its own) and a claim of the live instance. The session's end is stood in for
-- by releasing the instance lock.
BEGIN;
SELECT plan(11);

CREATE TEMP TABLE a AS SELECT job_id FROM broker.broker_add_job('claimed by the gone one', 'SELECT 1');
SELECT broker.broker_add_job_simple('after it', 'SELECT 1', 0, ARRAY['claimed by the gone one']);
CREATE TEMP TABLE c AS SELECT job_id FROM broker.broker_add_job('interrupted too often', 'SELECT 1');
CREATE TEMP TABLE d AS SELECT job_id FROM broker.broker_add_job('autonomous', 'SELECT 1');
CREATE TEMP TABLE gone AS SELECT broker.broker_register_instance('gone') AS id;
SELECT broker.broker_get(1, (SELECT id FROM gone), 60, 3);
UPDATE broker.broker_jobs SET interruptions = broker._restart_interruptions_max() WHERE job_id = (SELECT job_id FROM c);
UPDATE broker.broker_jobs SET autonomous = true WHERE job_id = (SELECT job_id FROM d);

SELECT is((SELECT count(*) FROM broker.broker_recover_stale_jobs()), 0::bigint,
          'while their leases hold, the claims of an instance are left alone');
SELECT pg_advisory_unlock(k.classid, k.objid) FROM broker._instance_lock_key() AS k;   -- its session ends
SELECT is((SELECT count(*) FROM broker.broker_recover_stale_jobs()), 0::bigint,
          'and so they are once it is gone (a worker of it may still run them)');

UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 second' WHERE complete_status = 1;
CREATE TEMP TABLE rec AS SELECT * FROM broker.broker_recover_stale_jobs();
SELECT is((SELECT complete_status FROM rec WHERE job_id = (SELECT job_id FROM a)), 0::smallint,
          'its lease expired: back to pending');
SELECT ok((SELECT attempts = 0 AND interruptions = 1 AND lease_token IS NULL AND run_after <= now()
             FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM a)),
          'the attempt is not counted, the interruption is, and it may run again at once');
SELECT is((SELECT outcome FROM broker.broker_job_attempts WHERE job_id = (SELECT job_id FROM a)), 'interrupted',
          'the attempt history says interrupted');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'after it'), 0::smallint,
          'its dependent still waits (not cancelled)');
SELECT is((SELECT complete_status FROM rec WHERE job_id = (SELECT job_id FROM c)), 3::smallint,
          'a job interrupted too often counts the attempt: failed on its last one');
SELECT ok((SELECT last_error_message LIKE 'lease expired at %, no session was executing the job and its instance % is gone; it was interrupted 5 times before: this time the attempt counts'
             FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)), 'and says why it counts');
SELECT is((SELECT complete_status FROM rec WHERE job_id = (SELECT job_id FROM d)), 3::smallint,
          'an autonomous job counts the attempt');

-- the live instance's own claim whose lease expired: the job may have ended the session running it
CREATE TEMP TABLE live AS SELECT broker.broker_register_instance('live') AS id;
SELECT is((SELECT status FROM broker.broker_queueinstance WHERE instance_id = (SELECT id FROM gone)), 'dead',
          'the gone instance is marked dead when the next one registers');
SELECT broker.broker_get(1, (SELECT id FROM live), 60, 1);
UPDATE broker.broker_jobs SET lease_expires_at = now() - interval '1 second' WHERE complete_status = 1;
SELECT is((SELECT complete_status FROM broker.broker_recover_stale_jobs() WHERE job_id = (SELECT job_id FROM a)),
          3::smallint, 'a claim of the live instance whose lease expired counts its attempt: failed on its last one');

SELECT pg_advisory_unlock_all();
SELECT * FROM finish();
ROLLBACK;
