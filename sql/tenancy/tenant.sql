-- sql/tenancy/tenant.sql: the current tenant (setting broker.tenant_id); table defaults call it.
-- ---------------------------------------------------------------------------
-- Function: broker.broker_current_tenant()
--   The tenant this transaction acts for: the broker.tenant_id setting, or
--   'default' when it is unset or empty.
--   No SET search_path on purpose: the column defaults and every row-level
--   security policy call it once per row, and only a function without SET
--   clauses is inlined into the query. Every
--   name in it is schema-qualified, so no search_path can change its meaning
--   (listed in sql/pgspot-no-search-path.txt for pgspot).
-- Example:
--   SELECT broker.broker_current_tenant();   -- 'default' unless broker.tenant_id is set
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_current_tenant()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN pg_catalog.current_setting('broker.tenant_id', true) OPERATOR(pg_catalog.<>) ''
                THEN pg_catalog.current_setting('broker.tenant_id', true) ELSE 'default' END
$$;
COMMENT ON FUNCTION broker.broker_current_tenant() IS
    'Tenant of the current transaction: broker.tenant_id, or ''default'' when unset.';

-- ---------------------------------------------------------------------------
-- Function: broker._set_tenant(p_fn, p_tenant_id)
--   The one rule for a tenant id a caller names (broker_set_tenant, and the
--   p_tenant_id of the enqueue and schedule functions): not NULL, 1 to 200
--   characters, not blank. Sets broker.tenant_id for the current transaction
--   (set_config with is_local) and returns it.
-- Errors: 22004 NULL; 22023 blank or longer than 200 characters.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._set_tenant(p_fn text, p_tenant_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_tenant_id IS NULL THEN
        RAISE EXCEPTION '%: tenant id must not be NULL', p_fn
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF pg_catalog.btrim(p_tenant_id) OPERATOR(pg_catalog.=) '' OR pg_catalog.length(p_tenant_id) OPERATOR(pg_catalog.>) 200 THEN
        RAISE EXCEPTION '%: tenant id must be 1 to 200 characters and not blank', p_fn
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN pg_catalog.set_config('broker.tenant_id', p_tenant_id, true);
END;
$$;
COMMENT ON FUNCTION broker._set_tenant(text, text) IS
    'Internal: checks a tenant id (22004 NULL, 22023 blank or over 200 characters) and sets broker.tenant_id for the transaction.';

-- ---------------------------------------------------------------------------
-- Function: broker._call_tenant(p_fn, p_tenant_id)
--   The start of a call that may name its tenant (p_tenant_id of the
--   schedule functions): returns broker.tenant_id as it was, and when
--   p_tenant_id is not NULL sets it by broker._set_tenant's rules.
--   broker._end_call_tenant puts the returned value back.
-- Errors: those of broker._set_tenant.
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._call_tenant(p_fn text, p_tenant_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_saved text := pg_catalog.current_setting('broker.tenant_id', true);
BEGIN
    IF p_tenant_id IS NOT NULL THEN
        PERFORM broker._set_tenant(p_fn, p_tenant_id);
    END IF;
    RETURN v_saved;
END;
$$;
COMMENT ON FUNCTION broker._call_tenant(text, text) IS
    'Internal: sets the tenant a call names (when not NULL) and returns broker.tenant_id as it was.';

-- ---------------------------------------------------------------------------
-- Function: broker._end_call_tenant(p_tenant_id, p_saved)
--   The end of such a call: when it named a tenant, broker.tenant_id is
--   p_saved again (the transaction's own tenant).
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._end_call_tenant(p_tenant_id text, p_saved text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_tenant_id IS NOT NULL THEN
        PERFORM pg_catalog.set_config('broker.tenant_id', COALESCE(p_saved, ''), true);
    END IF;
END;
$$;
COMMENT ON FUNCTION broker._end_call_tenant(text, text) IS
    'Internal: after a call that named its tenant, broker.tenant_id as it was before the call.';

-- ---------------------------------------------------------------------------
-- Function: broker._whole_transaction(p_statement_start, p_transaction_start, p_query)
--   Whether a statement is its own transaction, from what the server knows of
--   it (broker_set_tenant hands in statement_timestamp(),
--   transaction_timestamp() and current_query()): its transaction began with
--   the message that carried it (both timestamps are taken once per message)
--   and that message held no other statement. So: true for an autocommit
--   statement sent alone (psql, the simple query protocol), false inside
--   BEGIN ... COMMIT and for several statements sent as one message (their
--   implicit transaction spans them all). A driver's extended protocol sends
--   the statement in messages after the one that began its transaction, so
--   there it is false even in autocommit (docs/security.md#tenants).
--   A semicolon inside a literal counts as a second statement (no warning).
-- Example:
--   SELECT broker._whole_transaction(statement_timestamp(), transaction_timestamp(), current_query());
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._whole_transaction(p_statement_start timestamptz, p_transaction_start timestamptz, p_query text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p_statement_start OPERATOR(pg_catalog.=) p_transaction_start
           AND pg_catalog.strpos(pg_catalog.rtrim(COALESCE(p_query, ''), E'; \t\r\n'), ';') OPERATOR(pg_catalog.=) 0
$$;
COMMENT ON FUNCTION broker._whole_transaction(timestamptz, timestamptz, text) IS
    'Internal: a statement sent alone whose transaction began with it (autocommit), from its start times and query text.';

-- ---------------------------------------------------------------------------
-- Function: broker.broker_set_tenant(p_tenant_id)
--   Sets broker.tenant_id for the current transaction only (set_config with
--   is_local), so a pooled connection never carries a tenant over. Called as
--   its own autocommit statement it changes nothing that follows (the
--   transaction ends with it): it then warns (01000), naming p_tenant_id of
--   the enqueue functions as the way to name a tenant in one call.
-- Errors: 22004 NULL; 22023 blank or longer than 200 characters.
-- Example:
--   BEGIN;
--   SELECT broker.broker_set_tenant('acme');
--   SELECT * FROM broker.broker_add_job('acme report', 'CALL acme.report()');
--   COMMIT;
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker.broker_set_tenant(p_tenant_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_tenant text := broker._set_tenant('broker_set_tenant', p_tenant_id);
BEGIN
    IF broker._whole_transaction(pg_catalog.statement_timestamp(), pg_catalog.transaction_timestamp(),
                                 pg_catalog.current_query()) THEN
        RAISE WARNING 'broker_set_tenant: this statement is a transaction of its own: tenant % ends with it', pg_catalog.quote_literal(v_tenant)
            USING ERRCODE = '01000',
                  HINT = 'Call it inside BEGIN ... COMMIT, before the statements it is for, or name the tenant in the call: broker_add_job(..., p_tenant_id => ''acme'').';
    END IF;
    RETURN v_tenant;
END;
$$;
COMMENT ON FUNCTION broker.broker_set_tenant(text) IS
    'Sets broker.tenant_id for the current transaction only; new jobs and queries act for that tenant (warns when it is its own transaction).';
