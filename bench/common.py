"""Shared helpers of the benchmark harness: databases, timing, workers, results.

Everything talks to the cluster named by the PG* variables (`.ci/with-cluster`
sets them). Sizes come from BENCH_* environment variables, see `env_int`.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

import psycopg

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("BENCH_RESULTS_DIR") or ROOT / "bench" / "results")


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, str(default)))


def sql(dbname: str, *statements: str) -> None:
    """Run statements in autocommit mode, one after another."""
    with psycopg.connect(dbname=dbname, autocommit=True) as conn:
        for s in statements:
            conn.execute(s)


def scalar(dbname: str, query: str, params=None):
    with psycopg.connect(dbname=dbname, autocommit=True) as conn:
        return conn.execute(query, params).fetchone()[0]


def create_db(dbname: str, template: str | None = None, *statements: str) -> None:
    """(Re)create a database, optionally from a template, then run statements in it."""
    drop_db(dbname)
    sql("postgres", f'CREATE DATABASE "{dbname}"' + (f' TEMPLATE "{template}"' if template else ""))
    if statements:
        sql(dbname, *statements)


def drop_db(dbname: str) -> None:
    sql("postgres", f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def create_broker_db(dbname: str) -> None:
    """(Re)create a database with pgsql_broker and no job, its superuser's executor made (one broker_add_job
    makes it, which raw INSERTs do not; the job is deleted again)."""
    create_db(dbname, None, "CREATE EXTENSION pgsql_broker", "SELECT broker.broker_add_job('warm', 'SELECT 1')",
              "DELETE FROM broker.broker_jobs")


def start_runner(dbname: str, env: dict | None = None) -> subprocess.Popen:
    """pgbroker-runner at its defaults on one database, as the throwaway cluster's superuser, logging warnings
    only, without its metrics server (env: the process's environment, e.g. another tree's runner on PYTHONPATH)."""
    return subprocess.Popen([sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                             "--dsn", f"dbname={dbname}", "--allow-privileged-login", "--log-level", "warning",
                             "--metrics-port", "0"], stdout=subprocess.DEVNULL, env=env)


def drain_with_runner(conn: psycopg.Connection, dbname: str, poll: float = 0.2) -> None:
    """Start the runner (start_runner) on dbname and stop it once no job there is pending or running (conn: an
    autocommit connection to dbname)."""
    runner = start_runner(dbname)
    try:
        while conn.execute("SELECT EXISTS (SELECT FROM broker.broker_jobs WHERE complete_status < 2)").fetchone()[0]:
            time.sleep(poll)
    finally:
        runner.terminate()
        runner.wait(60)


def _pgbench() -> str:
    """PGBIN's pgbench; a server without one (the npm copies of .ci/pg-bin have only initdb, pg_ctl and postgres)
    is driven by the machine's, any version from 15 (pgbench speaks the protocol, not the server's version)."""
    beside = os.path.join(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"), "pgbench")
    if os.path.exists(beside):
        return beside
    return shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"


PGBENCH = _pgbench()


def pgbench_latencies(dbname: str, scripts: list[Path], seconds: int, user: str | None = None,
                      weights: dict | None = None, env: dict | None = None, prepared: bool = True) -> dict:
    """Mean latency (ms) per script of one pgbench run on dbname: one client, prepared statements (unless
    prepared is false), the scripts chosen at random (weights: {name prefix: weight}, else 1 each), so that
    their means compare like with like on a noisy machine; env: added to the process's environment."""
    argv = [PGBENCH, "-n"] + (["-M", "prepared"] if prepared else []) + ["-c", "1", "-T", str(seconds)]
    for s in scripts:
        w = next((v for k, v in (weights or {}).items() if s.stem.startswith(k)), 1)
        argv += ["-f", f"{s}@{w}"]
    if user:
        argv += ["-U", user]
    done = subprocess.run(argv + [dbname], capture_output=True, text=True, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"pgbench exited with {done.returncode}: {done.stderr.strip()[-2000:]}")
    found = re.findall(r"SQL script \d+: (\S+)\n(?:.*\n)*? - latency average = ([0-9.]+) ms", done.stdout)
    if len(found) != len(scripts):
        raise RuntimeError(f"pgbench printed {len(found)} latencies for {len(scripts)} scripts:\n{done.stdout}")
    return {Path(name).stem: float(ms) for name, ms in found}


