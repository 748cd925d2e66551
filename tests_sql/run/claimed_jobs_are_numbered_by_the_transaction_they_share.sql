-- broker_claim_batches claims as broker_get does and numbers the claimed jobs by the transaction
-- they may share: one tenant and run_as role per batch, a job with a timeout only first, at most
-- p_per_transaction jobs, and a batch of its own for a job that runs alone (autonomous, run_alone,
-- a timeout shorter than the budget, or a queue whose jobs each run alone).
BEGIN;
SELECT plan(7);

INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, tenant_id, run_as, run_alone, autonomous, job_timeout)
VALUES ('a', 'g', 'SELECT 1', 't1', 'postgres', false, false, NULL),
       ('b', 'g', 'SELECT 1', 't1', 'postgres', false, false, NULL),
       ('c', 'g', 'SELECT 1', 't2', 'postgres', false, false, NULL),
       ('d', 'g', 'SELECT 1', 't2', 'broker_enqueue', false, false, NULL),
       ('e', 'g', 'SELECT 1', 't2', 'broker_enqueue', true, false, NULL),
       ('f', 'g', 'SELECT 1', 't2', 'broker_enqueue', false, false, NULL),
       ('g', 'g', 'SELECT 1', 't2', 'broker_enqueue', false, false, interval '1 second'),
       ('h', 'g', 'SELECT 1', 't2', 'broker_enqueue', false, false, NULL),
       ('i', 'g', 'SELECT 1', 't2', 'broker_enqueue', false, false, interval '50 milliseconds'),
       ('j', 'g', 'VACUUM', 't2', 'broker_enqueue', false, true, NULL),
       ('k', 'g', 'SELECT 1', 't2', 'broker_enqueue', false, false, NULL);
CREATE TEMP TABLE got AS
SELECT job_name, batch_no, alone FROM broker.broker_claim_batches(1, NULL, 60, 20, interval '200 milliseconds');
SELECT results_eq($$SELECT job_name, batch_no, alone FROM got ORDER BY job_name$$,
    $$VALUES ('a', 1, false), ('b', 1, false), ('c', 2, false), ('d', 3, false), ('e', 4, true), ('f', 5, false),
             ('g', 6, false), ('h', 6, false), ('i', 7, true), ('j', 8, true), ('k', 9, false)$$,
    'a batch per tenant and role; a timeout only first; run_alone, a short timeout, autonomous: alone');
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 1), 11::bigint, 'and every job is claimed');

INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
SELECT 'q2-' || i, 'g', 'SELECT 1', 2 FROM generate_series(1, 5) AS i;
SELECT is(ARRAY(SELECT batch_no FROM broker.broker_claim_batches(2, NULL, 60, 3, interval '200 milliseconds', false, 2)),
          ARRAY[1, 1, 2], 'at most p_per_transaction jobs a batch');
SELECT is(ARRAY(SELECT batch_no::text || alone::text FROM broker.broker_claim_batches(2, NULL, 60, 5, NULL, true)),
          ARRAY['1true', '2true'], 'p_alone: each job alone');
SELECT is(ARRAY(SELECT batch_no FROM broker.broker_claim_batches(2)), '{}'::integer[], 'nothing left: no row');

SELECT throws_ok($$SELECT * FROM broker.broker_claim_batches(2, NULL, 60, 5, NULL, false, 0)$$, '22023', NULL,
                 'p_per_transaction 0: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_claim_batches(2, NULL, 60, 5, interval '0')$$, '22023', NULL,
                 'a budget of 0: 22023');

SELECT * FROM finish();
ROLLBACK;
