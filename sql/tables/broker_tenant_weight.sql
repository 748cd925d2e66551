-- ---------------------------------------------------------------------------
-- Table: broker.broker_tenant_weight
--   A tenant's weight in the fair share of a queue's claims (default 1 for a
--   tenant without a row): each claim serves the tenants that have claimable
--   jobs in proportion to their weights (broker_get). Written by
--   broker_set_tenant_weight, administrators only.
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_tenant_weight (
    tenant_id text        NOT NULL,
    weight    integer     NOT NULL,
    set_by    name        NOT NULL DEFAULT CURRENT_USER,
    set_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
    CONSTRAINT broker_tenant_weight_pkey PRIMARY KEY (tenant_id),
    CONSTRAINT broker_tenant_weight_weight_check
        CHECK (weight OPERATOR(pg_catalog.>=) 1 AND weight OPERATOR(pg_catalog.<=) 1000)
);
COMMENT ON TABLE broker.broker_tenant_weight IS
    'Tenants'' weights in the fair share of each queue''s claims (1 to 1000; 1 without a row).';
COMMENT ON COLUMN broker.broker_tenant_weight.tenant_id IS 'The tenant.';
COMMENT ON COLUMN broker.broker_tenant_weight.weight IS 'Its weight (1 to 1000).';
COMMENT ON COLUMN broker.broker_tenant_weight.set_by IS 'Administrator who set it.';
COMMENT ON COLUMN broker.broker_tenant_weight.set_at IS 'When.';
