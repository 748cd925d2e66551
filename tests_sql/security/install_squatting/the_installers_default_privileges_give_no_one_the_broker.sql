-- Default privileges of the installing role for every schema (ALTER DEFAULT PRIVILEGES without IN
-- SCHEMA, common for read-only or reporting roles) would reach into schema broker: what the install or
-- an upgrade creates would be granted to those roles, and roles.sql revokes from PUBLIC only. A
-- database owner's `GRANT EXECUTE ON FUNCTIONS` and `USAGE ON SCHEMAS` let a role with no broker role
-- claim and run every tenant's jobs (broker_get is SECURITY DEFINER). Install and upgrade refuse
-- (55000, naming them, creating nothing); defaults that only take from PUBLIC, or that name another
-- schema, are fine. (The install script is the same on both install paths.)
BEGIN;
SELECT plan(9);

CREATE ROLE broker_test_reader NOLOGIN;
DROP SCHEMA broker CASCADE;

-- 1. a fresh install
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO broker_test_reader;
ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO broker_test_reader;
SELECT throws_ok('CREATE EXTENSION pgsql_broker', '55000', NULL,
                 'an installer whose default privileges grant to another role is refused (55000)');
SELECT throws_like('CREATE EXTENSION pgsql_broker', '%default privileges%broker_test_reader%',
                   'the error names the grantee');
SELECT is((SELECT count(*)::int FROM pg_extension WHERE extname = 'pgsql_broker'), 0, 'nothing was installed');
SELECT ok(to_regnamespace('broker') IS NULL, 'not even schema broker');
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM broker_test_reader;
SELECT throws_ok('CREATE EXTENSION pgsql_broker', '55000', NULL, 'schemas alone too (USAGE on schema broker)');
ALTER DEFAULT PRIVILEGES REVOKE USAGE ON SCHEMAS FROM broker_test_reader;

-- 2. defaults that take from PUBLIC only, or name another schema
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO broker_test_reader;
SELECT lives_ok('CREATE EXTENSION pgsql_broker', 'defaults that only take from PUBLIC, or for another schema, are fine');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'broker'::regnamespace
            AND has_function_privilege('broker_test_reader', oid, 'EXECUTE')), 0, 'the reader may call no broker function');

-- 3. an upgrade creates functions too
DROP EXTENSION pgsql_broker;
DROP SCHEMA broker;
SELECT lives_ok($$CREATE EXTENSION pgsql_broker VERSION '0.2.0'$$, 'a 0.2.0 install');
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO broker_test_reader;
SELECT throws_like($$ALTER EXTENSION pgsql_broker UPDATE TO '0.3.0'$$, '%default privileges%broker_test_reader%',
                   'its upgrade is refused the same way');

SELECT * FROM finish();
ROLLBACK;
