-- ---------------------------------------------------------------------------
-- Row-level security. Every broker table has ENABLE + FORCE ROW LEVEL
-- SECURITY. A role without BYPASSRLS sees and writes only rows of the tenant
-- in broker.tenant_id (default 'default'), and under strict tenancy only of
-- tenants mapped to it in broker_tenant_roles. The owner (broker_admin, or the
-- superuser that created the extension) bypasses them, and so do the
-- SECURITY DEFINER runtime functions, which is how one runner serves every
-- tenant without BYPASSRLS itself. Predicates use OPERATOR(pg_catalog.=) and
-- schema-qualified calls; CURRENT_USER is evaluated as the querying role.
-- ---------------------------------------------------------------------------

-- broker_jobs ---------------------------------------------------------------
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
                AND attempts OPERATOR(pg_catalog.=) 0
                AND pending_deps OPERATOR(pg_catalog.=) 0
                AND CASE WHEN autonomous THEN broker._check_autonomous('broker_jobs', execute_str, job_language, run_as, true)
                         ELSE true END);
COMMENT ON POLICY broker_jobs_insert ON broker.broker_jobs IS
    'New jobs: current tenant, enqueued_by = the inserting role, a run_as it may use, fresh state, an autonomous job''s SQL and role checked; keys broker_schedule:* are the tick''s.';
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

-- broker_job_dependency -----------------------------------------------------
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

-- broker_schedule_count: no policy, no grant: only the quota trigger (SECURITY DEFINER) touches it
ALTER TABLE broker.broker_schedule_count ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schedule_count FORCE ROW LEVEL SECURITY;

-- broker_deferred_release: written and read only by the runtime functions
ALTER TABLE broker.broker_deferred_release ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_deferred_release FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_deferred_release_select ON broker.broker_deferred_release FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_deferred_release_select ON broker.broker_deferred_release IS
    'Read the pending releases of the current tenant.';

-- broker_schedule -----------------------------------------------------------
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

-- database-wide tables (tenant 'default') -----------------------------------
ALTER TABLE broker.broker_queueinstance ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_queueinstance FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_queueinstance_tenant ON broker.broker_queueinstance FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_queueinstance_tenant ON broker.broker_queueinstance IS
    'Instances are database-wide (tenant default); written only through the instance functions.';

ALTER TABLE broker.broker_schema_migrations ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_schema_migrations FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_schema_migrations_tenant ON broker.broker_schema_migrations IS
    'Migrations are database-wide (tenant default); written only by broker_admin.';

ALTER TABLE broker.broker_config ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_config FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_config_tenant ON broker.broker_config FOR SELECT
    USING (tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
           AND broker._tenant_allowed(tenant_id, CURRENT_USER));
COMMENT ON POLICY broker_config_tenant ON broker.broker_config IS 'Options are database-wide (tenant default); written only by broker_admin.';

-- broker_tenant_roles: keyed on the role, since it defines who may act for a tenant.
ALTER TABLE broker.broker_tenant_roles ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_tenant_roles FORCE ROW LEVEL SECURITY;
-- (to_regrole: a mapping left behind by a dropped role is hidden, not an error)
CREATE POLICY broker_tenant_roles_own ON broker.broker_tenant_roles FOR SELECT
    USING (pg_catalog.pg_has_role(CURRENT_USER, pg_catalog.to_regrole(pg_catalog.quote_ident(role_name)), 'MEMBER'));
COMMENT ON POLICY broker_tenant_roles_own ON broker.broker_tenant_roles IS 'A role sees the tenant mappings of the roles it belongs to.';
