-- sql/security/policies/broker_schedule.sql: row-level security of broker.broker_schedule.
ALTER TABLE broker.broker_schedule ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schedule FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_schedule_select ON broker.broker_schedule FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_schedule_select ON broker.broker_schedule IS 'Read the schedules of the current tenant.';
CREATE POLICY broker_schedule_insert ON broker.broker_schedule FOR INSERT
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND created_by OPERATOR(pg_catalog.=) CURRENT_USER
                AND broker._may_run_as(run_as, CURRENT_USER)
                AND CASE WHEN autonomous THEN broker._check_autonomous('broker_schedule', execute_str, job_language, run_as, true)
                         ELSE true END);
COMMENT ON POLICY broker_schedule_insert ON broker.broker_schedule IS
    'New schedules: current tenant, owned by the inserting role, a run_as it may use.';
CREATE POLICY broker_schedule_update ON broker.broker_schedule FOR UPDATE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND broker._may_run_as(created_by, CURRENT_USER))
    WITH CHECK (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
                AND broker._tenant_allowed(tenant_id, CURRENT_USER)
                AND broker._may_run_as(created_by, CURRENT_USER)
                AND broker._may_run_as(run_as, CURRENT_USER)
                AND CASE WHEN autonomous THEN broker._check_autonomous('broker_schedule', execute_str, job_language, run_as, true)
                         ELSE true END);
COMMENT ON POLICY broker_schedule_update ON broker.broker_schedule IS
    'Schedules are changed by their owner (or members of it), with a run_as the changing role may use.';
CREATE POLICY broker_schedule_delete ON broker.broker_schedule FOR DELETE
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER)
           AND broker._may_run_as(created_by, CURRENT_USER));
COMMENT ON POLICY broker_schedule_delete ON broker.broker_schedule IS 'Schedules are removed by their owner (or members of it).';