def machine_facts() -> dict:
    with psycopg.connect(dbname="postgres") as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        settings = dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name IN "
                                     "('shared_buffers', 'synchronous_commit', 'fsync', 'max_connections')").fetchall())
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "server_version": version, "settings": settings,
            "loadavg_at_start": os.getloadavg()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentiles(values_ms: list[float]) -> dict:
    """p50/p95/p99 (nearest rank), max and mean of a list of milliseconds."""
    lat = sorted(values_ms)
    pct = {f"p{p}_ms": lat[min(len(lat) - 1, max(0, int(round(p / 100 * len(lat))) - 1))] for p in (50, 95, 99)}
    return {**pct, "max_ms": lat[-1], "mean_ms": statistics.mean(lat), "jobs": len(lat)}


def median_of(runs: list[dict]) -> dict:
    """Per-key median over runs of flat dicts of numbers (non-numbers are taken from the first run)."""
    out = {}
    for key, first in runs[0].items():
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
        if len(values) < len(runs) or len(set(values)) == 1:
            out[key] = first  # a label, or a size every run shares
        else:
            out[key] = statistics.median(values)
    return out


class Worker:
    """A worker process (pgbroker-runner or a peer's worker) stopped with SIGTERM."""

    def __init__(self, argv: list[str], cwd: Path | None = None):
        RESULTS.mkdir(exist_ok=True)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, cwd=cwd)

    def stop(self, timeout: float = 60) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float, what: str,
                     interval: float = 0.05, worker: Worker | None = None) -> float:
    """Poll an async predicate until it is true; returns the time.monotonic() it became true.
    Fails at once when the worker process has exited."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if worker is not None and worker.proc.poll() is not None:
            raise RuntimeError(f"the worker exited with code {worker.proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(interval)
    return time.monotonic()


async def timed_drain(remaining: Callable[[], Awaitable[int]], n: int, worker: Worker, timeout: float,
                      any_left: Callable[[], Awaitable[int]]) -> dict:
    """After a worker started (monotonic `started`) on n pre-enqueued jobs: poll the number of
    unfinished jobs until the first completion, then whether any is left; the drain time runs from
    the first completion seen to the last. (Counting the unfinished jobs every 50 ms during the
    drain took a third of one core on 20,000 jobs, taken from the system measured.)"""
    started = worker.started
    first = await wait_until(lambda: _below(remaining, n), timeout, "the first completion", 0.02, worker)
    last = await wait_until(lambda: _below(any_left, 1), timeout, f"{n} jobs to complete", 0.05, worker)
    return {"jobs": n, "seconds": last - first, "jobs_per_s": n / (last - first),
            "worker_start_to_first_s": first - started}


async def _below(remaining: Callable[[], Awaitable[int]], limit: int) -> bool:
    return await remaining() < limit


async def timed_loop(call: Callable[[], Awaitable[object]], count: int, per_call: int = 1) -> dict:
    """Call `call` count times in a row; jobs/s counts per_call jobs a call."""
    t0 = time.perf_counter()
    for _ in range(count):
        await call()
    elapsed = time.perf_counter() - t0
    return {"jobs": count * per_call, "seconds": elapsed, "jobs_per_s": count * per_call / elapsed}


async def latency_loop(enqueue: Callable[[], Awaitable[object]], n: int, interval: float = 0.01) -> dict:
    """Enqueue n jobs one every ~interval; returns {job key: t0}, t0 = time.time() just before the call."""
    t0s = {}
    for _ in range(n):
        t0 = time.time()
        key = await enqueue()
        t0s[key] = t0
        await asyncio.sleep(interval)
    return t0s


def latency_result(t0s: dict, starts: dict) -> dict:
    missing = [k for k in t0s if k not in starts]
    if missing:
        raise RuntimeError(f"{len(missing)} of {len(t0s)} latency jobs have no start time (e.g. {missing[0]})")
    return percentiles([(starts[k] - t0) * 1000 for k, t0 in t0s.items()])


def write_json(name: str, data: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    return path


def write_page(results_path: str, dst_path: str, render) -> None:
    """A generated docs page: render(results, src, dst) written to dst_path and, beside it, the JSON it was
    made from (bench/results/ is not committed), which the page names as its source."""
    results, dst = json.loads(Path(results_path).read_text()), Path(dst_path)
    copy = dst.with_suffix(".json")
    copy.write_text(json.dumps(results, indent=2, default=str) + "\n")
    dst.write_text(render(results, str(copy), str(dst)))
    print(f"wrote {dst} and {copy}")


def fmt(value, unit: str = "") -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "-"
    return f"{value:,.0f}{unit}" if abs(value) >= 100 else f"{value:,.2f}{unit}"


def print_table(headers: list[str], rows: list[list]) -> None:
    """A Markdown table (readable in a terminal and pasteable into the README)."""
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    print(line(headers))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        print(line(r))
