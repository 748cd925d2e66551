-- Idempotency keys are at most 512 characters: longer ones are 22023 at enqueue (not 54000
-- from the unique index, which cannot hold entries over about 2.7 kB), and a raw INSERT
-- violates the table CHECK (23514).
BEGIN;
SELECT plan(6);
-- 3,200 characters that do not compress (a key of one repeated letter would fit the index compressed)
CREATE FUNCTION pg_temp.long_key() RETURNS text LANGUAGE sql AS
    $$SELECT string_agg(md5(i::text), '') FROM generate_series(1, 100) AS i$$;

SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_idempotency_key => pg_temp.long_key())$$, '22023',
    'broker_add_job: p_idempotency_key must be at most 512 characters, got 3200', 'broker_add_job: a 3 kB key is 22023');
SELECT throws_ok($$SELECT broker.broker_add_job('j', 'SELECT 1', p_idempotency_key => repeat('€', 513))$$, '22023',
    NULL, 'broker_add_job: 513 characters is 22023');
SELECT ok((SELECT job_id FROM broker.broker_add_job('j', 'SELECT 1', p_idempotency_key => repeat('€', 512))) IS NOT NULL,
    '512 characters (1.5 kB in UTF-8) is accepted and indexed');
SELECT throws_ok(format($$SELECT * FROM broker.broker_add_jobs('[{"job_name": "a", "execute_str": "SELECT 1",
                                                                 "idempotency_key": "%s"}]')$$, pg_temp.long_key()),
    '22023', 'broker_add_jobs: element 1: idempotency_key must be at most 512 characters, got 3200',
    'broker_add_jobs: a 3 kB key is 22023');
SELECT throws_ok(format($$INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, idempotency_key)
                          VALUES ('raw', 'raw', 'SELECT 1', '%s')$$, pg_temp.long_key()),
    '23514', NULL, 'a raw INSERT with a 3 kB key violates the table CHECK');
SELECT is((SELECT pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint
            WHERE conname = 'broker_jobs_idempotency_key_check'),
    'CHECK (((btrim(idempotency_key) <> ''''::text) AND (length(idempotency_key) <= 512)))',
    'broker_jobs: CHECK on the key length');

SELECT * FROM finish();
ROLLBACK;
