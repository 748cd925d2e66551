"""The claim+complete ceiling of issue 7, measured in the same run as the drain, and floors beside it.

The ceiling: pgbench with 4 clients (the runner's 4 queues) for BENCH_CEILING_SECONDS (8) on a bare
queue table of BENCH_CEILING_ROWS (600,000) jobs (id, status, payload; a partial index on the pending
ids): each transaction claims up to 10 pending jobs with FOR UPDATE SKIP LOCKED and completes them,
in one statement. jobs/s is 10 x transactions/s (the table holds more jobs than the run can take). No
job is executed: it is what the hardware allows for claiming and completing alone, so the drain's
share of it says how much the broker's bookkeeping and the job runs cost.

The floors: what a queue that keeps the claim's own commit (a job that kills its backend has still
used an attempt) can reach at best with nothing else done: the same clients, each claim up to 50
jobs (the runner's default claim) in a transaction of its own, then their completion in another.
"broker_jobs": the claim and the completion write what pgsql_broker's do (state, attempts, lease,
times), on broker_jobs with all its indexes, CHECKs and triggers, no job run, nothing recorded;
"broker_jobs+run": the same, the jobs run in the completion's transaction through their role's
executor (run_jobs: a subtransaction each), still nothing else (no attempt row, no lock of the run,
no checks); "bare": the two commits on the ceiling's bare table. Beside them, "sql": pgsql_broker's
own statements as its runner sends them, from pgbench. Their rates count the jobs completed in the
run. So the drain's distance to the ceiling splits into the table's writes, the job runs, the rest
of pgsql_broker's bookkeeping and the runner.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
import uuid

import psycopg

from pgsql_broker.run import queries

from . import common

SECONDS = common.env_int("BENCH_CEILING_SECONDS", 8)
ROWS = common.env_int("BENCH_CEILING_ROWS", 600_000)  # more than 8 s can take here
CLIENTS = 4
PER_CLAIM = 10
FLOOR_PER_CLAIM = 50  # the runner's default claim (queue_buffer_size)
# jobs in broker_jobs for its floor (slower to fill than the bare table, which gets ROWS)
FLOOR_ROWS = common.env_int("BENCH_FLOOR_ROWS", min(ROWS, 300_000))
SCRIPT = (f"UPDATE q SET status = 2 WHERE id IN (SELECT id FROM q WHERE status = 0 ORDER BY id "
          f"LIMIT {PER_CLAIM} FOR UPDATE SKIP LOCKED);\n")
BARE = "CREATE TABLE q (id bigserial PRIMARY KEY, status smallint NOT NULL DEFAULT 0, payload text)"
# (the claimed ids go from the claim's transaction to the completion's through a pgbench variable)
FLOOR_SCRIPTS = {
    "bare": f"""WITH c AS (UPDATE q SET status = 1 WHERE id IN (SELECT id FROM q WHERE status = 0 ORDER BY id
                                       LIMIT {FLOOR_PER_CLAIM} FOR UPDATE SKIP LOCKED) RETURNING id)
SELECT quote_literal(coalesce(array_agg(id), '{{}}')::text) AS ids FROM c \\gset
UPDATE q SET status = 2 WHERE id = ANY (:ids::bigint[]);
""",
    "broker_jobs": f"""\\set queue :client_id % {CLIENTS} + 1
WITH c AS (UPDATE broker.broker_jobs AS j
              SET complete_status = 1, attempts = j.attempts + 1, started_at = now(), lease_token = gen_random_uuid(),
                  lease_expires_at = now() + interval '60 seconds', lease_instance_id = 1
            WHERE j.job_id IN (SELECT r.job_id FROM broker.broker_jobs AS r
                                WHERE r.job_queue = :queue AND r.complete_status = 0 AND r.pending_deps = 0
                                ORDER BY r.job_queue, r.job_priority DESC, r.run_after, r.job_id
                                LIMIT {FLOOR_PER_CLAIM} FOR NO KEY UPDATE SKIP LOCKED)
           RETURNING j.job_id)
SELECT quote_literal(coalesce(array_agg(job_id), '{{}}')::text) AS ids FROM c \\gset
UPDATE broker.broker_jobs SET complete_status = 2, finished_at = clock_timestamp(), lease_token = NULL,
       lease_expires_at = NULL
 WHERE job_id = ANY (:ids::bigint[]);
