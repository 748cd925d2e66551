-- sql/tables/broker_job_dependency.sql: table of dependency edges.
-- ---------------------------------------------------------------------------
-- Table: broker.broker_job_dependency
--   Dependency edges: job_id waits for depends_on_job_id (one job) or for
--   every unfinished member of depends_on_group (fan-in). Exactly one target.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_job_dependency (
    dependency_id      bigint GENERATED ALWAYS AS IDENTITY,
    tenant_id          text   NOT NULL DEFAULT broker.broker_current_tenant(),
    job_id             bigint NOT NULL,
    depends_on_job_id  bigint,
    depends_on_group   text,
    CONSTRAINT broker_job_dependency_pkey PRIMARY KEY (dependency_id),
    CONSTRAINT broker_job_dependency_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES broker.broker_jobs (job_id) ON DELETE CASCADE,
    CONSTRAINT broker_job_dependency_depends_on_job_id_fkey FOREIGN KEY (depends_on_job_id)
        REFERENCES broker.broker_jobs (job_id) ON DELETE CASCADE,
    CONSTRAINT broker_job_dependency_one_target_check
        CHECK ((depends_on_job_id IS NULL) OPERATOR(pg_catalog.<>) (depends_on_group IS NULL)),
    CONSTRAINT broker_job_dependency_not_self_check CHECK (depends_on_job_id OPERATOR(pg_catalog.<>) job_id),
    CONSTRAINT broker_job_dependency_group_check CHECK (pg_catalog.btrim(depends_on_group) OPERATOR(pg_catalog.<>) '')
);

CREATE UNIQUE INDEX broker_job_dependency_job_idx
    ON broker.broker_job_dependency (job_id, depends_on_job_id) WHERE depends_on_job_id IS NOT NULL;
CREATE UNIQUE INDEX broker_job_dependency_job_group_idx
    ON broker.broker_job_dependency (job_id, depends_on_group) WHERE depends_on_group IS NOT NULL;
-- Deleting a job (purge) deletes its edges through the foreign key's ON DELETE CASCADE, which
-- looks them up by job_id alone: the partial indexes above cannot serve that.
CREATE INDEX broker_job_dependency_job_id_idx ON broker.broker_job_dependency (job_id);
CREATE INDEX broker_job_dependency_target_job_idx
    ON broker.broker_job_dependency (depends_on_job_id) WHERE depends_on_job_id IS NOT NULL;
CREATE INDEX broker_job_dependency_target_group_idx
    ON broker.broker_job_dependency (tenant_id, depends_on_group) WHERE depends_on_group IS NOT NULL;

COMMENT ON TABLE broker.broker_job_dependency IS
    'Dependency edges: a job waits for one job (depends_on_job_id) or for every unfinished job of a group (depends_on_group).';
COMMENT ON COLUMN broker.broker_job_dependency.dependency_id IS 'Edge id.';
COMMENT ON COLUMN broker.broker_job_dependency.tenant_id IS 'Tenant of both ends (dependencies never cross tenants).';
COMMENT ON COLUMN broker.broker_job_dependency.job_id IS 'The waiting job.';
COMMENT ON COLUMN broker.broker_job_dependency.depends_on_job_id IS 'Target job, for an id dependency.';
COMMENT ON COLUMN broker.broker_job_dependency.depends_on_group IS 'Target group, for a group (fan-in) dependency.';
