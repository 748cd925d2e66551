-- sql/guards/fresh_schema.sql: install guard: schema broker is the installer's own and new.
-- ---------------------------------------------------------------------------
-- Install guard: the schema broker this script fills must be the installer's
-- own and new. CREATE EXTENSION (control file: schema = broker, not
-- relocatable) creates schema broker, or uses one that already exists; the
-- migrations path creates it just before this script. A schema made
-- beforehand by another role, or holding anything, would be adopted: its
-- owner could replace or drop what is installed, and sql/roles.sql would make
-- broker_admin the owner of what it planted. So the install stops (42P06,
-- nothing is created) unless schema broker is owned by the installing role, a
-- superuser or broker_admin (a restore of pg_dump output makes it so first,
-- and DROP EXTENSION leaves it so), lets no other role create in it, has no
-- default privileges, and holds nothing but this extension.
-- ---------------------------------------------------------------------------
DO $guard$
DECLARE
    v_schema  oid := pg_catalog.to_regnamespace('broker');
    v_owner   oid;
    v_found   text;
BEGIN
    IF v_schema IS NULL THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker does not exist' USING ERRCODE = 'invalid_schema_name';
    END IF;
    SELECT n.nspowner INTO v_owner FROM pg_catalog.pg_namespace AS n WHERE n.oid OPERATOR(pg_catalog.=) v_schema;
    IF v_owner OPERATOR(pg_catalog.<>) (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) v_owner)
       AND COALESCE(v_owner OPERATOR(pg_catalog.<>) pg_catalog.to_regrole('broker_admin')::pg_catalog.oid, true) THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker already exists and is owned by %, not by the installing role %',
            v_owner::pg_catalog.regrole, CURRENT_USER
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'Another role made it: find out who and why, drop it, then install again.';
    END IF;
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO v_found
      FROM pg_catalog.pg_namespace AS n, pg_catalog.aclexplode(n.nspacl) AS a
     WHERE n.oid OPERATOR(pg_catalog.=) v_schema AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner
       AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE';
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker already exists and grants CREATE on it to %', v_found
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'Others could create objects in it: drop it (or REVOKE ALL ON SCHEMA broker from them), then install again.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_default_acl AS d WHERE d.defaclnamespace OPERATOR(pg_catalog.=) v_schema) THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker already exists and has default privileges for objects made in it'
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'Drop it (or its ALTER DEFAULT PRIVILEGES ... IN SCHEMA broker), then install again.';
    END IF;
    -- everything in a schema depends on it in pg_depend (the extension being created too)
    SELECT pg_catalog.string_agg((i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity), ', '
                                 ORDER BY (i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity))
      INTO v_found
      FROM pg_catalog.pg_depend AS d
     CROSS JOIN LATERAL pg_catalog.pg_identify_object(d.classid, d.objid, 0) AS i
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) v_schema
       AND NOT (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                AND d.objid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT e.oid FROM pg_catalog.pg_extension AS e
                                                               WHERE e.extname OPERATOR(pg_catalog.=) 'pgsql_broker')));
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker already exists and holds objects pgsql_broker did not create: %',
            pg_catalog.left(v_found, 1000)
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'Find out who made them and why; drop them (or the schema), then install again.';
    END IF;
END
$guard$;