""",
}
# the same claim, then the jobs run (RUN_JOBS: the role's executor, each job in a subtransaction there) and
# completed in one transaction
FLOOR_SCRIPTS["broker_jobs+run"] = FLOOR_SCRIPTS["broker_jobs"].replace("UPDATE broker.broker_jobs SET complete_status = 2", """BEGIN;
SELECT count(*) FROM (SELECT array_agg(execute_str ORDER BY job_id) AS s, array_agg(job_language ORDER BY job_id) AS l,
                             array_agg(job_search_path ORDER BY job_id) AS p
                        FROM broker.broker_jobs WHERE job_id = ANY (:ids::bigint[])) AS a,
              RUN_JOBS(a.s, a.l, a.p, 'default') AS r;
UPDATE broker.broker_jobs SET complete_status = 2""") + "COMMIT;\n"
# pgsql_broker's own statements as its runner sends them for a claim of the defaults (the session reset, the claim,
# the transaction of the jobs; runner/pgsql_broker/run/queries.py), from pgbench instead of the runner
# (one message each, as the runner sends them: \; joins the statements of one message, \gset keeps the last result)
_RESET_MESSAGE = queries.RESET_TRANSACTION.replace(";", " \\;")
FLOOR_SCRIPTS["sql"] = f"""\\set queue :client_id % {CLIENTS} + 1
{_RESET_MESSAGE}SELECT quote_literal(coalesce(array_agg(job_id), '{{}}')::text) AS ids
  FROM broker.broker_claim_batches(:queue, INSTANCE, 60, {FLOOR_PER_CLAIM}, '200 milliseconds'::interval, false) \\gset
