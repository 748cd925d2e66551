-- sql/flow/limits.sql: limits on concurrency keys (caps and rates) and what a claim checks against them.

-- ---------------------------------------------------------------------------
-- Function: broker._unpark_key(p_tenant_id, p_key, p_limit)
--   Puts up to p_limit (NULL: all) jobs parked by a limit on concurrency key
--   p_key back into the claim index, first in claim order: the tenant's
--   (p_tenant_id), or every tenant's (p_tenant_id NULL). A claim parks them
--   again if the limit still holds them back, so unparking is never unsafe;
--   it wakes the runners of their queues. Returns how many.
--   Calls: _parked, _notify_queues
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._unpark_key(p_tenant_id text, p_key text, p_limit integer DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $$
DECLARE
    v_queues integer[];
BEGIN
    WITH unparked AS (
        UPDATE broker.broker_jobs AS j
           SET parked = broker._parked('none')
         WHERE j.job_id OPERATOR(pg_catalog.=) ANY (ARRAY(
                   SELECT p.job_id FROM broker.broker_jobs AS p
                    WHERE p.concurrency_key OPERATOR(pg_catalog.=) p_key
                      AND (p_tenant_id IS NULL OR p.tenant_id OPERATOR(pg_catalog.=) p_tenant_id)
                      AND p.complete_status OPERATOR(pg_catalog.=) 0
                      AND p.parked OPERATOR(pg_catalog.>=) 2
                    ORDER BY p.concurrency_key, p.tenant_id, p.job_priority DESC, p.run_after, p.job_id
                    LIMIT p_limit
                      FOR NO KEY UPDATE SKIP LOCKED))
           AND j.parked OPERATOR(pg_catalog.>=) 2
        RETURNING j.job_queue)
    SELECT pg_catalog.array_agg(DISTINCT u.job_queue) INTO v_queues FROM unparked AS u;
    IF v_queues IS NOT NULL THEN
        PERFORM broker._notify_queues(v_queues);
    END IF;
    RETURN COALESCE(pg_catalog.cardinality(v_queues), 0);
END;
$$;
COMMENT ON FUNCTION broker._unpark_key(text, text, integer) IS
    'Internal: puts up to p_limit jobs parked by a limit on a key back into the claim index (a tenant''s, or every tenant''s with NULL) and wakes their queues.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_limit(p_key, p_max_running, p_per_second, p_burst, p_all_tenants)
--   Sets the limit on concurrency key p_key for the current tenant's jobs:
--   at most p_max_running of them claimed at once (from the claim to the
--   job's end: lease recovery, autonomous jobs and every queue and runner
--   included) and at most p_per_second starts per second (a token bucket
--   that holds p_burst tokens, default p_per_second rounded up). NULL means
--   no limit of that kind; both NULL remove the limit. With p_all_tenants
--   (administrators only) the limit holds for the key's jobs of every tenant
--   together, on top of each tenant's own. A job over a limit is parked: out
--   of the claim index, so that it holds up neither the other jobs of its
--   queue nor the claim's cost; a freed slot or a new token puts it back.
--   Returns whether a limit is now in force.
-- Errors: 22004 NULL key; 22023 blank key or over 200 characters, a cap
--   below 1, a rate not above 0 (or above 1,000,000), a burst below 1 or
--   without a rate; 42501 p_all_tenants by a non-administrator, or the
--   caller may not act for the current tenant (strict tenancy).
-- Example:
--   SELECT broker.broker_set_limit('stripe', 2, NULL);        -- 2 at once
--   SELECT broker.broker_set_limit('geocoder', NULL, 10);     -- 10 starts a second
--   SELECT broker.broker_set_limit('stripe', NULL, NULL);     -- no limit
--   Calls: _is_broker_admin, broker_current_tenant, _tenant_allowed
--   Tables: writes broker_key_limit (its trigger unparks the key's jobs)
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_limit(
    p_key          text,
    p_max_running  integer,
    p_per_second   double precision,
    p_burst        integer DEFAULT NULL,
    p_all_tenants  boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_admin  boolean := broker._is_broker_admin(CURRENT_USER);
    v_tenant text := CASE WHEN COALESCE(p_all_tenants, false) THEN NULL ELSE broker.broker_current_tenant() END;
    v_burst  integer := COALESCE(p_burst, pg_catalog.ceil(p_per_second)::integer);
BEGIN
    IF p_key IS NULL THEN
        RAISE EXCEPTION 'broker_set_limit: p_key must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_key) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_key) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION 'broker_set_limit: p_key must be 1 to 200 characters and not blank' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_running OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'broker_set_limit: p_max_running must be at least 1 (NULL: no cap), got %', p_max_running
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'To hold a key''s jobs back altogether, pause their queue (broker_pause_queue).';
    END IF;
    IF p_per_second OPERATOR(pg_catalog.<=) 0 OR p_per_second OPERATOR(pg_catalog.>) 1000000 OR p_per_second = 'NaN' THEN
        RAISE EXCEPTION 'broker_set_limit: p_per_second must be above 0 and at most 1000000 (NULL: no rate), got %', p_per_second
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_burst IS NOT NULL AND (p_per_second IS NULL OR p_burst OPERATOR(pg_catalog.<) 1) THEN
        RAISE EXCEPTION 'broker_set_limit: p_burst must be at least 1, and only with p_per_second, got %', p_burst
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF COALESCE(p_all_tenants, false) AND NOT v_admin THEN
        RAISE EXCEPTION 'broker_set_limit: only administrators (broker_admin) set a limit across tenants'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT v_admin AND NOT broker._tenant_allowed(v_tenant, CURRENT_USER) THEN
        RAISE EXCEPTION 'broker_set_limit: role % may not act for tenant %', pg_catalog.quote_ident(CURRENT_USER),
            pg_catalog.quote_literal(v_tenant) USING ERRCODE = 'insufficient_privilege';
    END IF;

    IF p_max_running IS NULL AND p_per_second IS NULL THEN
        DELETE FROM broker.broker_key_limit AS l
         WHERE l.concurrency_key OPERATOR(pg_catalog.=) p_key
           AND l.tenant_id IS NOT DISTINCT FROM v_tenant;
    ELSE
        INSERT INTO broker.broker_key_limit AS l (tenant_id, concurrency_key, max_running, per_second, burst, tokens, tokens_at)
        VALUES (v_tenant, p_key, p_max_running, p_per_second, CASE WHEN p_per_second IS NOT NULL THEN v_burst END,
                CASE WHEN p_per_second IS NOT NULL THEN v_burst END, pg_catalog.statement_timestamp())
        ON CONFLICT (concurrency_key, tenant_id) DO UPDATE
           SET max_running = EXCLUDED.max_running, per_second = EXCLUDED.per_second, burst = EXCLUDED.burst,
               tokens = LEAST(COALESCE(l.tokens, EXCLUDED.tokens), EXCLUDED.burst), tokens_at = EXCLUDED.tokens_at,
               wake_at = NULL, set_by = CURRENT_USER, set_at = pg_catalog.now();
    END IF;
    RETURN p_max_running IS NOT NULL OR p_per_second IS NOT NULL;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_limit(text, integer, double precision, integer, boolean) IS
    'Sets the limit on a concurrency key for the current tenant (or, p_all_tenants, administrators: every tenant together): jobs claimed at once and starts per second; NULLs remove it.';

-- ---------------------------------------------------------------------------
-- Trigger function: broker._key_limit_changed()
--   AFTER INSERT, DELETE, or UPDATE of a limit's cap, rate or burst on
--   broker_key_limit: the jobs the key's limit parked (the row's tenant's, or
--   every tenant's for a limit across tenants) go back into the claim index,
--   and the next claims look at them under the limit as it is now. A trigger,
--   so that whoever may write the row (row-level security: a tenant its own,
--   administrators any) unparks that row's jobs and no one else's; the token
--   bookkeeping the claim writes does not fire it.
--   Calls: _unpark_key
--   Tables: writes broker_jobs
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_limit_changed()
RETURNS trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        PERFORM broker._unpark_key(OLD.tenant_id, OLD.concurrency_key);
    ELSE
        PERFORM broker._unpark_key(NEW.tenant_id, NEW.concurrency_key);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION broker._key_limit_changed() IS
    'Internal trigger: a limit was set, changed or removed; the jobs it parked go back into the claim index.';

CREATE TRIGGER broker_key_limit_changed_trg
    AFTER INSERT OR DELETE OR UPDATE OF max_running, per_second, burst ON broker.broker_key_limit
    FOR EACH ROW EXECUTE FUNCTION broker._key_limit_changed();
COMMENT ON TRIGGER broker_key_limit_changed_trg ON broker.broker_key_limit IS
    'A limit set, changed or removed: the jobs it parked go back into the claim index.';
