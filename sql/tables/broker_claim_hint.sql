-- sql/tables/broker_claim_hint.sql: per queue, where each tenant's ready jobs start in claim order as of a snapshot.
-- ---------------------------------------------------------------------------
-- Type: broker._claim_position
--   Where a tenant's ready jobs of a queue start in claim order (priority,
--   then run_after, then job_id), as a claim's probe found it.
-- ---------------------------------------------------------------------------
CREATE TYPE broker._claim_position AS (
    tenant_id    text,
    job_priority integer,
    run_after    timestamptz,
    job_id       bigint
);
COMMENT ON TYPE broker._claim_position IS
    'Internal: where a tenant''s ready jobs of a queue start in claim order (broker_claim_hint).';

-- ---------------------------------------------------------------------------
-- Table: broker.broker_claim_hint
--   Per queue: where each tenant's pending, unblocked, unparked jobs start
--   in claim order, as a snapshot saw them: every such job of a tenant that
--   `snapshot` sees is at or after the tenant's position (highest priority
--   first, then earliest run_after, then lowest job_id); a tenant missing
--   from positions had none. Jobs made ready later carry a ready_xid that
--   the snapshot does not see, and are found through
--   broker_jobs_ready_xid_idx. A claim starts each tenant at its position
--   instead of at the start of the claim index, so it does not step over
--   the index entries of the jobs claimed before (which a snapshot held
--   elsewhere keeps from being removed). broker_get writes it, at most once
--   per 100 transactions of the cluster; a hint stays true however old it
--   gets, only less useful. started_at is pg_postmaster_start_time() when it
--   was written: a hint of another server (a dump restored elsewhere) is
--   never used. Derived data: not dumped, no role is granted anything on it.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_claim_hint (
    job_queue    integer     NOT NULL,
    started_at   timestamptz NOT NULL,
    snapshot     pg_snapshot NOT NULL,
    positions    broker._claim_position[] NOT NULL,
    CONSTRAINT broker_claim_hint_pkey PRIMARY KEY (job_queue)
);
COMMENT ON TABLE broker.broker_claim_hint IS
    'Per queue: where each tenant''s ready jobs start in claim order, as of a snapshot (written by broker_get; derived, not dumped).';
COMMENT ON COLUMN broker.broker_claim_hint.job_queue IS 'Queue.';
COMMENT ON COLUMN broker.broker_claim_hint.started_at IS 'pg_postmaster_start_time() of the server that wrote it (a hint of another server is ignored).';
COMMENT ON COLUMN broker.broker_claim_hint.snapshot IS 'The snapshot the positions hold for: every ready job it saw is at or after its tenant''s position.';
COMMENT ON COLUMN broker.broker_claim_hint.positions IS 'Per tenant with ready jobs then: the first of them in claim order.';
