-- sql/security/policies/broker_finished_count.sql: row-level security of broker.broker_finished_count (a tenant reads its own counts; only its triggers and the SECURITY DEFINER stats write them).
ALTER TABLE broker.broker_finished_count ENABLE ROW LEVEL SECURITY;
ALTER TABLE broker.broker_finished_count FORCE ROW LEVEL SECURITY;
CREATE POLICY broker_finished_count_select ON broker.broker_finished_count FOR SELECT
    USING ((tenant_id OPERATOR(pg_catalog.=) broker.broker_current_tenant()
            AND broker._tenant_allowed(tenant_id, CURRENT_USER))
           OR broker._is_broker_admin(CURRENT_USER));
COMMENT ON POLICY broker_finished_count_select ON broker.broker_finished_count IS
    'A tenant reads its own finished counts (pgsql-broker status as its login); administrators all.';
