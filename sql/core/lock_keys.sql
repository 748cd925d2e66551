-- sql/core/lock_keys.sql: the advisory-lock keys (dependency groups and jobs, the active instance, the
-- finished counts' merge, concurrency keys).
-- ---------------------------------------------------------------------------
-- Function: broker._dependency_lock_key(p_tenant_id, p_group, p_job_id)
--   The one place the dependency-lock key of a group (p_group) or of a job
--   id (p_job_id, when p_group is NULL) of a tenant is computed; every taker
--   of these locks calls it. A bigint advisory key: the high 32 bits are the
--   tenant's (hashtext of its name), the low 32 bits 'br' (0x6272) then one
--   of 1,024 buckets for groups, one of 1,024 more for job ids. So two
--   tenants never share a key (unless their names hash alike: strict tenancy
--   names are the administrator's, see README), a tenant holds at most 2,048
--   keys, and, within a tenant, group keys sort before job keys.
--   SQL without SET search_path on purpose: the planner inlines it into the
--   queries that take the keys (the jobs' INSERT trigger computes one per new
--   job); every function and operator is schema-qualified.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._dependency_lock_key(p_tenant_id text, p_group text, p_job_id bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (pg_catalog.hashtext(p_tenant_id)::bigint OPERATOR(pg_catalog.<<) 32)
           OPERATOR(pg_catalog.|)
           (1651638272 OPERATOR(pg_catalog.+)  -- 0x62720000
            CASE WHEN p_group IS NOT NULL THEN pg_catalog.hashtext(p_group) OPERATOR(pg_catalog.&) 1023
                 ELSE 1024 OPERATOR(pg_catalog.+) (pg_catalog.hashint8(p_job_id) OPERATOR(pg_catalog.&) 1023) END)::bigint
$$;
COMMENT ON FUNCTION broker._dependency_lock_key(text, text, bigint) IS
    'Internal: the advisory key (bigint, tenant in the high half) of a group, or of a job id, of a tenant; no two tenants share one.';

-- ---------------------------------------------------------------------------
-- Function: broker._instance_lock_key()
--   The session advisory lock (two int4 keys) that the active instance holds.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._instance_lock_key(OUT classid integer, OUT objid integer)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 1651665664, 0 $$;
COMMENT ON FUNCTION broker._instance_lock_key() IS
    'Internal: advisory lock key held by the active runner instance of this database.';

-- ---------------------------------------------------------------------------
-- Function: broker._finished_merge_lock_key()
--   The transaction advisory lock (two int4 keys) that one merge of the
--   finished counts at a time holds (broker._merge_finished_counts). Its
--   class is the instance lock's; objid 0 is that lock, 1 the installer's
--   (pgsql-broker install holds it while it migrates, before this schema
--   may exist: runner/pgsql_broker/install/installer.py), 2 this one.
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._finished_merge_lock_key(OUT classid integer, OUT objid integer)
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 1651665664, 2 $$;
COMMENT ON FUNCTION broker._finished_merge_lock_key() IS
    'Internal: advisory lock key of the merge of the finished counts (one merge at a time).';

-- ---------------------------------------------------------------------------
-- Function: broker._key_lock_key(p_tenant_id, p_key)
--   The transaction advisory-lock key of a concurrency key's limit: the
--   tenant's limit on p_key, or, with p_tenant_id NULL, the limit on p_key
--   across tenants. A claim takes it exclusively (never waiting: it passes
--   the key over when it cannot) while it counts the key's running jobs and
--   parks those over the limit; a job that leaves running takes it shared
--   before it unparks the key's parked jobs, so that it sees every job a
--   claim parked. High 32 bits the tenant's hash (0 for every tenant), low
--   32 the key's.
--   SQL without SET search_path on purpose (inlined; every name qualified).
--   Calls: none
--   Tables: none
-- ---------------------------------------------------------------------------
CREATE FUNCTION broker._key_lock_key(p_tenant_id text, p_key text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (COALESCE(pg_catalog.hashtext(p_tenant_id), 0)::bigint OPERATOR(pg_catalog.<<) 32)
           OPERATOR(pg_catalog.#) (pg_catalog.hashtext('key:' OPERATOR(pg_catalog.||) p_key)::bigint
                                   OPERATOR(pg_catalog.&) 4294967295)
$$;
COMMENT ON FUNCTION broker._key_lock_key(text, text) IS
    'Internal: the advisory-lock key of a tenant''s limit on a concurrency key (p_tenant_id NULL: the limit across tenants).';
