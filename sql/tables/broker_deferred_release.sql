-- sql/tables/broker_deferred_release.sql: table of dependency releases not applied yet.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_deferred_release
--   Dependency releases not applied yet. Completing a job lowers the
--   pending_deps of at most 500 of the pending jobs waiting on it in its own
--   transaction; the rest are written here, one row per completion (job ids
--   ascending, each with the amount to subtract), and the runner's
--   maintenance applies them (broker_apply_deferred_releases, never on a
--   claim's path). So a job that thousands wait on completes in bounded time,
--   and its dependents become claimable soon after. Until then they count as
--   blocked: their pending_deps includes the releases still listed here.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_deferred_release (
    release_id  bigint      GENERATED ALWAYS AS IDENTITY,
    tenant_id   text        NOT NULL,
    job_ids     bigint[]    NOT NULL,
    amounts     integer[]   NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_deferred_release_pkey PRIMARY KEY (release_id),
    CONSTRAINT broker_deferred_release_arrays_check
        CHECK (pg_catalog.cardinality(job_ids) OPERATOR(pg_catalog.>=) 1
               AND pg_catalog.cardinality(job_ids) OPERATOR(pg_catalog.=) pg_catalog.cardinality(amounts))
);

COMMENT ON TABLE broker.broker_deferred_release IS
    'Dependency releases still to apply: pending jobs whose pending_deps a completed job lowers later (broker_apply_deferred_releases).';
COMMENT ON COLUMN broker.broker_deferred_release.release_id IS 'Release id (applied oldest first).';
COMMENT ON COLUMN broker.broker_deferred_release.tenant_id IS 'Tenant of the completed job and its dependents.';
COMMENT ON COLUMN broker.broker_deferred_release.job_ids IS 'Pending dependents still to release, ascending.';
COMMENT ON COLUMN broker.broker_deferred_release.amounts IS 'For each of job_ids, how much its pending_deps goes down.';
COMMENT ON COLUMN broker.broker_deferred_release.created_at IS 'When the completion deferred them.';
