-- broker_create_executor: who may create a role's executor, and what it looks like.
BEGIN;
SELECT plan(8);

CREATE ROLE broker_test_alice NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_bob NOLOGIN IN ROLE broker_enqueue;
SELECT throws_ok($$SELECT broker.broker_create_executor('no_such_role_xyz')$$, '42704', NULL, 'unknown role: 42704');
SET LOCAL ROLE broker_test_bob;
SELECT throws_ok($$SELECT broker.broker_create_executor('broker_test_alice')$$, '42501',
    'broker_create_executor: broker_test_bob cannot act as broker_test_alice', 'a role cannot create another''s executor');
SELECT lives_ok($$SELECT broker.broker_create_executor('broker_test_bob')$$, 'but may create its own');
RESET ROLE;
SELECT is(broker.broker_create_executor('broker_test_bob'), broker._executor('broker_test_bob'), 'creating again returns the same one');
SELECT is((SELECT n.nspname::text || '.' || p.proname || ' owner=' || p.proowner::regrole || ' secdef=' || p.prosecdef
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = broker._executor('broker_test_bob')),
          'broker_exec_' || 'broker_test_bob'::regrole::oid || '.run_job owner=broker_test_bob secdef=true',
          'in the role''s own schema, owned by it, SECURITY DEFINER');
SELECT is((SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'broker_exec_' || 'broker_test_bob'::regrole::oid),
          'broker_admin', 'the schema belongs to the broker''s owner');
SELECT ok(NOT has_schema_privilege('broker_test_alice', 'broker_exec_' || 'broker_test_bob'::regrole::oid, 'CREATE'),
          'other roles cannot create there');
SELECT lives_ok($$SELECT broker.broker_create_executor('broker_test_alice')$$, 'a superuser may create any role''s executor');

SELECT * FROM finish();
ROLLBACK;
