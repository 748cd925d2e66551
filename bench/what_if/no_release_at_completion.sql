-- What if completing jobs released no dependents (bench/drain_cpu.py BENCH_CPU_WHAT_IF): the share of
-- the dependency bookkeeping (its advisory locks and probes) in a drain of jobs nothing waits on.
-- Not a configuration of pgsql_broker: it would leave dependents waiting for ever.
CREATE OR REPLACE FUNCTION broker._release_dependents_of(p_tenant_id text, p_job_ids bigint[], p_groups text[])
RETURNS integer
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 0 $$;
