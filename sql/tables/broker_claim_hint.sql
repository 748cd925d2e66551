-- sql/tables/broker_claim_hint.sql: per queue, where its ready jobs start in claim order as of a snapshot.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_claim_hint
--   Where the pending, unblocked jobs of a queue start in claim order, as a
--   snapshot saw them: every such job that `snapshot` sees is at or after
--   (job_priority, run_after, job_id) in claim order (highest priority
--   first, then earliest run_after, then lowest job_id). Jobs made ready
--   later carry a ready_xid that the snapshot does not see, and are found
--   through broker_jobs_ready_xid_idx. A claim starts at the hint instead of
--   at the start of the claim index, so it does not step over the index
--   entries of the jobs claimed before (which a snapshot held elsewhere
--   keeps from being removed). broker_get writes it, at most once per 100
--   transactions of the cluster; a hint stays true however old it gets,
--   only less useful. started_at is pg_postmaster_start_time() when it was
--   written: a hint of another server (a dump restored elsewhere) is never
--   used. Derived data: not dumped, no role is granted anything on it.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_claim_hint (
    job_queue    integer     NOT NULL,
    started_at   timestamptz NOT NULL,
    snapshot     pg_snapshot NOT NULL,
    job_priority integer     NOT NULL,
    run_after    timestamptz NOT NULL,
    job_id       bigint      NOT NULL,
    CONSTRAINT broker_claim_hint_pkey PRIMARY KEY (job_queue)
);
COMMENT ON TABLE broker.broker_claim_hint IS
    'Per queue: where its ready jobs start in claim order, as of a snapshot (written by broker_get; derived, not dumped).';
COMMENT ON COLUMN broker.broker_claim_hint.job_queue IS 'Queue.';
COMMENT ON COLUMN broker.broker_claim_hint.started_at IS 'pg_postmaster_start_time() of the server that wrote it (a hint of another server is ignored).';
COMMENT ON COLUMN broker.broker_claim_hint.snapshot IS 'The snapshot the position was found with.';
COMMENT ON COLUMN broker.broker_claim_hint.job_priority IS 'Priority level of the first ready job the snapshot saw.';
COMMENT ON COLUMN broker.broker_claim_hint.run_after IS 'Its run_after.';
COMMENT ON COLUMN broker.broker_claim_hint.job_id IS 'Its job_id.';
