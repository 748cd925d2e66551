-- ---------------------------------------------------------------------------
-- Row-level security of the operator tables (attempt history, job actions,
-- paused queues), as for the other tables (sql/policies.sql): ENABLE + FORCE,
-- a role without BYPASSRLS sees and writes only rows of its current tenant
-- (and under strict tenancy only of tenants mapped to it).
-- ---------------------------------------------------------------------------

-- broker_job_attempts: written only by the runtime functions
ALTER TABLE broker.broker_job_attempts ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_job_attempts FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_job_attempts_select ON broker.broker_job_attempts FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_job_attempts_select ON broker.broker_job_attempts IS 'Read the attempts of the current tenant''s jobs.';

-- broker_job_actions: inserting one performs it (trigger broker_job_actions_trg)
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

-- broker_queue_pause: a tenant's own pauses; pauses for every tenant (tenant_id NULL) are the administrators'
ALTER TABLE broker.broker_queue_pause ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_queue_pause FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_queue_pause_select ON broker.broker_queue_pause FOR SELECT
    USING (tenant_id IS NULL
           OR (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
               AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_select ON broker.broker_queue_pause IS
    'Read the pauses for every tenant and those of the current tenant (administrators: all).';
CREATE POLICY broker_queue_pause_insert ON broker.broker_queue_pause FOR INSERT
    WITH CHECK ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                 AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                 AND paused_by OPERATOR(pg_catalog.=) CURRENT_USER)
                OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_insert ON broker.broker_queue_pause IS
    'A tenant pauses its own jobs of a queue; administrators pause a queue for every tenant.';
CREATE POLICY broker_queue_pause_delete ON broker.broker_queue_pause FOR DELETE
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_queue_pause_delete ON broker.broker_queue_pause IS
    'A tenant resumes its own jobs of a queue; administrators any pause.';
