-- Nothing in schema broker is usable by PUBLIC.
BEGIN;
SELECT plan(4);

SELECT ok(NOT has_schema_privilege('public', 'broker', 'USAGE'), 'PUBLIC has no USAGE on schema broker');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                 WHERE n.nspname = 'broker' AND has_function_privilege('public', p.oid, 'EXECUTE') ORDER BY 1),
          '{}'::text[], 'no function is executable by PUBLIC');
SELECT is(ARRAY(SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'broker' AND c.relkind IN ('r', 'S', 'v')
                   AND (has_table_privilege('public', c.oid, 'SELECT') OR has_table_privilege('public', c.oid, 'INSERT')
                        OR has_table_privilege('public', c.oid, 'UPDATE') OR has_table_privilege('public', c.oid, 'DELETE'))
                 ORDER BY 1), '{}'::text[], 'no table or sequence is readable or writable by PUBLIC');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                 WHERE n.nspname = 'broker' AND p.prosecdef
                   AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false) ORDER BY 1),
          '{}'::text[], 'every SECURITY DEFINER function pins search_path');

SELECT * FROM finish();
ROLLBACK;
