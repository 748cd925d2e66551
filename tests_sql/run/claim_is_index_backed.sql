-- The claim is index-backed: its cost must not grow with finished, blocked or future jobs.
BEGIN;
SELECT plan(10);

-- A realistic mix: many finished, blocked and future jobs, a few ready ones.
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, complete_status, finished_at)
SELECT 'done', 'done', 'SELECT 1', 2, now() FROM generate_series(1, 20000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, pending_deps)
SELECT 'blocked', 'blocked', 'SELECT 1', 1 FROM generate_series(1, 3000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_priority, run_after)
SELECT 'future', 'future', 'SELECT 1', 5, now() + interval '1 hour' FROM generate_series(1, 3000);
INSERT INTO broker.broker_jobs (job_name, job_group, execute_str)
SELECT 'ready', 'ready', 'SELECT 1' FROM generate_series(1, 10);
ANALYZE broker.broker_jobs;

\ir ../lib/claim_plan.psql

SELECT ok(pg_temp.plan_of('claim-range') IS NOT NULL AND pg_temp.plan_of('priority-probe') IS NOT NULL
          AND pg_temp.plan_of('claim-new') IS NOT NULL AND pg_temp.plan_of('claim-query') IS NOT NULL,
          'broker_get has the marked probe and claim statements');
SET LOCAL plan_cache_mode = force_custom_plan;
SELECT matches(pg_temp.plan_of('claim-range', false), '"Index Name": "broker_jobs_claim_idx"', 'custom plan: the claim uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.plan_of('claim-range', false) || pg_temp.plan_of('priority-probe', false), '"Node Type": "Seq Scan"',
                    'custom plans: no sequential scan');
SELECT cmp_ok((SELECT count(*)::integer FROM regexp_matches(pg_temp.plan_of('priority-probe', false), '"Index Name": "broker_jobs_claim_idx"', 'g')),
          '>=', 2, 'custom plan: the probes from the hint and of the levels below it use broker_jobs_claim_idx');
-- the function's own settings from here (force_generic_plan among them)
SELECT matches(pg_temp.plan_of('claim-range'), '"Index Name": "broker_jobs_claim_idx"', 'generic plan: the claim uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.plan_of('claim-range') || pg_temp.plan_of('priority-probe') || pg_temp.plan_of('claim-new')
                    || pg_temp.plan_of('claim-query'), '"Node Type": "Seq Scan"',
                    'generic plans: no sequential scan');
-- with a tenant's pause (broker_pause_queue) the claim is the same index scan, with a filter
SELECT matches(pg_temp.plan_of('claim-range', true, ARRAY['paused tenant']), '"Index Name": "broker_jobs_claim_idx"',
               'generic plan, a tenant paused: the claim uses broker_jobs_claim_idx');
SELECT doesnt_match(pg_temp.plan_of('claim-range', true, ARRAY['paused tenant'])
                    || pg_temp.plan_of('claim-new', true, ARRAY['paused tenant'])
                    || pg_temp.plan_of('priority-probe', true, ARRAY['paused tenant']),
                    '"Node Type": "Seq Scan"', 'generic plans, a tenant paused: no sequential scan');

-- And the function as it runs: no sequential scan of broker_jobs at all.
RESET plan_cache_mode;
CREATE TEMP TABLE seq_before AS SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass;
CREATE TEMP TABLE claimed AS SELECT job_name FROM broker.broker_get(1, NULL, 60, 4);
SELECT is((SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relid = 'broker.broker_jobs'::regclass),
          (SELECT seq_scan FROM seq_before), 'broker_get ran without a sequential scan of broker_jobs');
SELECT is((SELECT array_agg(DISTINCT job_name) FROM claimed), ARRAY['ready'], 'only ready jobs were claimed');

SELECT * FROM finish();
ROLLBACK;
