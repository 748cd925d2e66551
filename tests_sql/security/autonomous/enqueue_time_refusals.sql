-- Enqueue-time honesty and the autonomous opt-in: a regular job whose text can never run inside a transaction is
-- refused with 0A000 and a hint naming the opt-in; an autonomous job is one allowed statement (22023 for a shape the
-- check is not sure of, 0A000 for another kind) of a role an administrator allowed (42501 with the fix in the hint).
BEGIN;
SELECT plan(61);

CREATE ROLE broker_test_au_app NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_au_etl NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_au_none NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_au_su SUPERUSER NOLOGIN;
GRANT USAGE, CREATE ON SCHEMA public TO broker_test_au_app;

-- the SQLSTATE and hint of an error (pgTAP's throws_ok does not look at hints)
CREATE FUNCTION pg_temp.refusal(p_sql text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    v_state text; v_hint text;
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_hint = PG_EXCEPTION_HINT;
    RETURN v_state || ': ' || v_hint;
END
$f$;
GRANT EXECUTE ON FUNCTION pg_temp.refusal(text) TO PUBLIC;

---- a regular job that can never run in a transaction -----------------------------------------------------------
SET LOCAL ROLE broker_test_au_app;
SELECT throws_ok($$SELECT broker.broker_add_job('v', 'VACUUM ANALYZE orders')$$, '0A000',
    'broker_add_job: VACUUM cannot run inside a transaction, and a job runs inside one', 'VACUUM as a regular job: 0A000');
SELECT is(pg_temp.refusal($$SELECT broker.broker_add_job('v', 'vacuum orders')$$),
    '0A000: Enqueue it as an autonomous job: p_autonomous => true (the key "autonomous" in broker_add_jobs), '
    'once an administrator allowed them for the role (broker.broker_allow_autonomous, docs/jobs.md).',
    'the hint names the opt-in');
SELECT throws_ok($$SELECT broker.broker_add_job('i', 'CREATE UNIQUE INDEX CONCURRENTLY i ON orders (id)')$$, '0A000',
    'broker_add_job: CREATE INDEX CONCURRENTLY cannot run inside a transaction, and a job runs inside one', 'CREATE INDEX CONCURRENTLY: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('r', 'REINDEX INDEX CONCURRENTLY orders_pkey')$$, '0A000',
    'broker_add_job: REINDEX INDEX CONCURRENTLY cannot run inside a transaction, and a job runs inside one', 'REINDEX ... CONCURRENTLY: 0A000');
-- REINDEX after its options, with CONCURRENTLY among them, and the kinds that never run in one
SELECT throws_ok(format('SELECT broker.broker_add_job(''r'', %L)', v.t), '0A000',
                 format('broker_add_job: %s cannot run inside a transaction, and a job runs inside one', v.refused),
                 v.t || ': 0A000')
  FROM (VALUES ('REINDEX (VERBOSE) INDEX CONCURRENTLY orders_pkey', 'REINDEX INDEX CONCURRENTLY'),
               ('REINDEX (CONCURRENTLY, VERBOSE) TABLE orders', 'REINDEX TABLE CONCURRENTLY'),
               ('REINDEX SCHEMA public', 'REINDEX SCHEMA'),
               ('REINDEX (VERBOSE) DATABASE app', 'REINDEX DATABASE')) AS v(t, refused);
SELECT throws_ok($$SELECT broker.broker_add_job('c', 'UPDATE t SET x = 1; COMMIT; UPDATE t SET x = 2')$$, '0A000',
    'broker_add_job: COMMIT cannot run inside a transaction, and a job runs inside one', 'a COMMIT among statements: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('c', '/* first */ VACUUM t')$$, '0A000', NULL, 'behind a comment: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('s', 'START TRANSACTION; SELECT 1')$$, '0A000',
    'broker_add_job: START TRANSACTION cannot run inside a transaction, and a job runs inside one', 'START TRANSACTION: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('p', 'BEGIN UPDATE t SET x = 1; COMMIT; END', p_job_language => 'plpgsql')$$,
    '0A000', 'broker_add_job: COMMIT cannot run inside a transaction, and a job runs inside one', 'PL/pgSQL COMMIT: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_jobs('[{"job_name": "a", "execute_str": "SELECT 1"}, {"job_name": "b", "execute_str": "VACUUM t"}]')$$,
    '0A000', 'broker_add_jobs: element 2: VACUUM cannot run inside a transaction, and a job runs inside one', 'broker_add_jobs names the element');
SELECT throws_ok($$SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'VACUUM ANALYZE orders')$$, '0A000',
    'broker_add_schedule: VACUUM cannot run inside a transaction, and a job runs inside one', 'a schedule too');
-- no false alarms: the words in literals, identifiers, comments and dollar quotes, and what does run in a transaction
SELECT lives_ok($$SELECT broker.broker_add_job('ok1', $j$SELECT 'VACUUM; COMMIT', "commit" FROM (SELECT 1 AS "commit") s -- ; VACUUM$j$)$$, 'words in literals and comments');
SELECT lives_ok($$SELECT broker.broker_add_job('ok2', $j$DO $d$ BEGIN RAISE NOTICE 'x'; END $d$; SELECT $q$; vacuum $q$ $j$)$$, 'words in dollar quotes');
SELECT lives_ok($$SELECT broker.broker_add_job('ok3', 'REFRESH MATERIALIZED VIEW CONCURRENTLY mv')$$, 'REFRESH ... CONCURRENTLY runs in a transaction');
SELECT lives_ok($$SELECT broker.broker_add_job('ok4', 'ANALYZE orders; CREATE INDEX i ON orders (id)')$$, 'ANALYZE and a plain CREATE INDEX too');
SELECT lives_ok($$SELECT broker.broker_add_job('ok5', 'BEGIN PERFORM 1; END', p_job_language => 'plpgsql')$$, 'a PL/pgSQL block');
SELECT lives_ok($$SELECT broker.broker_add_job('ok6', 'REINDEX (VERBOSE, TABLESPACE pg_default) TABLE orders')$$, 'REINDEX (options) TABLE runs in a transaction');
SELECT lives_ok($$SELECT broker.broker_add_job('ok7', 'REINDEX (CONCURRENTLY false) INDEX orders_pkey')$$, 'and with CONCURRENTLY false');
RESET ROLE;

---- the administrator's arrangement -----------------------------------------------------------------------------
SET LOCAL ROLE broker_test_au_app;
SELECT throws_ok($$SELECT broker.broker_add_job('v', 'VACUUM ANALYZE orders', p_autonomous => true)$$, '42501',
    'broker_add_job: role broker_test_au_app may not run autonomous jobs', 'no arrangement: 42501');
SELECT is(pg_temp.refusal($$SELECT broker.broker_add_job('v', 'VACUUM ANALYZE orders', p_autonomous => true)$$),
    '42501: An administrator allows it per role: for maintenance statements GRANT broker_test_au_app TO broker_runtime; '
    'SELECT broker.broker_allow_autonomous(''broker_test_au_app''); for CALL too, a login for broker_test_au_app in the '
    'runner''s autonomous_logins and SELECT broker.broker_allow_autonomous(''broker_test_au_app'', ''login'') (docs/security.md).',
    'the hint says how to allow it');
SELECT throws_ok($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, autonomous) VALUES ('raw', 'raw', 'VACUUM t', true)$$,
    '42501', 'broker_jobs: role broker_test_au_app may not run autonomous jobs', 'a raw INSERT is checked by the policy');
