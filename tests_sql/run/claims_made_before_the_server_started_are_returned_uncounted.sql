-- A claim made before the server last started died with that server's sessions: recovery returns it
-- at once (its lease need not expire) without counting the attempt, as an interrupted one, since a job
-- cannot restart the server; a crash restart keeps the start time and is not this case. The restart is
-- stood in for by a claim time before pg_postmaster_start_time().
BEGIN;
SELECT plan(10);

CREATE TEMP TABLE a AS SELECT job_id FROM broker.broker_add_job('claimed before the restart', 'SELECT 1');
SELECT broker.broker_add_job_simple('after it', 'SELECT 1', 0, ARRAY['claimed before the restart']);
CREATE TEMP TABLE b AS SELECT job_id FROM broker.broker_add_job('claimed since', 'SELECT 1');
CREATE TEMP TABLE c AS SELECT job_id FROM broker.broker_add_job('restarted too often', 'SELECT 1');
CREATE TEMP TABLE inst AS SELECT broker.broker_register_instance('claimer') AS id;
SELECT broker.broker_get(1, (SELECT id FROM inst), 60, 3);
UPDATE broker.broker_jobs SET started_at = pg_postmaster_start_time() - interval '1 second'
 WHERE job_id IN ((SELECT job_id FROM a), (SELECT job_id FROM c));
UPDATE broker.broker_jobs SET interruptions = broker._restart_interruptions_max() WHERE job_id = (SELECT job_id FROM c);

CREATE TEMP TABLE rec AS SELECT * FROM broker.broker_recover_stale_jobs();
SELECT is((SELECT count(*) FROM rec), 2::bigint, 'both claims made before the server started are recovered, leases still valid');
SELECT is((SELECT complete_status FROM rec WHERE job_id = (SELECT job_id FROM a)), 0::smallint, 'back to pending');
SELECT ok((SELECT attempts = 0 AND interruptions = 1 AND lease_token IS NULL AND run_after <= now()
             FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM a)),
          'the attempt is not counted, the interruption is, and it may run again at once');
SELECT is((SELECT outcome FROM broker.broker_job_attempts WHERE job_id = (SELECT job_id FROM a)), 'interrupted',
          'the attempt history says interrupted');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_name = 'after it'), 0::smallint,
          'its dependent still waits (not cancelled)');
SELECT is((SELECT complete_status FROM rec WHERE job_id = (SELECT job_id FROM c)), 3::smallint,
          'a job interrupted by restarts too often counts the attempt: failed on its last one');
SELECT ok((SELECT last_error_message LIKE 'the server restarted at % while the job was claimed (instance %), and it was interrupted 5 times before: this time the attempt counts'
             FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM c)), 'and says why it counts');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM b)), 1::smallint,
          'a claim made since the server started, lease valid, is left alone');
SELECT is((SELECT count(*) FROM broker.broker_recover_stale_jobs()), 0::bigint, 'nothing more to recover');
SELECT is((SELECT attempts FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM a)), 0,
          'recovered once only');

SELECT * FROM finish();
ROLLBACK;
