-- Seeing flow control: broker_tenant_stats (each tenant's ready, running and served jobs of a queue and
-- its share of what the queue served), broker_key_stats (each limit's running, cap, rate and pending
-- jobs) and broker_job_waiting (why a pending job is not running). Times are dated far ahead or
-- set, never waited for.
BEGIN;
SELECT plan(21);

CREATE FUNCTION pg_temp.add(p_tenant text, p_n integer, p_queue integer, p_key text DEFAULT NULL,
                            p_run_after timestamptz DEFAULT '-infinity')
RETURNS void LANGUAGE sql AS $f$
    INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue, concurrency_key, run_after)
    SELECT p_tenant, p_tenant || ' ' || COALESCE(p_key, 'plain') || ' ' || i, 'g', 'SELECT 1', p_queue, p_key,
           CASE WHEN p_run_after = '-infinity' THEN now() ELSE p_run_after END
      FROM generate_series(1, p_n) AS i;
$f$;
CREATE FUNCTION pg_temp.claim(p_queue integer, p_n integer) RETURNS bigint LANGUAGE sql AS $f$
    SELECT count(*) FROM broker.broker_get(p_queue, NULL, 60, p_n);
$f$;
-- why each pending job of a queue (and tenant) waits, the reasons in job order
CREATE FUNCTION pg_temp.why(p_queue integer, p_tenant text DEFAULT NULL) RETURNS text[] LANGUAGE sql AS $f$
    SELECT array_agg(broker.broker_job_waiting(j.job_id) ORDER BY j.job_id)
      FROM broker.broker_jobs AS j
     WHERE j.job_queue = p_queue AND j.complete_status = 0 AND (p_tenant IS NULL OR j.tenant_id = p_tenant);
$f$;

-- a key at its cap: 2 of 4 running, 2 parked
SELECT broker.broker_set_limit('stripe', 2, NULL);
SELECT pg_temp.add('default', 4, 2, 'stripe');
SELECT pg_temp.claim(2, 10) + pg_temp.claim(2, 10) + pg_temp.claim(2, 10);
SELECT is(pg_temp.why(2), ARRAY['waiting: limit stripe (2 of 2 running)', 'waiting: limit stripe (2 of 2 running)'],
          'jobs of a key at its cap: waiting for the limit, with its running count and cap');
SELECT is(broker.broker_job_waiting((SELECT min(job_id) FROM broker.broker_jobs WHERE complete_status = 1)), NULL,
          'a running job waits for nothing');