SELECT throws_ok($$SELECT broker.broker_add_jobs('[{"job_name": "a", "execute_str": "VACUUM t", "autonomous": true}]')$$,
    '42501', 'broker_add_jobs: element 1: role broker_test_au_app may not run autonomous jobs', 'broker_add_jobs: 42501');
SELECT throws_ok($$SELECT broker.broker_allow_autonomous('broker_test_au_app')$$, '42501', NULL,
    'an enqueuer cannot allow itself');
RESET ROLE;
SELECT throws_ok($$SELECT broker.broker_allow_autonomous('broker_test_au_app')$$, '42501',
    'broker_allow_autonomous: broker_runtime is not a member of role broker_test_au_app, so the runner cannot SET ROLE to it',
    'set_role needs the grant to broker_runtime first');
SELECT throws_ok($$SELECT broker.broker_allow_autonomous('broker_test_au_su', 'login')$$, '42501', NULL, 'never a superuser');
SELECT throws_ok($$SELECT broker.broker_allow_autonomous('broker_test_au_app', 'sudo')$$, '22023',
    'broker_allow_autonomous: p_via must be set_role or login, got ''sudo''', 'an unknown way');
GRANT broker_test_au_app TO broker_runtime;
SELECT lives_ok($$SELECT broker.broker_allow_autonomous('broker_test_au_app')$$, 'set_role once granted');
SELECT lives_ok($$SELECT broker.broker_allow_autonomous('broker_test_au_etl', 'login')$$, 'login needs no grant');
SELECT is((SELECT rolinherit FROM pg_roles WHERE rolname = 'broker_runtime'), false,
    'broker_runtime is NOINHERIT: the grant lets it SET ROLE, not use the role''s privileges');

