-- The runner's poll (broker_ready_queues) reads a few entries of the claim index a queue, whatever the
-- statistics say: on a table analyzed when it held almost nothing (as after years of history, whose
-- statistics say the ready jobs are a vanishing share), with thousands of ready jobs in four queues, it
-- does not read every ready job (the check that a queue has one due now, as an EXISTS, can be planned
-- as a hash semi-join over the whole claim index: every poll would read every ready job). (Counted, not
-- timed.)
BEGIN;
SELECT plan(3);

INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) VALUES ('few', 'few', 'SELECT 1');
ANALYZE broker.broker_jobs;
DELETE FROM broker.broker_jobs;
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue)
SELECT 'ready', 'ready', 'SELECT 1', 1 + i % 4 FROM generate_series(1, 6000) AS i;

-- (entries of the claim index read in this transaction: its idx_tup_read so far)
CREATE TEMP TABLE before AS
SELECT pg_stat_get_xact_tuples_returned('broker.broker_jobs_claim_idx'::regclass) AS n,
       (SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass) AS seq_scan;
SELECT is(broker.broker_ready_queues(), ARRAY[1, 2, 3, 4], 'the poll finds the four queues with ready jobs');
SELECT cmp_ok((SELECT pg_stat_get_xact_tuples_returned('broker.broker_jobs_claim_idx'::regclass) - b.n FROM before AS b),
              '<=', 20::bigint,
              'and reads at most 20 entries of the claim index for them, not the 6,000 ready jobs');
SELECT is((SELECT s.seq_scan - b.seq_scan FROM pg_stat_xact_user_tables AS s, before AS b
            WHERE s.relid = 'broker.broker_jobs'::regclass), 0::bigint,
          'and no sequential scan of broker_jobs');

SELECT * FROM finish();
ROLLBACK;
