-- sql/schedules/triggers.sql: the triggers of broker_schedule (checks, quota).
-- ---------------------------------------------------------------------------
-- The triggers of broker_schedule: what holds however a schedule is written
-- (through the functions of schedules.sql or by a raw INSERT or UPDATE).
-- ---------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Trigger function: broker._schedule_before_write()
--   Row-level BEFORE INSERT OR UPDATE on broker_schedule, SECURITY INVOKER:
--   for writers other than the administrators (enqueuers, through the
--   functions or directly) a next_fire_at in the past becomes now, so nobody
--   can make the tick walk years of missed fires; the tick itself (running as
--   the owner, broker_admin), superusers and BYPASSRLS roles are exempt.
--   Calls: _is_broker_admin
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_before_write()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.next_fire_at OPERATOR(pg_catalog.<) pg_catalog.now()
       AND (TG_OP OPERATOR(pg_catalog.=) 'INSERT' OR NEW.next_fire_at IS DISTINCT FROM OLD.next_fire_at)
       -- (_is_broker_admin covers superusers; BYPASSRLS roles are exempt here too)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles AS r
                        WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND r.rolbypassrls)
       AND NOT broker._is_broker_admin(CURRENT_USER) THEN
        NEW.next_fire_at := pg_catalog.now();
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._schedule_before_write() IS
    'Internal trigger: a next_fire_at in the past written by a role other than an administrator (broker_admin, superuser, BYPASSRLS) becomes now (no unbounded catch-up).';

CREATE TRIGGER broker_schedule_before_write_trg
    BEFORE INSERT OR UPDATE OF next_fire_at ON broker.broker_schedule
    FOR EACH ROW EXECUTE FUNCTION broker._schedule_before_write();
COMMENT ON TRIGGER broker_schedule_before_write_trg ON broker.broker_schedule IS
    'Clamps a past next_fire_at written by roles other than administrators to now.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._schedule_count()
--   Row-level on broker_schedule (BEFORE INSERT OR UPDATE OF tenant_id,
--   AFTER DELETE), SECURITY DEFINER: keeps broker_schedule_count, and
--   refuses (53400) a schedule beyond its tenant's quota,
--   max_schedules_per_tenant (broker_config, default 1,000), however it is
--   written: the tick's work grows with the due schedules, so no tenant may
--   make it arbitrarily large. Only a write of a schedule of that tenant
--   locks the tenant's count row (a trigger cannot be called directly, and
--   no role may touch the table), and a writer that the policies then
--   refuse gives it back with its (sub)transaction.
-- Calls: broker._setting_int
-- Tables: broker_schedule_count (upsert, update), broker_schedule (count,
--   when the tenant has no count row yet)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._schedule_count()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_max integer;
    v_n   integer;
BEGIN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NEW.tenant_id IS DISTINCT FROM OLD.tenant_id) THEN
        UPDATE broker.broker_schedule_count AS c SET schedules = GREATEST(c.schedules - 1, 0)
         WHERE c.tenant_id = OLD.tenant_id;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id THEN
        v_max := broker._setting_int('max_schedules_per_tenant', 1000, 1);
        INSERT INTO broker.broker_schedule_count AS c (tenant_id, schedules)
        VALUES (NEW.tenant_id, 1 + (SELECT pg_catalog.count(*) FROM broker.broker_schedule AS s
                                     WHERE s.tenant_id = NEW.tenant_id))
        ON CONFLICT (tenant_id) DO UPDATE SET schedules = c.schedules + 1
        RETURNING c.schedules INTO v_n;
        IF v_n > v_max THEN
            RAISE EXCEPTION 'tenant % already has % schedules, the most it may have', pg_catalog.quote_literal(NEW.tenant_id), v_max
                USING ERRCODE = 'configuration_limit_exceeded',
                      HINT = 'Remove schedules it no longer needs, or have broker_admin raise max_schedules_per_tenant (broker_set).';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;
COMMENT ON FUNCTION broker._schedule_count() IS
    'Internal trigger: keeps broker_schedule_count and refuses (53400) a schedule beyond the tenant''s quota max_schedules_per_tenant.';

CREATE TRIGGER broker_schedule_count_trg
    BEFORE INSERT OR UPDATE OF tenant_id ON broker.broker_schedule
    FOR EACH ROW EXECUTE FUNCTION broker._schedule_count();
COMMENT ON TRIGGER broker_schedule_count_trg ON broker.broker_schedule IS
    'The per-tenant schedule quota (max_schedules_per_tenant) and its count.';
CREATE TRIGGER broker_schedule_count_delete_trg
    AFTER DELETE ON broker.broker_schedule
    FOR EACH ROW EXECUTE FUNCTION broker._schedule_count();
COMMENT ON TRIGGER broker_schedule_count_delete_trg ON broker.broker_schedule IS
    'A removed schedule no longer counts against its tenant''s quota.';
