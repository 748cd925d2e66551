-- A job runs only while its enqueuer may still have it run: the enqueuer's rights are checked again at run time.
BEGIN;
SELECT plan(22);

CREATE ROLE broker_test_ra_bob NOLOGIN IN ROLE broker_enqueue;
CREATE ROLE broker_test_ra_alice NOLOGIN IN ROLE broker_enqueue, broker_test_ra_bob;
CREATE ROLE broker_test_ra_dave NOLOGIN IN ROLE broker_enqueue, broker_test_ra_bob;
CREATE ROLE broker_test_ra_erin NOLOGIN IN ROLE broker_enqueue;
CREATE TABLE public.ra_effects (v text);
GRANT USAGE ON SCHEMA public TO broker_test_ra_bob, broker_test_ra_erin;
GRANT INSERT ON public.ra_effects TO broker_test_ra_bob, broker_test_ra_erin;
SELECT broker.broker_create_executor('broker_test_ra_bob');

-- alice may run jobs as bob (she is a member) when she enqueues them; bob enqueues one of his own
SET LOCAL ROLE broker_test_ra_alice;
CREATE TEMP TABLE first AS
SELECT job_id FROM broker.broker_add_job('attempts left', $$INSERT INTO public.ra_effects VALUES ('attempts left')$$, 11,
                                         p_run_as => 'broker_test_ra_bob', p_max_attempts => 3);
SELECT broker.broker_add_job('once', $$INSERT INTO public.ra_effects VALUES ('once')$$, 11,
                             p_run_as => 'broker_test_ra_bob');
SELECT broker.broker_add_job('single', $$INSERT INTO public.ra_effects VALUES ('single')$$, 12,
                             p_run_as => 'broker_test_ra_bob');
SELECT broker.broker_add_job('after', $$INSERT INTO public.ra_effects VALUES ('after')$$, 19,
                             p_run_as => 'broker_test_ra_bob', p_depends_on_job_ids => ARRAY(SELECT job_id FROM first));
RESET ROLE;
SET LOCAL ROLE broker_test_ra_bob;
SELECT broker.broker_add_job('bob''s own', $$INSERT INTO public.ra_effects VALUES ('bob')$$, 11);
RESET ROLE;
SELECT is((SELECT count(*) FROM broker.broker_jobs WHERE run_as = 'broker_test_ra_bob'), 5::bigint,
          'five jobs run as bob, four of them enqueued by alice');

-- then alice loses the right to run jobs as bob
REVOKE broker_test_ra_bob FROM broker_test_ra_alice;

SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE claimed AS SELECT g.job_id, g.job_name, g.lease_token FROM broker.broker_get(11, NULL, 60, 10) AS g;
CREATE TEMP TABLE out1 AS SELECT * FROM broker.broker_run_batch(
    ARRAY(SELECT job_id FROM claimed ORDER BY job_id), ARRAY(SELECT lease_token FROM claimed ORDER BY job_id));
RESET ROLE;
SELECT is(ARRAY(SELECT c.job_name FROM out1 JOIN claimed AS c USING (job_id)), ARRAY['attempts left', 'once', 'bob''s own'],
          'broker_run_batch takes up all three jobs of role bob');
SELECT is(ARRAY(SELECT complete_status FROM out1), ARRAY[3, 3, 2]::smallint[],
          'alice''s jobs are not run and fail at once, attempts left or not; bob''s own job completes');
SELECT is(ARRAY(SELECT COALESCE(error_sqlstate, '-') FROM out1), ARRAY['42501', '42501', '-'], 'the refused jobs get 42501');
SELECT is((SELECT error_message FROM out1 o JOIN claimed AS c USING (job_id) WHERE c.job_name = 'once'),
          'enqueuer broker_test_ra_alice may no longer run jobs as broker_test_ra_bob', 'and the reason');
SELECT is(ARRAY(SELECT duration FROM out1 ORDER BY job_id LIMIT 2), ARRAY['0', '0']::interval[],
          'a job not run took no time');
SELECT is(ARRAY(SELECT v FROM public.ra_effects), ARRAY['bob'], 'only bob''s own job had an effect');
SELECT is((SELECT ROW(complete_status, attempts, last_error_sqlstate, last_error_message)::text
             FROM broker.broker_jobs WHERE job_name = 'attempts left'),
          ROW(3::smallint, 1, '42501', 'enqueuer broker_test_ra_alice may no longer run jobs as broker_test_ra_bob')::text,
          'the failed job keeps the SQLSTATE and the reason');
SELECT is((SELECT ROW(complete_status, cancel_reason)::text FROM broker.broker_jobs WHERE job_name = 'after'),
          ROW(4::smallint, format('dependency job %s (attempts left) failed', (SELECT job_id FROM first)))::text,
          'its dependents are cancelled');

-- it stays failed once alice has the right again: losing a right is no passing fault
GRANT broker_test_ra_bob TO broker_test_ra_alice;
SELECT is_empty($$SELECT * FROM broker.broker_get(11)$$, 'a refused job is not retried, even once the right is back');

