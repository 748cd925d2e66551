-- The purge's cost is linear in the jobs it deletes, whatever the table holds: the candidates come
-- from broker_jobs_finished_idx in order (no scan and sort of every finished job), and the edges of
-- a deleted job from an index on broker_job_dependency.job_id (the foreign key's cascade looks them
-- up by job_id alone, which the partial unique indexes cannot serve). Checked by what one purge of
-- ten jobs reads from tables of 20,000 finished jobs and 20,000 edges (this transaction's counters).
BEGIN;
SELECT plan(5);

INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
SELECT 'done', 'done', 'SELECT 1', 2 + (i % 3), '2000-01-01'::timestamptz + i * interval '1 second'
  FROM generate_series(1, 20000) AS i;
-- edges of those jobs, written past the triggers (which accept edges of pending jobs only): what is
-- measured is how the cascade finds them
SET LOCAL session_replication_role = replica;
INSERT INTO broker.broker_job_dependency (job_id, depends_on_group)
SELECT j.job_id, 'g' || (j.job_id % 7) FROM broker.broker_jobs AS j;
SET LOCAL session_replication_role = origin;
ANALYZE broker.broker_jobs, broker.broker_job_dependency;

CREATE TEMP TABLE before AS
SELECT relname, seq_scan, seq_tup_read, idx_scan FROM pg_stat_xact_user_tables WHERE schemaname = 'broker';
SELECT is(broker.broker_purge_jobs(interval '0', 10), 10, 'ten jobs purged');
CREATE TEMP TABLE delta AS
SELECT a.relname, a.seq_scan - b.seq_scan AS seq_scans, a.seq_tup_read - b.seq_tup_read AS seq_read,
       COALESCE(a.idx_scan, 0) - COALESCE(b.idx_scan, 0) AS idx_scans
  FROM pg_stat_xact_user_tables a JOIN before b USING (relname) WHERE a.schemaname = 'broker';

SELECT is((SELECT seq_read FROM delta WHERE relname = 'broker_jobs'), 0::bigint,
          'no finished job is read by a sequential scan to find the ten oldest');
SELECT is((SELECT seq_read FROM delta WHERE relname = 'broker_job_dependency'), 0::bigint,
          'no edge is read by a sequential scan to find the edges of the ten');
SELECT is((SELECT count(*) FROM broker.broker_job_dependency), 19990::bigint, '... whose edges went with them');
SELECT has_index('broker', 'broker_job_dependency', 'broker_job_dependency_job_id_idx', ARRAY['job_id'],
                 'the edges of a job can be found by job_id alone');

SELECT * FROM finish();
ROLLBACK;