-- a key out of tokens: one token (the bucket's time set ahead: it never refills here)
SELECT broker.broker_set_limit('sms', NULL, 0.5, 1);
UPDATE broker.broker_key_limit SET tokens = 1, tokens_at = now() + interval '1 day' WHERE concurrency_key = 'sms';
SELECT pg_temp.add('default', 2, 3, 'sms');
SELECT is(pg_temp.claim(3, 10), 1::bigint, 'one sms job takes the one token');
SELECT is(pg_temp.why(3), ARRAY['waiting: limit sms (rate 0.5 per second)'], 'the other waits for the rate');

-- a limit across tenants: its running count is every tenant's
SELECT broker.broker_set_limit('mail', 1, NULL, p_all_tenants => true);
SELECT pg_temp.add('tenant_a', 1, 6, 'mail');
SELECT pg_temp.claim(6, 10);
SELECT pg_temp.add('tenant_b', 1, 6, 'mail');
SELECT pg_temp.claim(6, 10);
SELECT is(pg_temp.why(6), ARRAY['waiting: limit mail (1 of 1 running)'],
          'a limit across tenants: another tenant''s running job takes the one slot');

-- dependencies, a paused queue, a job dated later
SELECT pg_temp.add('default', 1, 7);
SELECT broker.broker_add_job('child', 'SELECT 1', 7,
                             p_depends_on_job_ids => ARRAY[(SELECT max(job_id) FROM broker.broker_jobs WHERE job_queue = 7)]);
SELECT pg_temp.add('default', 1, 8, NULL, 'infinity');
SELECT is(pg_temp.why(7), ARRAY['waiting: a free worker', 'waiting: dependencies (1 left)'],
          'a ready job waits for a worker; one with an unfinished dependency for it');
SELECT is(pg_temp.why(8), ARRAY['waiting: due at infinity'], 'a job dated later: its time');
SELECT broker.broker_pause_queue(7);
SELECT is(pg_temp.why(7), ARRAY['waiting: queue paused', 'waiting: dependencies (1 left)'],
          'a paused queue: paused (dependencies first)');

-- tenant share: big runs 3, small 1 of queue 5; each has one more ready job
SELECT pg_temp.add('big', 4, 5);
SELECT is(pg_temp.claim(5, 3), 3::bigint, 'big: 3 running');
SELECT pg_temp.add('small', 2, 5);
INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (5, 'big');
SELECT is(pg_temp.claim(5, 1), 1::bigint, 'small: 1 running (big paused meanwhile)');
DELETE FROM broker.broker_queue_pause WHERE job_queue = 5;
SELECT is(pg_temp.why(5, 'big'), ARRAY['waiting: tenant share'],
          'big runs 3 of 4, over its half share while small runs: waiting for its share');
SELECT is(pg_temp.why(5, 'small'), ARRAY['waiting: a free worker'], 'small runs under its share: a free worker');
SELECT broker.broker_set_tenant_weight('big', 4);
SELECT is(pg_temp.why(5, 'big'), ARRAY['waiting: a free worker'], 'big weighs 4: 3 of 4 is under its share (3.2)');

-- tenant stats: ready, running, served and share; a finished job still counts as served in the window
SELECT broker.broker_create_executor(current_user);
SELECT is(r.complete_status, 2::smallint, 'small''s running job completes')
  FROM broker.broker_run((SELECT job_id FROM broker.broker_jobs WHERE tenant_id = 'small' AND complete_status = 1)) AS r;
SELECT results_eq($$SELECT tenant_id, weight, ready, running, served, share_served
                      FROM broker.broker_tenant_stats('1 day') WHERE job_queue = 5$$,
                  $$VALUES ('big', 4, 1::bigint, 3::bigint, 3::bigint, 0.75::double precision),
                           ('small', 1, 1::bigint, 0::bigint, 1::bigint, 0.25::double precision)$$,
                  'per tenant: weight, ready, running, served (running or finished in the window) and its share of the queue');
SELECT results_eq($$SELECT job_queue, ready, running, served, share_served FROM broker.broker_tenant_stats('1 day')
                     WHERE job_queue IN (7, 8)$$,
                  $$VALUES (7, 0::bigint, 0::bigint, 0::bigint, NULL::double precision)$$,
                  'a paused queue has nothing ready; a queue that served none has no share; jobs dated later are not ready');

-- key stats
SELECT pg_temp.add('default', 1, 9, 'free');
SELECT results_eq($$SELECT concurrency_key, tenant_id, running, max_running, per_second, burst, waiting
                      FROM broker.broker_key_stats()$$,
                  $$VALUES ('free', 'default', 0::bigint, NULL::integer, NULL::double precision, NULL::integer, 1::bigint),
                           ('mail', NULL, 1::bigint, 1, NULL, NULL, 1::bigint),
                           ('sms', 'default', 1::bigint, NULL, 0.5::double precision, 1, 1::bigint),
                           ('stripe', 'default', 2::bigint, 2, NULL, NULL, 2::bigint)$$,
                  'per limit: running, cap, rate, burst and waiting (a limit across tenants: every tenant''s); a key without a limit');

-- not pending, not there
SELECT is(broker.broker_job_waiting((SELECT job_id FROM broker.broker_jobs WHERE complete_status = 2)), NULL,
          'a finished job waits for nothing');
SELECT is(broker.broker_job_waiting(-1), NULL, 'no such job: NULL');

-- bad input
SELECT throws_ok($$SELECT * FROM broker.broker_tenant_stats(NULL)$$, '22023', NULL, 'a NULL window: 22023');
SELECT throws_ok($$SELECT * FROM broker.broker_tenant_stats('-1 minute')$$, '22023', NULL, 'a negative window: 22023');

SELECT * FROM finish();
ROLLBACK;
