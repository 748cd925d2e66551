-- sql/security/policies/broker_job_actions.sql: row-level security of broker.broker_job_actions (inserting a row performs it: trigger broker_job_actions_trg).
ALTER TABLE broker.broker_job_actions ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_job_actions FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_job_actions_select ON broker.broker_job_actions FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_job_actions_select ON broker.broker_job_actions IS 'Read the actions on the current tenant''s jobs.';
CREATE POLICY broker_job_actions_insert ON broker.broker_job_actions FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND requested_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND EXISTS (SELECT 1 FROM broker.broker_jobs AS j
                             WHERE j.job_id OPERATOR(pg_catalog.=) broker_job_actions.job_id
                               AND j.tenant_id OPERATOR(pg_catalog.=) broker_job_actions.tenant_id));
COMMENT ON POLICY broker_job_actions_insert ON broker.broker_job_actions IS
    'Actions: on a job of the current tenant (one the inserting role can read), in the inserting role''s name.';
