-- CREATE EXTENSION pgsql_broker installs only into a schema broker it may call its own: new,
-- or made by the installing role, empty, with no privileges or default privileges for
-- anyone else. A squatter's schema (or objects in it) used to be adopted: roles.sql then
-- gave broker_admin every function in it, a planted SECURITY DEFINER one included.
-- (Runs on the extension and the migrations install alike: both are dropped first.)
BEGIN;
SELECT plan(13);

DROP SCHEMA broker CASCADE;
CREATE ROLE broker_test_squatter NOLOGIN;
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO broker_test_squatter', current_database()); END $$;
CREATE FUNCTION pg_temp.owner_of_broker() RETURNS text LANGUAGE sql AS
    $$ SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'broker' $$;

-- 1. the squatter's schema, with a SECURITY DEFINER function it lets the database owner call
SET LOCAL ROLE broker_test_squatter;
CREATE SCHEMA broker;
CREATE FUNCTION broker.evil(sql text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN EXECUTE sql; END $$;
GRANT EXECUTE ON FUNCTION broker.evil(text) TO pg_database_owner;
RESET ROLE;
SELECT throws_ok('CREATE EXTENSION pgsql_broker', '42P06', NULL, 'a squatter''s schema broker is refused (42P06)');
SELECT throws_like('CREATE EXTENSION pgsql_broker', '%schema broker already exists and is owned by broker_test_squatter%',
                   'the error names the owner');
SELECT is((SELECT proowner::regrole::text FROM pg_proc WHERE proname = 'evil'), 'broker_test_squatter',
          'the planted function keeps its owner');
SELECT is((SELECT count(*)::int FROM pg_extension WHERE extname = 'pgsql_broker'), 0, 'no extension was created');

-- 2. the same schema, empty
DROP FUNCTION broker.evil(text);
SELECT throws_ok('CREATE EXTENSION pgsql_broker', '42P06', NULL, 'an empty schema of another role is refused');

-- 3. the installer's schema holding an object the broker did not make
DROP SCHEMA broker;
CREATE SCHEMA broker;
CREATE TABLE broker.broker_schema_migrations_lookalike (version text);
SELECT throws_like('CREATE EXTENSION pgsql_broker', '%holds objects pgsql_broker did not create: table broker.broker_schema_migrations_lookalike%',
                   'the installer''s schema with a foreign object is refused, the object named');
SELECT throws_ok('CREATE EXTENSION pgsql_broker', '42P06', NULL, '... with 42P06');
DROP TABLE broker.broker_schema_migrations_lookalike;

-- 4. the installer's empty schema, but another role may create in it
GRANT USAGE, CREATE ON SCHEMA broker TO broker_test_squatter;
SELECT throws_like('CREATE EXTENSION pgsql_broker', '%grants CREATE on it to broker_test_squatter%',
                   'the installer''s schema where another role may create is refused');
REVOKE CREATE ON SCHEMA broker FROM broker_test_squatter;  -- USAGE stays: it plants nothing

-- 5. the installer's empty schema with default privileges for objects made in it
ALTER DEFAULT PRIVILEGES IN SCHEMA broker GRANT EXECUTE ON FUNCTIONS TO broker_test_squatter;
SELECT throws_like('CREATE EXTENSION pgsql_broker', '%default privileges%',
                   'the installer''s schema with default privileges is refused');
ALTER DEFAULT PRIVILEGES IN SCHEMA broker REVOKE EXECUTE ON FUNCTIONS FROM broker_test_squatter;

-- 6. the installer's own empty schema is fine (USAGE for others too: DROP EXTENSION leaves
--    broker_admin's schema, granted to the broker roles), and so is a new one
SELECT lives_ok('CREATE EXTENSION pgsql_broker', 'the installer''s own empty schema broker is used');
SELECT is(pg_temp.owner_of_broker(), current_user::text, 'schema broker is the installer''s');
DROP EXTENSION pgsql_broker;
DROP SCHEMA broker;
SELECT lives_ok('CREATE EXTENSION pgsql_broker', 'a new schema broker is created and used');
SELECT ok(to_regprocedure('broker.broker_get(integer, bigint, integer, integer, uuid)') IS NOT NULL, 'the broker is installed');

SELECT * FROM finish();
ROLLBACK;
