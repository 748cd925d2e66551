-- A claimer that chose its claim's lease token (broker_claim_batches / broker_get p_lease_token) can hand
-- back a claim whose answer it never received: every job of it, attempt not counted; nobody else's
-- claim, no job under another token, and no job a session is executing. Jobs that shared a transaction whose
-- session died go back the same way, each to run alone from then on (p_run_alone).
BEGIN;
SELECT plan(12);

SELECT broker.broker_add_job('j' || g, 'SELECT 1', p_job_queue => 3) FROM generate_series(1, 4) AS g;
SELECT broker.broker_add_job('other claim', 'SELECT 1', p_job_queue => 4);
CREATE TEMP TABLE inst AS SELECT broker.broker_register_instance('claimer') AS id;
CREATE TEMP TABLE lost AS
SELECT * FROM broker.broker_claim_batches(3, (SELECT id FROM inst), 60, 3, NULL, false, 50,
                                          'a1b2c3d4-0000-4000-8000-000000000001'::uuid);
CREATE TEMP TABLE kept AS SELECT * FROM broker.broker_get(4, (SELECT id FROM inst), 60, 1);

SELECT is((SELECT count(DISTINCT lease_token) FROM lost), 3::bigint, 'each job of the claim has a token of its own');
SELECT ok((SELECT bool_and(lease_token = broker._claim_job_token('a1b2c3d4-0000-4000-8000-000000000001', job_id)
                           AND lease_token <> 'a1b2c3d4-0000-4000-8000-000000000001') FROM lost),
          'derived from the claim''s token and the job, and none of them is the claim''s token');
SELECT isnt((SELECT lease_token FROM kept), 'a1b2c3d4-0000-4000-8000-000000000001'::uuid,
            'a claim without a token gets a random one');

CREATE TEMP TABLE released AS SELECT * FROM broker.broker_release_claim('a1b2c3d4-0000-4000-8000-000000000001'::uuid);
SELECT is((SELECT count(*) FROM released), 3::bigint, 'the three jobs of the lost claim are handed back');
SELECT ok((SELECT bool_and(complete_status = 0 AND attempts = 0 AND lease_token IS NULL)
             FROM broker.broker_jobs WHERE job_id IN (SELECT job_id FROM lost)),
          'pending again, attempt not counted');
SELECT is((SELECT complete_status FROM broker.broker_jobs WHERE job_id = (SELECT job_id FROM kept)), 1::smallint,
          'another claim is left alone');
SELECT is((SELECT count(*) FROM broker.broker_release_claim('a1b2c3d4-0000-4000-8000-000000000001'::uuid)), 0::bigint,
          'nothing more under that token');
SELECT is((SELECT count(*) FROM broker.broker_release_claim(gen_random_uuid())), 0::bigint, 'an unknown token releases nothing');
SELECT throws_ok($$SELECT * FROM broker.broker_release_claim(NULL)$$, '22004', NULL, 'a NULL token: 22004');

-- a transaction of several jobs whose session died: handed back, each to run alone
CREATE TEMP TABLE mates AS
SELECT * FROM broker.broker_claim_batches(3, (SELECT id FROM inst), 60, 3, NULL, false, 50);
SELECT is((SELECT count(DISTINCT batch_no) FROM mates), 1::bigint, 'the three jobs share one transaction');
SELECT is((SELECT count(*) FROM broker.broker_release_jobs((SELECT array_agg(job_id) FROM mates),
                                                          (SELECT array_agg(lease_token) FROM mates), true)),
          3::bigint, 'handed back');
SELECT ok((SELECT bool_and(complete_status = 0 AND attempts = 0 AND run_alone)
             FROM broker.broker_jobs WHERE job_id IN (SELECT job_id FROM mates)),
          'pending, attempt not counted, each to run in a transaction of its own');

SELECT * FROM finish();
ROLLBACK;
