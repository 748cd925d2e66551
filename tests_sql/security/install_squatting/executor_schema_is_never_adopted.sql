-- A schema named broker_exec_<role oid> that pgsql_broker did not make (another owner than
-- schema broker's) is never used as that role's executor schema: creating the executor fails
-- with 42501 naming the schema, for the role and for a superuser alike, and nothing is
-- created in it.
BEGIN;
SELECT plan(6);

CREATE ROLE broker_test_squatter NOLOGIN;
CREATE ROLE broker_test_victim NOLOGIN IN ROLE broker_enqueue;
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO broker_test_squatter', current_database()); END $$;
CREATE TEMP TABLE victim_schema AS SELECT 'broker_exec_' || oid AS name FROM pg_roles WHERE rolname = 'broker_test_victim';
GRANT SELECT ON victim_schema TO PUBLIC;

SET LOCAL ROLE broker_test_squatter;
DO $$ BEGIN
    EXECUTE format('CREATE SCHEMA %I', (SELECT name FROM victim_schema));
    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO PUBLIC', (SELECT name FROM victim_schema));
END $$;
RESET ROLE;

SET LOCAL ROLE broker_test_victim;
SELECT throws_ok($$SELECT broker.broker_create_executor('broker_test_victim')$$, '42501', NULL,
                 'the role''s executor is not made in the planted schema (42501)');
SELECT throws_like($$SELECT broker.broker_create_executor('broker_test_victim')$$,
                   '%schema ' || (SELECT name FROM victim_schema) || ' exists but is owned by broker_test_squatter%',
                   'the error names the schema and its owner');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT 1')$$, '42501', NULL,
                 'enqueueing as that role fails the same way, rather than trusting the schema');
RESET ROLE;
SELECT throws_ok($$SELECT broker.broker_create_executor('broker_test_victim')$$, '42501', NULL,
                 'a superuser cannot make it there either');
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = (SELECT name FROM victim_schema)::regnamespace), 0,
          'nothing was created in the planted schema');
SELECT is(broker._executor('broker_test_victim'), NULL, 'the role has no executor');

SELECT * FROM finish();
ROLLBACK;
