-- Every table, column, function and trigger in schema broker carries COMMENT ON.
BEGIN;
SELECT plan(4);

SELECT is(ARRAY(SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'broker' AND c.relkind IN ('r', 'p', 'v')
                   AND obj_description(c.oid, 'pg_class') IS NULL ORDER BY 1),
          '{}'::text[], 'every table has a comment');
SELECT is(ARRAY(SELECT c.relname || '.' || a.attname FROM pg_attribute a
                  JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'broker' AND c.relkind IN ('r', 'p', 'v') AND a.attnum > 0
                   AND NOT a.attisdropped AND col_description(c.oid, a.attnum) IS NULL ORDER BY 1),
          '{}'::text[], 'every column has a comment');
SELECT is(ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                 WHERE n.nspname = 'broker' AND obj_description(p.oid, 'pg_proc') IS NULL ORDER BY 1),
          '{}'::text[], 'every function has a comment');
SELECT is(ARRAY(SELECT t.tgname::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                  JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'broker' AND NOT t.tgisinternal
                   AND obj_description(t.oid, 'pg_trigger') IS NULL ORDER BY 1),
          '{}'::text[], 'every trigger has a comment');

SELECT * FROM finish();
ROLLBACK;
