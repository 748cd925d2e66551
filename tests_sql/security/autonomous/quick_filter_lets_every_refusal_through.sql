-- The quick filter in front of the lexer of job SQL (broker._may_not_run_in_transaction: a word test, then
-- _transaction_words) lets through every text the lexer refuses: what _never_in_transaction refuses, and how it
-- names the statement, is the same as with _transaction_words alone (the expectations below are what that gave).
BEGIN;
SELECT plan(2);

CREATE TEMP TABLE corpus (t text, lang text, refused text);
INSERT INTO corpus VALUES
    (E'--c\nvacuum', 'sql', 'VACUUM'),
    (E'--xvacuum\nBEGIN', 'sql', 'BEGIN'),
    ('/* a /* b */ c */ VACUUM t', 'sql', 'VACUUM'),
    ('/*x*/vacuum', 'sql', 'VACUUM'),
    ('1vacuum', 'sql', NULL),
    ('ALTER SYSTEM SET x = 1', 'sql', 'ALTER SYSTEM'),
    (E'BEGIN\n IF x THEN ROLLBACK; END IF; END', 'plpgsql', 'ROLLBACK'),
    ('BEGIN LOOP COMMIT; END LOOP; END', 'plpgsql', 'COMMIT'),
    ('BEGIN PERFORM 1; COMMIT; END', 'plpgsql', 'COMMIT'),
    ('BEGIN; SELECT 1', 'sql', NULL),
    ('CALL etl.create_report()', 'sql', NULL),
    ('CALL p(); END', 'sql', NULL),
    ('CLUSTER', 'sql', 'CLUSTER'),
    ('CREATE INDEX CONCURRENTLY i ON t (a)', 'sql', 'CREATE INDEX CONCURRENTLY'),
    ('DROP INDEX CONCURRENTLY i', 'sql', 'DROP INDEX CONCURRENTLY'),
    ('DROP TABLESPACE x', 'sql', 'DROP TABLESPACE'),
    ('END', 'sql', NULL),
    ('PREPARE TRANSACTION ''x''', 'sql', 'PREPARE TRANSACTION'),
    ('REINDEX DATABASE d', 'sql', 'REINDEX DATABASE'),
    ('SELECT 1', 'sql', NULL),
    ('SELECT 1; BEGIN', 'sql', NULL),
    ('SELECT 1;vacuum', 'sql', 'VACUUM'),
    ('SELECT created_at FROM t', 'sql', NULL),
    ('Savepoint a', 'sql', 'SAVEPOINT'),
    ('abort', 'sql', 'ABORT'),
    ('create database d', 'sql', 'CREATE DATABASE'),
    ('reindex table concurrently t', 'sql', 'REINDEX TABLE CONCURRENTLY'),
    (E'select 1;\n  Commit', 'sql', 'COMMIT'),
    ('start transaction', 'sql', 'START TRANSACTION'),
    ('vacuum$x', 'sql', NULL),
    ('x; /**/ RELEASE SAVEPOINT a', 'sql', 'RELEASE');

SELECT is((SELECT array_agg(c.t ORDER BY c.t) FROM corpus AS c
            WHERE broker._never_in_transaction(c.t, c.lang) IS DISTINCT FROM c.refused),
          NULL, 'each text is refused as before, naming the same statement');
SELECT is((SELECT array_agg(c.t ORDER BY c.t) FROM corpus AS c
            WHERE c.refused IS NOT NULL AND NOT broker._may_not_run_in_transaction(c.t)),
          NULL, 'the filter is true for every refused text');

SELECT * FROM finish();
ROLLBACK;
