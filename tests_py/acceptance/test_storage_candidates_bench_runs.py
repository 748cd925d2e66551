"""bench/storage_candidates.py (issue 36's layouts, measured) runs end to end with tiny sizes, and every layout holds
the same jobs behind a broker_jobs view of the same columns (structure only, never timing)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # the bench package (not installed: it is no part of the runner)
TINY = {"BENCH_STORAGE_SECONDS": "1", "BENCH_STORAGE_HELD_SECONDS": "1", "BENCH_STORAGE_FINISHED": "200",
        "BENCH_STORAGE_PENDING": "400", "BENCH_STORAGE_HELD_PENDING": "400", "BENCH_STORAGE_CEILING_ROWS": "500"}
NAMES = ["today", "split", "split_keep", "state_tables", "segments"]


def test_every_layout_holds_the_same_jobs_behind_a_view_of_broker_jobs_columns():
    from bench import common, storage_candidates
    from bench.storage_candidates import LAYOUTS
    db = "bench_storage_layouts_check"
    storage_candidates.setup(db, 30, 40, 4)
    try:
        with psycopg.connect(dbname=db, autocommit=True) as conn:
            def columns(relation: str) -> list:
                return conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                                    "%s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (relation,)).fetchall()

            def jobs(relation: str) -> list:
                return conn.execute(f"SELECT job_id, tenant_id, job_queue, complete_status FROM {relation} "
                                    "ORDER BY job_id").fetchall()
            views = [f"{layout.name}.broker_jobs" for layout in LAYOUTS[1:]]
            assert [layout.name for layout in LAYOUTS] == NAMES
            want_columns, want_jobs = columns("broker.broker_jobs"), jobs("broker.broker_jobs")
            assert [c for c, n in conn.execute(
                "SELECT complete_status, count(*) FROM broker.broker_jobs GROUP BY 1 ORDER BY 1").fetchall()] == [0, 2]
            assert len(want_jobs) == 30 + 3 + 40  # yesterday's, today's (a tenth more) and the pending ones
            # every tenant has pending jobs in every queue (a claim picks a queue and a tenant)
            assert conn.execute("SELECT count(DISTINCT (job_queue, tenant_id)) FROM broker.broker_jobs "
                                "WHERE complete_status = 0").fetchone()[0] == 4 * 10
            for view in views:
                assert columns(view) == want_columns, view
                assert jobs(view) == want_jobs, view
    finally:
        common.drop_db(db)


def test_the_storage_candidates_bench_runs(tmp_path):
    env = {**os.environ, **TINY, "BENCH_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "bench.storage_candidates"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)  # a hang guard: slow under load
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "storage_candidates.json").read_text())
    assert [run["clients"] for run in results["mixed"]["runs"]] == [1, 4]
    for run in results["mixed"]["runs"]:
        assert list(run["layouts"]) == NAMES and list(run["hot"]) == NAMES
        assert all(run["hot"][n]["row_width"] > 0 for n in NAMES)
    retention = results["mixed"]["retention"]
    assert list(retention) == NAMES and all(retention[n]["seconds"] >= 0 for n in NAMES)
    assert set(results["held"]) == {"free", "held"}
    assert "claim of 50 + completion" in proc.stdout and "retention of yesterday's history" in proc.stdout
