-- Idempotency keys: the unfinished job with the key is returned; after it finishes the key is free.
BEGIN;
SELECT plan(9);

CREATE TEMP TABLE a AS SELECT * FROM broker.broker_add_job('nightly', 'SELECT 1', p_idempotency_key => 'k1');
CREATE TEMP TABLE b AS SELECT * FROM broker.broker_add_job('nightly again', 'SELECT 2', p_idempotency_key => 'k1');
SELECT is((SELECT job_id FROM b), (SELECT job_id FROM a), 'same key while pending: same job');
SELECT is((SELECT is_new FROM b), false, 'the repeat reports is_new = false');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE idempotency_key = 'k1'), 1::bigint, 'no duplicate row');

-- still deduplicated while running
SELECT is((SELECT job_id FROM broker.broker_get(1)), (SELECT job_id FROM a), 'claimed');
SELECT is((SELECT job_id FROM broker.broker_add_job('x', 'SELECT 1', p_idempotency_key => 'k1')),
          (SELECT job_id FROM a), 'same key while running: same job');

-- finished: the key may be used again
SELECT is((SELECT complete_status FROM broker.broker_run((SELECT job_id FROM a))), 2::smallint, 'completed');
CREATE TEMP TABLE c AS SELECT * FROM broker.broker_add_job('nightly', 'SELECT 1', p_idempotency_key => 'k1');
SELECT ok((SELECT is_new AND job_id <> (SELECT job_id FROM a) FROM c), 'after completion the key makes a new job');

-- keys are per tenant
SELECT broker.broker_set_tenant('acme');
CREATE TEMP TABLE d AS SELECT * FROM broker.broker_add_job('nightly', 'SELECT 1', p_idempotency_key => 'k1');
SELECT ok((SELECT is_new AND job_id <> (SELECT job_id FROM c) FROM d), 'another tenant does not collide on a key');
SELECT broker.broker_set_tenant('default');

-- different keys never collide
SELECT isnt((SELECT job_id FROM broker.broker_add_job('n', 'SELECT 1', p_idempotency_key => 'k2')),
            (SELECT job_id FROM c), 'a different key is a different job');

SELECT * FROM finish();
ROLLBACK;
