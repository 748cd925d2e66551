-- After the install, a role with CREATE on the database (here also a broker_enqueue member)
-- cannot put anything into schema broker or another role's executor schema, nor take over
-- or replace either schema: nothing can be planted for a later roles.sql or upgrade to adopt.
BEGIN;
SELECT plan(9);

CREATE ROLE broker_test_eve NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_bob NOLOGIN IN ROLE broker_enqueue;
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO broker_test_eve', current_database()); END $$;
SELECT broker.broker_create_executor('broker_test_bob');
CREATE TEMP TABLE bob_schema AS SELECT 'broker_exec_' || oid AS name FROM pg_roles WHERE rolname = 'broker_test_bob';
GRANT SELECT ON bob_schema TO broker_test_eve;

SET LOCAL ROLE broker_test_eve;
SELECT throws_ok('CREATE FUNCTION broker.evil() RETURNS int LANGUAGE sql SECURITY DEFINER AS $$ SELECT 1 $$',
                 '42501', NULL, 'no function can be planted in schema broker');
SELECT throws_ok('CREATE TABLE broker.evil (x int)', '42501', NULL, 'no table can be planted in schema broker');
SELECT throws_ok('CREATE VIEW broker.evil AS SELECT 1 AS x', '42501', NULL, 'no view can be planted in schema broker');
SELECT throws_ok('CREATE TYPE broker.evil AS (x int)', '42501', NULL, 'no type can be planted in schema broker');
SELECT throws_ok('CREATE SCHEMA broker', '42P06', NULL, 'schema broker cannot be made again');
SELECT throws_ok('ALTER SCHEMA broker RENAME TO broker_old', '42501', NULL, 'schema broker cannot be renamed out of the way');
SELECT throws_ok(format('CREATE FUNCTION %I.run_jobs(text[], text[], text[], text) RETURNS int LANGUAGE sql SECURITY DEFINER AS $$ SELECT 1 $$',
                        (SELECT name FROM bob_schema)),
                 '42501', NULL, 'nothing can be planted in another role''s executor schema');
SELECT throws_ok(format('ALTER SCHEMA %I RENAME TO broker_exec_0', (SELECT name FROM bob_schema)),
                 '42501', NULL, 'another role''s executor schema cannot be renamed');
SELECT throws_ok(format('DROP SCHEMA %I CASCADE', (SELECT name FROM bob_schema)),
                 '42501', NULL, 'another role''s executor schema cannot be dropped');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