---- the statements an autonomous job may be ---------------------------------------------------------------------
SET LOCAL ROLE broker_test_au_app;
SELECT lives_ok($$SELECT broker.broker_add_job('vac', 'VACUUM (ANALYZE, VERBOSE) public.orders, "Other"."T";', p_autonomous => true)$$,
    'VACUUM with options, names, a final semicolon');
SELECT lives_ok($$SELECT broker.broker_add_job('cic', $j$CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS o_i ON orders (lower(name), (id + 1)) WHERE status = 'it''s open'$j$, p_autonomous => true)$$,
    'CREATE INDEX CONCURRENTLY with expressions and a standard string');
SELECT lives_ok($$SELECT broker.broker_add_job('rx', 'REINDEX (VERBOSE) TABLE CONCURRENTLY orders', p_autonomous => true)$$, 'REINDEX (options) TABLE CONCURRENTLY');
SELECT lives_ok($$SELECT broker.broker_add_job('rm', 'refresh materialized view concurrently mv', p_autonomous => true)$$, 'REFRESH ... CONCURRENTLY');
SELECT lives_ok($$SELECT broker.broker_add_job('q', 'VACUUM "t;RESET ROLE"', p_autonomous => true)$$, 'a ; inside a quoted name is a name');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'VACUUM t; RESET ROLE', p_autonomous => true)$$, '22023',
    'broker_add_job: an autonomous job is one statement without a second statement (a '';'' before the end)', 'a second statement: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'VACUUM t /* ; RESET ROLE */', p_autonomous => true)$$, '22023',
    'broker_add_job: an autonomous job is one statement without comments', 'a block comment: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('x', E'VACUUM t -- x\n', p_autonomous => true)$$, '22023',
    'broker_add_job: an autonomous job is one statement without comments', 'a line comment: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('x', $j$CREATE INDEX CONCURRENTLY ON t ((x = $d$;RESET ROLE$d$))$j$, p_autonomous => true)$$, '22023',
    'broker_add_job: an autonomous job is one statement without dollar quoting or $n parameters', 'dollar quoting: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('x', $j$CREATE INDEX CONCURRENTLY ON t ((x = E'\'; RESET ROLE; --'))$j$, p_autonomous => true)$$, '22023',
    'broker_add_job: an autonomous job is one statement without escape-string, bit-string or backslash literals', 'an escape string: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'VACUUM U&"t"', p_autonomous => true)$$, '22023', NULL, 'a Unicode name: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'VACUUM t', p_job_language => 'plpgsql', p_autonomous => true)$$, '22023',
    'broker_add_job: an autonomous job is SQL, not ''plpgsql''', 'PL/pgSQL: 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'RESET ROLE', p_autonomous => true)$$, '0A000',
    'broker_add_job: an autonomous job cannot run ''RESET ROLE''', 'RESET ROLE: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SET ROLE broker_runtime', p_autonomous => true)$$, '0A000', NULL, 'SET ROLE: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SET SESSION AUTHORIZATION postgres', p_autonomous => true)$$, '0A000', NULL,
    'SET SESSION AUTHORIZATION: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'SELECT broker.broker_get(1)', p_autonomous => true)$$, '0A000', NULL, 'broker_get: 0A000');
