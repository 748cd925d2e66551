-- sql/guards/objects_are_the_brokers.sql: upgrade guard: schema broker holds only what pgsql_broker made.
-- ---------------------------------------------------------------------------
-- Upgrade guard: schema broker holds only what pgsql_broker made. An upgrade
-- (and sql/roles.sql, which repeats this check) must not carry on over, or
-- hand to broker_admin, an object someone else put there (say an install
-- into a schema made beforehand by another role). Made by the broker means:
-- with CREATE EXTENSION, a member of the extension (pg_depend deptype 'e'),
-- in a schema owned by the extension's owner, broker_admin or a superuser;
-- with tracked migrations, a table, function or type owned by the schema's owner
-- or broker_admin, in a schema owned by a superuser, broker_admin or the
-- upgrading role. Anything else stops the upgrade (42501, naming it).
-- ---------------------------------------------------------------------------
DO $guard$
DECLARE
    v_schema oid := pg_catalog.to_regnamespace('broker');
    v_ext    oid := (SELECT e.oid FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'pgsql_broker');
    v_admin  oid := pg_catalog.to_regrole('broker_admin');
    v_owner  oid := (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.oid OPERATOR(pg_catalog.=) v_schema);
    v_found  text;
BEGIN
    -- (= ANY of an array holding NULLs is NULL, not false, when nothing matches: hence COALESCE)
    IF NOT (COALESCE(v_owner OPERATOR(pg_catalog.=) ANY (ARRAY[v_admin,
                (SELECT e.extowner FROM pg_catalog.pg_extension AS e WHERE e.oid OPERATOR(pg_catalog.=) v_ext),
                CASE WHEN v_ext IS NULL THEN (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                               WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) END]), false)
            OR (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.oid OPERATOR(pg_catalog.=) v_owner)) THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker is owned by %, which did not install pgsql_broker',
            v_owner::pg_catalog.regrole
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'It was made before the install by another role: move your data out and drop it.';
    END IF;
    SELECT pg_catalog.string_agg((i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity) OPERATOR(pg_catalog.||)
                                 COALESCE(' (owner ' OPERATOR(pg_catalog.||) COALESCE(c.relowner, p.proowner, t.typowner)::pg_catalog.regrole::pg_catalog.text
                                          OPERATOR(pg_catalog.||) ')', ''), ', '
                                 ORDER BY (i.type OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i.identity))
      INTO v_found
      FROM pg_catalog.pg_depend AS d
     CROSS JOIN LATERAL pg_catalog.pg_identify_object(d.classid, d.objid, 0) AS i
      LEFT JOIN pg_catalog.pg_class AS c
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid OPERATOR(pg_catalog.=) d.objid
      LEFT JOIN pg_catalog.pg_proc AS p
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid OPERATOR(pg_catalog.=) d.objid
      LEFT JOIN pg_catalog.pg_type AS t
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid OPERATOR(pg_catalog.=) d.objid
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) v_schema
       AND NOT (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                AND COALESCE(d.objid OPERATOR(pg_catalog.=) v_ext, false))
       AND NOT CASE WHEN v_ext IS NOT NULL
                    THEN EXISTS (SELECT 1 FROM pg_catalog.pg_depend AS m
                                  WHERE m.classid OPERATOR(pg_catalog.=) d.classid AND m.objid OPERATOR(pg_catalog.=) d.objid
                                    AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                    AND m.refobjid OPERATOR(pg_catalog.=) v_ext AND m.deptype OPERATOR(pg_catalog.=) 'e')
                    ELSE COALESCE(COALESCE(c.relowner, p.proowner, t.typowner) OPERATOR(pg_catalog.=) ANY (ARRAY[v_owner, v_admin]), false)
               END;
    IF v_found IS NOT NULL THEN
        RAISE EXCEPTION 'pgsql_broker: schema broker holds objects pgsql_broker did not create: %', pg_catalog.left(v_found, 1000)
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Find out who made them and why, and drop them; nothing was changed.';
    END IF;
END
$guard$;