-- broker_run checks the same
REVOKE broker_test_ra_bob FROM broker_test_ra_alice;
SET LOCAL ROLE broker_runtime;
CREATE TEMP TABLE out2 AS SELECT r.* FROM broker.broker_get(12) AS g, LATERAL broker.broker_run(g.job_id, g.lease_token) AS r;
RESET ROLE;
SELECT is((SELECT ROW(complete_status, error_sqlstate, error_message, duration)::text FROM out2),
          ROW(3::smallint, '42501', 'enqueuer broker_test_ra_alice may no longer run jobs as broker_test_ra_bob',
              interval '0')::text, 'broker_run does not run it either');
SELECT is((SELECT count(*) FROM public.ra_effects WHERE v = 'single'), 0::bigint, 'no effect');

-- an enqueuer that no longer exists
SET LOCAL ROLE broker_test_ra_dave;
SELECT broker.broker_add_job('dave''s', $$INSERT INTO public.ra_effects VALUES ('dave')$$, 13,
                             p_run_as => 'broker_test_ra_bob');
RESET ROLE;
DROP OWNED BY broker_test_ra_dave;
DROP ROLE broker_test_ra_dave;
SELECT is((SELECT ROW(complete_status, error_sqlstate, error_message)::text
             FROM broker.broker_run_batch(ARRAY(SELECT g.job_id FROM broker.broker_get(13) AS g))),
          ROW(3::smallint, '42501', 'enqueuer role broker_test_ra_dave no longer exists')::text,
          'a job whose enqueuer was dropped is not run');
SELECT is((SELECT count(*) FROM public.ra_effects WHERE v = 'dave'), 0::bigint, 'no effect');
SELECT is(broker._may_run_as('broker_test_ra_bob', 'broker_test_ra_dave'), false,
          '_may_run_as answers false for a role that no longer exists (no error)');

-- strict tenancy: an enqueuer no longer mapped to the job's tenant; a mapping a dropped role left behind
SELECT broker.broker_set_strict_tenancy(true);
CREATE ROLE broker_test_ra_gone NOLOGIN;
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('ra_tenant', 'broker_test_ra_gone');
INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('ra_tenant', 'broker_test_ra_erin');
DROP ROLE broker_test_ra_gone;
SELECT is(broker._tenant_allowed('ra_tenant', 'broker_test_ra_dave'), false,
          '_tenant_allowed answers false for a role that no longer exists (no error)');
SET LOCAL ROLE broker_test_ra_erin;
SELECT broker.broker_set_tenant('ra_tenant');
SELECT broker.broker_add_job('erin''s', $$INSERT INTO public.ra_effects VALUES ('erin')$$, 14, p_max_attempts => 2);
SELECT broker.broker_add_job('erin''s too', $$INSERT INTO public.ra_effects VALUES ('erin too')$$, 15);
RESET ROLE;
SELECT is((SELECT r.complete_status FROM broker.broker_get(15) AS g, LATERAL broker.broker_run(g.job_id) AS r), 2::smallint,
          'while erin is mapped to the tenant, her job runs (beside the mapping of a dropped role)');
SET LOCAL ROLE broker_test_ra_erin;
SELECT is(ARRAY(SELECT role_name::text FROM broker.broker_tenant_roles), ARRAY['broker_test_ra_erin'],
          'she reads her own mappings; the dropped role''s is hidden, not an error');
RESET ROLE;
DELETE FROM broker.broker_tenant_roles WHERE role_name = 'broker_test_ra_erin';
CREATE TEMP TABLE out3 AS SELECT * FROM broker.broker_run_batch(ARRAY(SELECT g.job_id FROM broker.broker_get(14) AS g));
SELECT is((SELECT ROW(complete_status, error_sqlstate, error_message)::text FROM out3),
          ROW(3::smallint, '42501', 'enqueuer broker_test_ra_erin may no longer act for tenant ''ra_tenant''')::text,
          'once unmapped, her job is not run');
SELECT is(ARRAY(SELECT v FROM public.ra_effects WHERE v LIKE 'erin%'), ARRAY['erin too'], 'no effect');
SELECT broker.broker_set_strict_tenancy(false);

-- a superuser's raw row may name any enqueuer role; it is held to the same rule
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue, run_as, enqueued_by)
VALUES ('raw', 'raw', $$INSERT INTO public.ra_effects VALUES ('raw')$$, 16, 'broker_test_ra_bob', 'broker_test_ra_erin');
SELECT is((SELECT ROW(r.complete_status, r.error_message)::text
             FROM broker.broker_get(16) AS g, LATERAL broker.broker_run(g.job_id) AS r),
          ROW(3::smallint, 'enqueuer broker_test_ra_erin may no longer run jobs as broker_test_ra_bob')::text,
          'a row written directly is held to the same rule');

-- a job of a role that may still run as bob is unaffected by all of this
SET LOCAL ROLE broker_test_ra_bob;
SELECT broker.broker_add_job('bob again', $$INSERT INTO public.ra_effects VALUES ('bob again')$$, 17, p_max_attempts => 2);
RESET ROLE;
SELECT is((SELECT r.complete_status FROM broker.broker_get(17) AS g, LATERAL broker.broker_run(g.job_id) AS r), 2::smallint,
          'bob''s own jobs still run');

SELECT * FROM finish();
ROLLBACK;