BEGIN \\; SELECT set_config('statement_timeout', '200', true) \\;
SELECT count(*) FROM broker.broker_run_batch(:ids::bigint[], NULL, '200 milliseconds'::interval) \\;
{queries.READ_ONLY} \\; COMMIT;
"""
FLOOR_SCRIPTS = {k: FLOOR_SCRIPTS[k] for k in ("broker_jobs", "broker_jobs+run", "sql", "bare")}  # (the report's order)
FLOOR_LABELS = {
    "broker_jobs": (f"the claim and the completion of pgsql_broker's rows alone, each a transaction, up to "
                    f"{FLOOR_PER_CLAIM} jobs a claim, on broker_jobs (its indexes, CHECKs and triggers), no job run"),
    "broker_jobs+run": ("the same, and the jobs run (SELECT 1) in the completion's transaction through their role's "
                        "executor, a subtransaction each"),
    "sql": ("pgsql_broker's own statements as its runner sends them (session reset, broker_claim_batches, "
            "broker_run_batch under the batch budget: the lock of the run, the checks, the attempt rows), from pgbench "
            "instead of the runner"),
    "bare": f"the two transactions of the first row on the ceiling's bare table, up to {FLOOR_PER_CLAIM} jobs a claim",
}
# (jobs completed, jobs still pending)
COUNT_SQL = {"bare": "SELECT count(*) FILTER (WHERE status = 2), count(*) FILTER (WHERE status = 0) FROM q",
             "broker_jobs": "SELECT count(*) FILTER (WHERE complete_status = 2), count(*) FILTER (WHERE complete_status = 0) "
                            "FROM broker.broker_jobs"}
COUNT_SQL["broker_jobs+run"] = COUNT_SQL["sql"] = COUNT_SQL["broker_jobs"]


def _pgbench(db: str, script: str, *options: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as f:
        f.write(script)
        f.flush()
        return subprocess.run([common.PGBENCH, "-n", *options, "-c", str(CLIENTS), "-j", "2", "-T", str(SECONDS),
                               "-f", f.name, db], capture_output=True, text=True, check=True).stdout


def _bare_db(db: str, *after: str) -> None:
    """A database with the bare queue table q of ROWS pending jobs, then the statements after."""
    common.create_db(db, None, BARE, "CREATE INDEX q_pending ON q (id) WHERE status = 0",
                     f"INSERT INTO q (payload) SELECT 'SELECT 1' FROM generate_series(1, {ROWS})", *after)


def one_run() -> float:
    db = f"bench_ceiling_{uuid.uuid4().hex[:6]}"
    _bare_db(db, "VACUUM ANALYZE q", "CHECKPOINT")  # (as before every floor: no run pays another's page images)
    try:
        tps = float(re.search(r"tps = ([0-9.]+)", _pgbench(db, SCRIPT)).group(1))
        return tps * PER_CLAIM
    finally:
        common.drop_db(db)


def floor_run(kind: str) -> tuple[float, bool]:
    """Jobs/s of one floor (FLOOR_SCRIPTS): the jobs it completed over the run's seconds, and whether it ran
    out of jobs before the end (then the rate is a lower bound: raise BENCH_FLOOR_ROWS)."""
    db = f"bench_floor_{uuid.uuid4().hex[:6]}"
    if kind == "bare":
        _bare_db(db)
    else:
        common.create_broker_db(db)
        common.sql(db, "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
                       f"SELECT 'drain', 'drain', 'SELECT 1', 1 + g % {CLIENTS} FROM generate_series(1, {FLOOR_ROWS}) AS g")
    script = FLOOR_SCRIPTS[kind]
    try:
        if "RUN_JOBS" in script:  # (the superuser's executor, which create_broker_db made)
            script = script.replace("RUN_JOBS", common.scalar(db, "SELECT broker._executor_jobs(broker._executor(current_user))"))
        if "INSTANCE" in script:  # (claims name the active instance; this session's registration stays active)
            script = script.replace("INSTANCE", str(common.scalar(
                db, "SELECT broker.broker_register_instance('bench-floor', 'localhost', 1, %s, 'bench')", (CLIENTS,))))
        common.sql(db, "VACUUM ANALYZE", "CHECKPOINT")
        _pgbench(db, script, "-M", "simple")  # (simple: \gset's value is spliced into the next statement)
        with psycopg.connect(dbname=db, autocommit=True) as conn:
            done, pending = conn.execute(COUNT_SQL[kind]).fetchone()
        return done / SECONDS, pending == 0
    finally:
        common.drop_db(db)


def run_one(r: int) -> dict:
    """One round: the ceiling, then each floor."""
    out: dict = {"ceiling": one_run(), "ran_out": []}
    for kind in FLOOR_SCRIPTS:
        out[kind], ran_out = floor_run(kind)
        if ran_out:
            out["ran_out"].append(kind)
    print(f"  run {r + 1} ceiling  jobs_per_s={common.fmt(out['ceiling'])}, floors: "
          + ", ".join(f"{k}={common.fmt(out[k])}" + (" (ran out of jobs)" if k in out["ran_out"] else "")
                      for k in FLOOR_SCRIPTS), flush=True)
    return out


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def summary(rounds: list[dict], drains: list[float]) -> dict:
    """The ceiling's runs and median; each floor's runs, median and median ratio to the ceiling of its round;
    with drains (run r of the drain measured right before round r), the drain / ceiling and drain / floor
    ratios of each run and their medians."""
    values = [r["ceiling"] for r in rounds]
    out = {"runs": values, "jobs_per_s": _median(values), "clients": CLIENTS, "per_claim": PER_CLAIM,
           "seconds": SECONDS, "floors": {}}
    paired = bool(drains) and len(drains) == len(rounds)
    if paired:
        out["drain_ratio_runs"] = [d / r["ceiling"] for d, r in zip(drains, rounds)]
        out["drain_ratio"] = _median(out["drain_ratio_runs"])
    for kind in FLOOR_SCRIPTS:
        runs = [r[kind] for r in rounds]
        floor = {"label": FLOOR_LABELS[kind], "per_claim": FLOOR_PER_CLAIM, "runs": runs, "jobs_per_s": _median(runs),
                 "ceiling_ratio_runs": [r[kind] / r["ceiling"] for r in rounds],
                 "ran_out": any(kind in r["ran_out"] for r in rounds)}
        floor["ceiling_ratio"] = _median(floor["ceiling_ratio_runs"])
        if paired:
            floor["drain_ratio_runs"] = [d / r[kind] for d, r in zip(drains, rounds)]
            floor["drain_ratio"] = _median(floor["drain_ratio_runs"])
        out["floors"][kind] = floor
    return out
