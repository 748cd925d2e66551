-- sql/tables/broker_schedule_count.sql: table of schedule counts per tenant (the quota).
-- ---------------------------------------------------------------------------
-- Table: broker.broker_schedule_count
--   How many schedules each tenant has, kept by the trigger
--   broker_schedule_count_trg for the quota max_schedules_per_tenant. A
--   write of a schedule updates its tenant's row, so two writers of one
--   tenant serialise on that row lock (and a REPEATABLE READ writer that
--   would miss the other's commit fails to serialise instead of counting
--   short); no role is granted anything on it, so no other tenant can hold
--   the lock. Derived data: a missing row is counted again from
--   broker_schedule at the tenant's next new schedule (so it is not dumped).
-- ---------------------------------------------------------------------------
CREATE TABLE broker.broker_schedule_count (
    tenant_id  text    NOT NULL,
    schedules  integer NOT NULL,
    CONSTRAINT broker_schedule_count_pkey PRIMARY KEY (tenant_id),
    CONSTRAINT broker_schedule_count_schedules_check CHECK (schedules OPERATOR(pg_catalog.>=) 0)
);
COMMENT ON TABLE broker.broker_schedule_count IS
    'Schedules per tenant, kept by a trigger for the quota max_schedules_per_tenant (derived; recounted when missing).';
COMMENT ON COLUMN broker.broker_schedule_count.tenant_id IS 'Tenant.';
COMMENT ON COLUMN broker.broker_schedule_count.schedules IS 'How many schedules the tenant has.';
