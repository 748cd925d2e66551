-- sql/tables/broker_finished_count.sql: finished jobs per minute, queue, tenant and state (derived counters).
-- ---------------------------------------------------------------------------
-- Table: broker.broker_finished_count
--   Finished jobs per minute (of finished_at), queue, tenant and final state,
--   kept by the triggers of sql/instances/finished_counts.sql, so that
--   broker_queue_stats() reads a few rows per minute of its window instead of
--   every job that finished in the last hour. Writers only append rows (a
--   +n or -n delta per statement), so finishing jobs never waits on a lock
--   here; broker._merge_finished_counts() folds the deltas into one row per
--   key and drops the minutes no window reads any more. Exact: the sum over a
--   key is the number of jobs in broker_jobs with that key. No role is
--   granted anything on it; derived data, so it is not dumped (a restore of
--   broker_jobs counts its rows again through the insert trigger).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_finished_count (
    finished_minute  timestamptz NOT NULL,
    job_queue        integer     NOT NULL,
    tenant_id        text        NOT NULL,
    complete_status  smallint    NOT NULL,
    jobs             bigint      NOT NULL,
    merged           boolean     NOT NULL DEFAULT false
);
-- one merged row per key, and the deltas the merge folds into them (a finish maintains the second only;
-- the window's minutes are read from both)
CREATE UNIQUE INDEX broker_finished_count_key_idx ON broker.broker_finished_count
    (finished_minute, job_queue, tenant_id, complete_status) WHERE merged;
CREATE INDEX broker_finished_count_delta_idx ON broker.broker_finished_count (finished_minute) WHERE NOT merged;
-- every merge leaves the deltas it folded dead: vacuum early, so that the window's reads stay short
ALTER TABLE broker.broker_finished_count SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02);
COMMENT ON TABLE broker.broker_finished_count IS
    'Finished jobs per minute of finished_at, queue, tenant and final state (deltas, merged now and then), for broker_queue_stats (derived; not dumped).';
COMMENT ON COLUMN broker.broker_finished_count.finished_minute IS 'Start of the minute of finished_at (date_bin, UTC-aligned).';
COMMENT ON COLUMN broker.broker_finished_count.job_queue IS 'Queue.';
COMMENT ON COLUMN broker.broker_finished_count.tenant_id IS 'Tenant.';
COMMENT ON COLUMN broker.broker_finished_count.complete_status IS 'Final state: 2 completed, 3 failed, 4 cancelled.';
COMMENT ON COLUMN broker.broker_finished_count.jobs IS 'Jobs added (positive) or removed (negative) by one statement, or the merged sum.';
COMMENT ON COLUMN broker.broker_finished_count.merged IS 'true: the one merged row of its key; false: a delta not merged yet.';
COMMENT ON INDEX broker.broker_finished_count_key_idx IS 'One merged row per minute, queue, tenant and state.';
COMMENT ON INDEX broker.broker_finished_count_delta_idx IS 'The deltas the next merge folds in (none: the merge costs an index probe).';
