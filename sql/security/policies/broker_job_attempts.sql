-- sql/security/policies/broker_job_attempts.sql: row-level security of broker.broker_job_attempts (written only by the runtime functions).
ALTER TABLE broker.broker_job_attempts ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_job_attempts FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_job_attempts_select ON broker.broker_job_attempts FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_job_attempts_select ON broker.broker_job_attempts IS 'Read the attempts of the current tenant''s jobs.';
