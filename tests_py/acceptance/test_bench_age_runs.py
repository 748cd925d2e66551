"""The age bench (bench/age.py, `make bench-age`) runs end to end with a tiny history, on a cluster of its own that
preloads pg_stat_statements as `make bench-age`'s does; its page is what the generator makes of its JSON.
Structure only, never timing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from own_cluster import OwnCluster
from runner_process import free_port

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # the bench package (not installed: it is no part of the runner)
TINY = {"BENCH_AGE_FINISHED": "3000", "BENCH_AGE_CALLS": "2", "BENCH_AGE_WARMUP": "1", "BENCH_AGE_READY": "20", "BENCH_AGE_RUNNING": "8", "BENCH_AGE_RECENT": "100",
        "BENCH_AGE_CHUNK": "1000"}


def test_age_bench_runs_and_its_page_comes_from_its_json(tmp_path):
    own = OwnCluster(max_connections=30, port=free_port(), extra_conf="shared_preload_libraries = 'pg_stat_statements'")
    try:
        env = {**os.environ, **TINY, "BENCH_RESULTS_DIR": str(tmp_path), "PGHOST": str(own.dir),
               "PGPORT": str(own.port), "PGUSER": "postgres", "PGDATABASE": "postgres"}
        proc = subprocess.run([sys.executable, "-m", "bench.run", "--only", "age", "--runs", "1", "--name", "age"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # a hang guard
        with own.connect() as admin:   # (its databases are dropped at the end)
            left = admin.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'bench_age%'").fetchone()[0]
    finally:
        own.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "age fill: 3,000 of 3,000 finished jobs" in proc.stdout and left == 0
    results = json.loads((tmp_path / "age.json").read_text())
    age = results["systems"]["pgsql_broker"]["age"]
    from bench import age as bench_age
    from bench.age_page import markdown
    assert [p["probe"] for p in age["probes"]] == [name for _, name, _ in bench_age.PROBES]
    assert age["buffers_measured"] is True and age["live"]["live_jobs"] == {"0": 23, "1": 8, "2": 90, "3": 7, "4": 3}
    for p in age["probes"]:
        for side in ("empty", "aged"):
            assert p[side]["calls"] == 2 and p[side]["buffers_per_call"] >= 0 and p[side]["statements"] is not None
        assert p["ratio_median"] > 0 and bench_age.verdict(p) in ("within", "over")
    aged_jobs = next(t for t in age["sizes"]["aged"]["tables"] if t["table"] == "broker_jobs")
    assert aged_jobs["heap_bytes"] > next(t for t in age["sizes"]["empty"]["tables"]
                                          if t["table"] == "broker_jobs")["heap_bytes"]
    page = markdown(results)
    assert "Smaller than the bench's defaults" in page and "finished jobs 3,000 (default 10,000,000)" in page
    assert all(f"| {p['probe']} |" in page for p in age["probes"])


def test_committed_age_page_is_generated_from_its_json():
    from bench.age_page import markdown
    page, src = ROOT / "docs" / "benchmarks-age.md", ROOT / "docs" / "benchmarks-age.json"
    assert page.read_text() == markdown(json.loads(src.read_text()), "docs/benchmarks-age.json", "docs/benchmarks-age.md")
