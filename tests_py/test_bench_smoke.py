"""The benchmark harness runs end to end with tiny sizes (structure only, never timing)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = {"BENCH_DRAIN_JOBS": "40", "BENCH_SINGLE_JOBS": "5", "BENCH_BATCHES": "1", "BENCH_LATENCY_JOBS": "5",
        "BENCH_READY": "20", "BENCH_BACKLOG_SCALE": "0.0001", "BENCH_DEPS_JOBS": "20", "BENCH_TIMEOUT_SEC": "60",
        "BENCH_CEILING_SECONDS": "1", "BENCH_CEILING_ROWS": "1000"}


def test_bench_harness_smoke(tmp_path, template_db):
    env = {**os.environ, **TINY, "BENCH_RESULTS_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "bench.run", "--runs", "1", "--name", "smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| drain, jobs/s" in proc.stdout
    results = json.loads((tmp_path / "smoke.json").read_text())
    assert {"nproc", "server_version", "settings", "date"} <= set(results["machine"])
    broker = results["systems"]["pgsql_broker"]
    assert broker["median"]["drain"]["jobs"] == 40
    enqueue = broker["median"]["enqueue"]
    assert enqueue["single"]["jobs"] == 5
    bulk = enqueue["batch 1000: broker_add_jobs"]
    assert bulk == "n/a (broker_add_jobs missing)" or bulk["jobs"] == 1000
    assert any("generate_series" in k and v["jobs"] == 1000 for k, v in enqueue.items())
    assert broker["median"]["latency"]["jobs"] == 5 and "p99_ms" in broker["median"]["latency"]
    assert broker["backlog"]["runs"]["backlog"] and "ratio" in broker["backlog"]
    assert set(broker["deps"]["median"]) >= {"complete_fan_in_ms", "enqueue_into_graph_ms"}
    assert results["ceiling"]["jobs_per_s"] > 0 and "drain / ceiling" in proc.stdout
    # each ceiling run follows its round's drains, and the ratio is taken per run
    assert proc.stdout.index("run 1 ceiling") < proc.stdout.index("run 1 enqueue")
    assert len(results["ceiling"]["drain_ratio_runs"]) == 1 and results["ceiling"]["drain_ratio"] > 0
