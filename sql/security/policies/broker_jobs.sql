-- sql/security/policies/broker_jobs.sql: row-level security of broker.broker_jobs.
ALTER TABLE broker.broker_jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_jobs FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_jobs_select ON broker.broker_jobs FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_jobs_select ON broker.broker_jobs IS 'Read the jobs of the current tenant (if the role may act for it).';
CREATE POLICY broker_jobs_insert ON broker.broker_jobs FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND enqueued_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND broker._may_run_as(run_as, CURRENT_USER)
                AND (idempotency_key IS NULL OR NOT pg_catalog.starts_with(idempotency_key, 'broker_schedule:'))
                AND complete_status OPERATOR(pg_catalog.=) 0
                AND (job_language OPERATOR(pg_catalog.<>) 'task' OR broker._task_queue_is(job_name, job_queue))
                AND attempts OPERATOR(pg_catalog.=) 0
                AND pending_deps OPERATOR(pg_catalog.=) 0
                AND CASE WHEN autonomous THEN broker._check_autonomous('broker_jobs', execute_str, job_language, run_as, true)
                         ELSE true END);
COMMENT ON POLICY broker_jobs_insert ON broker.broker_jobs IS
    'New jobs: current tenant, enqueued_by = the inserting role, a run_as it may use, fresh state, a task in its name''s queue, an autonomous job''s SQL and role checked; keys broker_schedule:* are the tick''s.';
CREATE POLICY broker_jobs_update ON broker.broker_jobs FOR UPDATE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND complete_status OPERATOR(pg_catalog.=) 0)
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_jobs_update ON broker.broker_jobs IS
    'Updates (enqueuers: cancel_reason only, by column privilege) touch pending jobs of the current tenant.';
CREATE POLICY broker_jobs_delete ON broker.broker_jobs FOR DELETE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_jobs_delete ON broker.broker_jobs IS 'Deletes (for roles granted DELETE) stay in the current tenant.';
