-- sql/security/policies/broker_job_dependency.sql: row-level security of broker.broker_job_dependency.
ALTER TABLE broker.broker_job_dependency ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_job_dependency FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_job_dependency_select ON broker.broker_job_dependency FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_job_dependency_select ON broker.broker_job_dependency IS 'Read the edges of the current tenant.';
CREATE POLICY broker_job_dependency_insert ON broker.broker_job_dependency FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND EXISTS (SELECT 1 FROM broker.broker_jobs AS j
                             WHERE j.job_id OPERATOR(pg_catalog.=) broker_job_dependency.job_id
                               AND j.enqueued_by OPERATOR(pg_catalog.=) CURRENT_USER
                               AND j.complete_status OPERATOR(pg_catalog.=) 0));
COMMENT ON POLICY broker_job_dependency_insert ON broker.broker_job_dependency IS
    'Edges may only be added to pending jobs the inserting role enqueued, in the current tenant.';
