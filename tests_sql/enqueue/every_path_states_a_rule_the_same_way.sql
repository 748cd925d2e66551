-- The rules of a job's fields live in broker._job_problem: broker_add_job, both paths of broker_add_jobs (plain
-- and general) and broker_add_schedule break each the same way, with the same SQLSTATE and one message naming
-- the calling function (for broker_add_jobs also the element) and the field as that caller names it.
BEGIN;
SELECT plan(65);

-- 'SQLSTATE: message' of a statement, or 'no error'
CREATE FUNCTION pg_temp.err(p_sql text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$f$;

-- named arguments: p_args, with a name (p_name => 'j') and SQL unless p_args gives them
CREATE FUNCTION pg_temp.with_name_and_sql(p_name text, p_args text) RETURNS text LANGUAGE sql AS $f$
    SELECT CASE WHEN p_args LIKE p_name || ' %' THEN p_args || $$, p_execute_str => 'SELECT 1'$$
                WHEN p_args LIKE 'p_execute_str %' THEN p_name || $$ => 'j', $$ || p_args
                ELSE p_name || $$ => 'j', p_execute_str => 'SELECT 1', $$ || p_args END
$f$;

-- one row per rule: the field (broker_add_job's parameter without p_), broker_add_job's arguments after the
-- name and SQL, the same as keys of an element, broker_add_schedule's arguments (NULL: the rule has no schedule
-- parameter), the SQLSTATE and what the message says after the field
CREATE TEMP TABLE rule_case (field text, job_args text, element text, schedule_args text, state text, says text);
INSERT INTO rule_case VALUES
    ('job_name', $$p_job_name => ' '$$, $${"job_name": " "}$$, $$p_schedule_name => ' '$$,
     '22023', 'must be 1 to 200 characters and not blank'),
    ('job_name', $$p_job_name => NULL$$, $${"job_name": null}$$, $$p_schedule_name => NULL$$,
     '22004', 'must not be NULL'),
    ('execute_str', $$p_execute_str => '  '$$, $${"execute_str": "  "}$$, $$p_execute_str => '  '$$,
     '22023', 'is empty; give the SQL the job should run'),
    ('job_language', $$p_job_language => 'perl'$$, $${"job_language": "perl"}$$, $$p_job_language => 'perl'$$,
     '22023', 'must be sql or plpgsql, got ''perl'''),
    ('job_queue', $$p_job_queue => 0$$, $${"job_queue": 0}$$, $$p_job_queue => 0$$,
     '22023', 'must be >= 1, got 0'),
    ('job_queue', $$p_job_queue => 1001$$, $${"job_queue": 1001}$$, $$p_job_queue => 1001$$,
     '22023', 'must be <= 1000, got 1001'),
    ('job_priority', $$p_job_priority => NULL$$, $${"job_priority": null}$$, $$p_job_priority => NULL$$,
     '22004', 'must not be NULL'),
    ('max_attempts', $$p_max_attempts => 0$$, $${"max_attempts": 0}$$, $$p_max_attempts => 0$$,
     '22023', 'must be >= 1, got 0'),
    ('job_group', $$p_job_group => ''$$, $${"job_group": ""}$$, $$p_job_group => ''$$,
     '22023', 'must be 1 to 200 characters and not blank'),
    ('timeout', $$p_timeout => '0 s'$$, $${"timeout": "0 s"}$$, $$p_job_timeout => '0 s'$$,
     '22023', 'must be positive, got 00:00:00'),
    ('idempotency_key', $$p_idempotency_key => ' '$$, $${"idempotency_key": " "}$$, NULL,
     '22023', 'must not be blank (NULL for none)'),
    ('idempotency_key', $$p_idempotency_key => repeat('k', 513)$$, $${"idempotency_key": "$$ || repeat('k', 513) || $$"}$$, NULL,
     '22023', 'must be at most 512 characters, got 513'),
    ('idempotency_key', $$p_idempotency_key => 'broker_schedule:1:1'$$, $${"idempotency_key": "broker_schedule:1:1"}$$, NULL,
     '22023', 'must not start with broker_schedule: (reserved for schedules)'),
    ('concurrency_key', $$p_concurrency_key => ' '$$, $${"concurrency_key": " "}$$, $$p_concurrency_key => ' '$$,
     '22023', 'must not be blank (NULL for none)'),
    ('concurrency_key', $$p_concurrency_key => repeat('k', 201)$$, $${"concurrency_key": "$$ || repeat('k', 201) || $$"}$$,
     $$p_concurrency_key => repeat('k', 201)$$, '22023', 'must be at most 200 characters, got 201'),
    ('depends_on_job_ids', $$p_depends_on_job_ids => ARRAY[NULL]::bigint[]$$, $${"depends_on_job_ids": [null]}$$, NULL,
     '22004', 'must not contain NULL'),
    ('depends_on_job_ids', $$p_depends_on_job_ids => ARRAY[[1], [2]]::bigint[]$$, $${"depends_on_job_ids": [[1], [2]]}$$, NULL,
     '22023', 'must be a flat array of job ids'),
    ('depends_on_groups', $$p_depends_on_groups => ARRAY['a', ' ']$$, $${"depends_on_groups": ["a", " "]}$$, NULL,
     '22023', 'must not contain NULL or blank group names'),
    ('depends_on_groups', $$p_depends_on_groups => ARRAY(SELECT 'g' || i FROM generate_series(1, 101) AS i)$$,
     $${"depends_on_groups": $$ || (SELECT jsonb_agg('g' || i) FROM generate_series(1, 101) AS i)::text || $$}$$, NULL,
     '22023', 'may name at most 100 groups, got 101');

-- broker_add_job
SELECT is(pg_temp.err(format($$SELECT broker.broker_add_job(%s)$$, pg_temp.with_name_and_sql('p_job_name', c.job_args))),
          format('%s: broker_add_job: p_%s %s', c.state, c.field, c.says), 'broker_add_job: ' || c.field || ' ' || c.says)
  FROM rule_case AS c;
-- broker_add_jobs, the plain path (the second element breaks the rule)
SELECT is(pg_temp.err(format($$SELECT * FROM broker.broker_add_jobs(%L)$$,
              jsonb_build_array('{"job_name": "ok", "execute_str": "SELECT 1"}'::jsonb,
                                '{"job_name": "j", "execute_str": "SELECT 1"}'::jsonb || c.element::jsonb))),
          format('%s: broker_add_jobs: element 2: %s %s', c.state, c.field, c.says),
          'broker_add_jobs (plain path): ' || c.field || ' ' || c.says)
  FROM rule_case AS c WHERE c.field NOT IN ('idempotency_key', 'depends_on_job_ids', 'depends_on_groups');
-- broker_add_jobs, the general path (a run_as key, even null, takes it)
SELECT is(pg_temp.err(format($$SELECT * FROM broker.broker_add_jobs(%L)$$,
              jsonb_build_array('{"job_name": "ok", "execute_str": "SELECT 1"}'::jsonb,
                                '{"job_name": "j", "execute_str": "SELECT 1", "run_as": null}'::jsonb || c.element::jsonb))),
          format('%s: broker_add_jobs: element 2: %s %s', c.state, c.field, c.says),
          'broker_add_jobs (general path): ' || c.field || ' ' || c.says)
  FROM rule_case AS c;
-- broker_add_schedule, its parameters' names
SELECT is(pg_temp.err(format($$SELECT * FROM broker.broker_add_schedule(p_cron_expr => '0 3 * * *', %s)$$,
                             pg_temp.with_name_and_sql('p_schedule_name', c.schedule_args))),
          format('%s: broker_add_schedule: %s %s', c.state, split_part(c.schedule_args, ' ', 1), c.says),
          'broker_add_schedule: ' || c.field || ' ' || c.says)
  FROM rule_case AS c WHERE c.schedule_args IS NOT NULL;
SELECT is((SELECT count(*) FROM broker.broker_jobs) + (SELECT count(*) FROM broker.broker_schedule), 0::bigint,
          'nothing was written');

-- p_tenant_id re-calls broker_add_job for the named tenant: p_autonomous goes along (without it, the VACUUM
-- would be refused as a regular job, 0A000, instead of as an autonomous job of a role not allowed them, 42501)
SELECT is(split_part(pg_temp.err($$SELECT broker.broker_add_job('v', 'VACUUM ANALYZE', p_tenant_id => 'acme',
                                                                   p_autonomous => true)$$), ':', 1),
          '42501', 'broker_add_job with p_tenant_id keeps p_autonomous');
SELECT is(split_part(pg_temp.err($$SELECT broker.broker_add_schedule('v', '0 3 * * *', 'VACUUM ANALYZE', p_tenant_id => 'acme',
                                                                        p_autonomous => true)$$), ':', 1),
          '42501', 'broker_add_schedule with p_tenant_id keeps p_autonomous');

SELECT * FROM finish();
ROLLBACK;
