-- What if broker_jobs had only the indexes and row triggers a drain of independent jobs needs
-- (bench/drain_cpu.py BENCH_CPU_WHAT_IF): no index that a drained job's claim or completion writes an
-- entry into but the primary key (the lease, group and retention indexes go), and no BEFORE UPDATE row
-- trigger (ready_xid, cancel requests). bench/table_parts.py measures these parts on the claim and the
-- completion alone; no_finished_counts.sql takes out the table's other trigger of a drain, so that
-- `cat bench/what_if/*.sql` is every part at once. Not a configuration of pgsql_broker: it breaks
-- the plans of lease recovery and retention, the probes of group dependencies, claims of jobs made
-- ready again under a held snapshot, and cancellation by UPDATE.
DROP INDEX broker.broker_jobs_lease_idx;
DROP INDEX broker.broker_jobs_group_idx;
DROP INDEX broker.broker_jobs_finished_idx;
DROP TRIGGER broker_jobs_ready_xid_trg ON broker.broker_jobs;
DROP TRIGGER broker_jobs_cancel_request_trg ON broker.broker_jobs;
