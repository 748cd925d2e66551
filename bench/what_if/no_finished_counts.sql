-- What if finished jobs were not counted by minute (bench/drain_cpu.py BENCH_CPU_WHAT_IF): the share of
-- the statement trigger that keeps broker_finished_count (the metrics and broker_queue_stats read it).
-- Not a configuration of pgsql_broker.
DROP TRIGGER broker_jobs_count_finished_update_trg ON broker.broker_jobs;
