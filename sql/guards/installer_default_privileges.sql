-- sql/guards/installer_default_privileges.sql: install and upgrade guard: the installing role's default privileges give nobody the broker.
-- ---------------------------------------------------------------------------
-- Install and upgrade guard: what this script creates gets the default
-- privileges of the role running it, and those set for every schema (ALTER
-- DEFAULT PRIVILEGES without IN SCHEMA, as for a read-only or reporting role)
-- reach into schema broker too. sql/security/grants.sql and sql/roles.sql
-- take everything from PUBLIC, not from other roles, so a role granted
-- EXECUTE on functions and USAGE on schemas that way could call broker_get
-- (SECURITY DEFINER) and claim every tenant's jobs. So the script stops
-- (55000, nothing created) while the running role has default privileges
-- for every schema that grant to another role; defaults that only take from
-- PUBLIC, or that name another schema, are fine.
-- ---------------------------------------------------------------------------
DO $guard$
DECLARE
    v_found text;
BEGIN
    SELECT pg_catalog.string_agg(DISTINCT pg_catalog.format('%s on %s to %s', a.privilege_type,
               CASE WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'r' THEN 'tables'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'S' THEN 'sequences'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'f' THEN 'functions'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'T' THEN 'types'
                    WHEN d.defaclobjtype OPERATOR(pg_catalog.=) 'n' THEN 'schemas' ELSE 'objects' END,
               a.grantee::pg_catalog.regrole), ', ')
      INTO v_found
      FROM pg_catalog.pg_default_acl AS d, pg_catalog.aclexplode(d.defaclacl) AS a
     WHERE d.defaclrole OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                                 WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
       AND d.defaclnamespace OPERATOR(pg_catalog.=) 0
       AND a.grantee OPERATOR(pg_catalog.<>) ALL (ARRAY[0, d.defaclrole]::pg_catalog.oid[]);
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'pgsql_broker: the installing role % has default privileges for every schema that would grant what this creates in schema broker: %; nothing was changed',
            pg_catalog.quote_ident(CURRENT_USER), pg_catalog.left(v_found, 1000)
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run it as a role without them, or remove them for the install (ALTER DEFAULT PRIVILEGES REVOKE ...; psql \ddp lists them) and set them again IN SCHEMA the schemas they are meant for.';
    END IF;
END
$guard$;
