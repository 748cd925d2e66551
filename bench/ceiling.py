"""The claim+complete ceiling of issue 7, measured in the same run as the drain.

pgbench with 4 clients (the runner's 4 queues) for BENCH_CEILING_SECONDS (8) on a bare queue
table of BENCH_CEILING_ROWS (600,000) jobs (id, status, payload; a partial index on the pending
ids): each transaction claims up to
10 pending jobs with FOR UPDATE SKIP LOCKED and completes them, in one statement. jobs/s is
10 x transactions/s (the table holds more jobs than the run can take). No job is executed: it
is what the hardware allows for claiming and completing alone, so the drain's share of it says
how much the broker's bookkeeping and the job runs cost.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
import uuid

from . import common
from .claim_backlog import PGBENCH

SECONDS = common.env_int("BENCH_CEILING_SECONDS", 8)
ROWS = common.env_int("BENCH_CEILING_ROWS", 600_000)  # more than 8 s can take here
CLIENTS = 4
PER_CLAIM = 10
SCRIPT = (f"UPDATE q SET status = 2 WHERE id IN (SELECT id FROM q WHERE status = 0 ORDER BY id "
          f"LIMIT {PER_CLAIM} FOR UPDATE SKIP LOCKED);\n")


def one_run() -> float:
    db = f"bench_ceiling_{uuid.uuid4().hex[:6]}"
    common.create_db(db, None,
                     "CREATE TABLE q (id bigserial PRIMARY KEY, status smallint NOT NULL DEFAULT 0, payload text)",
                     "CREATE INDEX q_pending ON q (id) WHERE status = 0",
                     f"INSERT INTO q (payload) SELECT 'SELECT 1' FROM generate_series(1, {ROWS})",
                     "VACUUM ANALYZE q")
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
            script.write(SCRIPT)
            script.flush()
            out = subprocess.run([PGBENCH, "-n", "-c", str(CLIENTS), "-j", "2", "-T", str(SECONDS), "-f", script.name, db],
                                 capture_output=True, text=True, check=True).stdout
        tps = float(re.search(r"tps = ([0-9.]+)", out).group(1))
        return tps * PER_CLAIM
    finally:
        common.drop_db(db)


def run_one(r: int) -> float:
    value = one_run()
    print(f"  run {r + 1} ceiling  jobs_per_s={common.fmt(value)}", flush=True)
    return value


def summary(values: list[float], drains: list[float]) -> dict:
    """The ceiling's runs and median; with drains (run r of the drain measured right before ceiling run r),
    the drain / ceiling ratio of each run and their median."""
    out = {"runs": values, "jobs_per_s": sorted(values)[len(values) // 2], "clients": CLIENTS,
           "per_claim": PER_CLAIM, "seconds": SECONDS}
    if drains and len(drains) == len(values):
        ratios = [d / c for d, c in zip(drains, values)]
        out["drain_ratio_runs"] = ratios
        out["drain_ratio"] = sorted(ratios)[len(ratios) // 2]
    return out