SELECT throws_ok($$SELECT broker.broker_add_job('x', 'CALL etl.load()', p_autonomous => true)$$, '42501',
    'broker_add_job: role broker_test_au_app may run maintenance statements autonomously, not CALL', 'CALL without a login: 42501');
RESET ROLE;
SET LOCAL ROLE broker_test_au_etl;
SELECT lives_ok($$SELECT broker.broker_add_job('call', 'CALL etl.load_in_chunks(1000)', p_autonomous => true)$$, 'CALL with a login');
SELECT lives_ok($$SELECT broker.broker_add_schedule('nightly', '0 3 * * *', 'VACUUM ANALYZE orders', p_autonomous => true)$$, 'an autonomous schedule');
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE autonomous), 6::bigint, 'the autonomous jobs enqueued');
SELECT is((SELECT autonomous FROM broker.broker_schedule WHERE schedule_name = 'nightly'), true, 'the schedule is autonomous');

-- broker_alter_schedule checks p_autonomous as broker_add_schedule does
SET LOCAL ROLE broker_test_au_etl;
SELECT throws_ok($$SELECT * FROM broker.broker_alter_schedule('nightly', p_autonomous => false)$$, '0A000',
    'broker_alter_schedule: VACUUM cannot run inside a transaction, and a job runs inside one',
    'a VACUUM schedule made regular: 0A000');
SELECT throws_ok($$SELECT * FROM broker.broker_alter_schedule('nightly', p_execute_str => 'RESET ROLE')$$, '0A000',
    'broker_alter_schedule: an autonomous job cannot run ''RESET ROLE''', 'RESET ROLE into an autonomous schedule: 0A000');
SELECT lives_ok($$SELECT * FROM broker.broker_alter_schedule('nightly', p_execute_str => 'SELECT 1', p_autonomous => false)$$,
    'a regular text, made regular');
RESET ROLE;
SELECT is((SELECT autonomous FROM broker.broker_schedule WHERE schedule_name = 'nightly'), false, 'the schedule is regular now');
SET LOCAL ROLE broker_test_au_app;
SELECT lives_ok($$SELECT broker.broker_add_schedule('mine', '0 4 * * *', 'SELECT 1')$$, 'a regular schedule');
SELECT throws_ok($$SELECT * FROM broker.broker_alter_schedule('mine', p_execute_str => 'CALL etl.load()', p_autonomous => true)$$,
    '42501', 'broker_alter_schedule: role broker_test_au_app may run maintenance statements autonomously, not CALL',
    'made autonomous, the role''s arrangement is checked: 42501');
SELECT lives_ok($$SELECT * FROM broker.broker_alter_schedule('mine', p_execute_str => 'ANALYZE orders', p_autonomous => true)$$,
    'made autonomous');
RESET ROLE;
SELECT is((SELECT autonomous FROM broker.broker_schedule WHERE schedule_name = 'mine'), true, 'the schedule is autonomous now');

SELECT * FROM finish();
ROLLBACK;
