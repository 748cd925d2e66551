"""What a long history costs: the claim, stats, status and the console on an empty database and after N finished jobs.

Workload `age` of `python -m bench.run --only age` (`make bench-age`). Two databases of the same cluster with the
same live jobs (bench/age_fill.py: a few hundred ready, claimed and blocked jobs over QUEUES queues and TENANTS
tenants, made through the public functions): "empty" has nothing else; "aged" has BENCH_AGE_FINISHED (10,000,000)
finished jobs besides, with their attempts and some dependency edges and schedules, all finished before the
windows the probes read (bench/age_fill.py GAP_MINUTES), then VACUUM ANALYZE.

Each probe is what the code that ships sends, called through its own Python where there is one: the runner's
claim statement (run/queries.py CLAIM, broker_claim_batches) and the public broker_get, each in a transaction
rolled back (so every call finds the same jobs), broker_queue_stats(), the runner's poll and lease recovery,
`pgsql-broker status` (cli._print_status, as a broker_runtime login and as a broker_enqueue login of two
tenants), and every page of the console (observe/console.py ConsoleDatabase: the job list with each of its
filters and its next page, a job's details, its workflow graph, queues, charts, flow, schedules; the runner's
login and an operator's login of broker_admin, as the console uses them). So the bench follows the code: after a
storage redesign it measures the new storage through the same calls.

For each probe and database, BENCH_AGE_CALLS (100) timed calls a run after BENCH_AGE_WARMUP (3) untimed ones (fewer, 10 at least, once
they took BENCH_AGE_PROBE_SECONDS, 20 s), BENCH_RUNS runs, the
databases alternating run by run: median and p95 wall time of a call (client side), and the shared buffers
(hit + read) its statements touched, from pg_stat_statements when the server preloads it (`make bench-age` does;
else the buffers are not measured). Ratio: aged / empty, against the target 1.25 (issue 36).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import sys
import time
import uuid

import psycopg
from psycopg.rows import namedtuple_row

from . import age_fill, common

N_FINISHED = common.env_int("BENCH_AGE_FINISHED", 10_000_000)
CALLS = common.env_int("BENCH_AGE_CALLS", 100)
PROBE_SECONDS = common.env_float("BENCH_AGE_PROBE_SECONDS", 20.0)  # a probe's calls stop past this (10 at least)
WARMUP = common.env_int("BENCH_AGE_WARMUP", 3)
TARGET = 1.25
KEEP = common.env_int("BENCH_AGE_KEEP", 0)  # 1: keep the two databases (to look at plans afterwards)


class Target:
    """One of the two databases, with the sessions the probes use."""

    def __init__(self, label: str, db: str, info: dict):
        from pgsql_broker.observe.console import ConsoleDatabase
        self.label, self.db, self.info = label, db, info
        self.admin = psycopg.connect(dbname="postgres", autocommit=True)  # (pg_stat_statements' view is there)
        self.oid = self.admin.execute("SELECT oid FROM pg_database WHERE datname = %s", (db,)).fetchone()[0]
        self.runner = psycopg.connect(dbname=db, user=age_fill.RUNNER, autocommit=True, row_factory=namedtuple_row)
        self.tenant = psycopg.connect(dbname=db, user=age_fill.TENANT_LOGIN, autocommit=True,
                                      row_factory=namedtuple_row)
        self.console = ConsoleDatabase(db, f"dbname={db} user={age_fill.RUNNER}", f"dbname={db} user={age_fill.OPS}",
                                       "bench-age")
        first_page = self.console.jobs(_filters())["jobs"]
        self.before = first_page[-1]["job_id"]  # the job list's next page starts below its first page's last job

    def close(self) -> None:
        self.admin.close()
        self.runner.close()
        self.tenant.close()


def _filters(**kw):
    from pgsql_broker.observe.console import Filters
    return Filters(**kw)


def _claim_get(t: Target) -> None:
    with t.runner.transaction(force_rollback=True):
        t.runner.execute("SELECT * FROM broker.broker_get(1, %s, 60, 1)", (t.info["instance"],)).fetchall()


def _claim_runner(t: Target) -> None:
    from pgsql_broker.run import queries
    params = {"queue": 1, "instance": t.info["instance"], "lease": 60, "batch": 50, "budget": "200 milliseconds",
              "alone": False, "token": str(uuid.uuid4())}
    with t.runner.transaction(force_rollback=True):
        got = t.runner.execute(queries.CLAIM, params).fetchall()
    if not got:
        raise RuntimeError(f"{t.label}: the runner's claim found no job")


def _sql(statement_name: str, rollback: bool = False):
    def probe(t: Target) -> None:
        from pgsql_broker.run import queries
        if rollback:
            with t.runner.transaction(force_rollback=True):
                t.runner.execute(getattr(queries, statement_name)).fetchall()
        else:
            t.runner.execute(getattr(queries, statement_name)).fetchall()
    return probe


def _poll(t: Target) -> None:
    from pgsql_broker.run import queries
    t.runner.execute(queries.READY_QUEUES).fetchall()
    t.runner.execute(queries.NEXT_DUE).fetchall()


def _status(conn_name: str):
    def probe(t: Target) -> None:
        from pgsql_broker.cli import _print_status
        with contextlib.redirect_stdout(io.StringIO()):
            _print_status(getattr(t, conn_name), t.db)
    return probe


def _jobs(**kw):
    def probe(t: Target) -> None:
        t.console.jobs(_filters(**kw))
    return probe


def _next_page(t: Target) -> None:
    t.console.jobs(_filters(before=t.before))


# (group, name, call): what the target of issue 36 names, in the order of the page
PROBES = [
    ("claim", "broker_get, 1 job (public claim)", _claim_get),
    ("claim", "the runner's claim: broker_claim_batches, up to 50 jobs", _claim_runner),
    ("stats", "broker_queue_stats()", _sql("QUEUE_STATS")),
    ("runner", "the runner's poll: broker_ready_queues(), broker_next_due()", _poll),
    ("runner", "lease recovery: broker_recover_stale_jobs()", _sql("RECOVER", rollback=True)),
    ("status", "pgsql-broker status, broker_runtime login", _status("runner")),
    ("status", "pgsql-broker status, broker_enqueue login of 2 tenants", _status("tenant")),
    ("console", "jobs page, no filter", _jobs()),
    ("console", "jobs page, state failed", _jobs(state=3)),
    ("console", "jobs page, state pending", _jobs(state=0)),
    ("console", "jobs page, finished within 1 h", _jobs(finished_within="1 hour")),
    ("console", "jobs page, name contains 'etl'", _jobs(name="etl")),
    ("console", "jobs page, tenant t3", _jobs(tenant="t3")),
    ("console", "jobs page, queue 2", _jobs(queue=2)),
    ("console", "jobs page, next page", _next_page),
    ("console", "a job's details (a claimed job)",
     lambda t: t.console.job(t.info["running_job"], None, True)),
    ("console", "a job's workflow graph (a blocked job)", lambda t: t.console.graph(t.info["blocked_job"], None)),
    ("console", "queues page", lambda t: t.console.queues()),
    ("console", "charts (finished per minute, 3 h)", lambda t: t.console.charts()),
    ("console", "flow page (tenant shares, key limits)", lambda t: t.console.flow()),
    ("console", "schedules page", lambda t: t.console.schedules(None)),
]


def _pgss() -> bool:
    """Whether pg_stat_statements is loaded (then its view is made in the postgres database)."""
    if "pg_stat_statements" not in common.scalar("postgres", "SELECT current_setting('shared_preload_libraries')"):
        return False
    common.sql("postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


STATEMENTS = """SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 160), calls,
                       shared_blks_hit + shared_blks_read, total_exec_time
                  FROM pg_stat_statements WHERE dbid = %s::oid AND query NOT LIKE '%%pg_stat_statements%%'"""


def _measure(t: Target, name: str, call, pgss: bool) -> dict:
    """One run of a probe on one database; a probe that fails (the console's statement_timeout, ...) is recorded
    with its error, and the bench goes on."""
    from pgsql_broker.observe.console import ConsoleError
    try:
        return _calls(t, call, pgss)
    except (psycopg.Error, ConsoleError, RuntimeError) as exc:
        print(f"  age: {t.label}: {name} failed: {exc}", flush=True)
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _calls(t: Target, call, pgss: bool) -> dict:
    for _ in range(WARMUP):
        call(t)
    if pgss:
        t.admin.execute("SELECT pg_stat_statements_reset(0, %s::oid, 0)", (t.oid,))
    ms: list[float] = []
    started = time.perf_counter()
    while len(ms) < CALLS and (len(ms) < 10 or time.perf_counter() - started < PROBE_SECONDS):
        t0 = time.perf_counter()
        call(t)
        ms.append((time.perf_counter() - t0) * 1000)
    out = {"ms": ms}
    if pgss:
        rows = t.admin.execute(STATEMENTS, (t.oid,)).fetchall()
        out["buffers_per_call"] = sum(r[2] for r in rows) / len(ms)
        out["statements"] = [{"query": q, "calls": c, "buffers_per_call": b / len(ms), "ms_per_call": ms_ / len(ms)}
                             for q, c, b, ms_ in sorted(rows, key=lambda r: -r[2])[:4]]
    return out


def _summary(all_runs: list[dict]) -> dict:
    errors = [r["error"] for r in all_runs if "error" in r]
    runs = [r for r in all_runs if "error" not in r]
    if not runs:
        return {"calls": 0, "median_ms": None, "p95_ms": None, "errors": errors}
    ms = [x for r in runs for x in r["ms"]]
    pct = common.percentiles(ms)
    out = {"calls": len(ms), "median_ms": statistics.median(ms), "p95_ms": pct["p95_ms"],
           "median_ms_runs": [statistics.median(r["ms"]) for r in runs]}
    if "buffers_per_call" in runs[0]:
        out["buffers_per_call"] = statistics.median(r["buffers_per_call"] for r in runs)
        out["statements"] = runs[-1]["statements"]
    if errors:
        out["errors"] = errors
    return out


def _ratio(a, b):
    return a / b if a is not None and b else None


def run(template: str, runs: int) -> dict:
    db, empty = "bench_age", "bench_age_empty"
    out: dict = {"finished_jobs": N_FINISHED, "calls": CALLS, "runs": runs, "target": TARGET,
                 "span_days": age_fill.SPAN_DAYS, "gap_minutes": age_fill.GAP_MINUTES, "tenants": age_fill.TENANTS, "queues": age_fill.QUEUES,
                 "ready": age_fill.READY, "running": age_fill.RUNNING, "recent": age_fill.RECENT}
    targets: list[Target] = []
    try:
        common.create_db(db, template)
        t0 = time.monotonic()
        info = age_fill.prepare(db)
        out["live"] = info
        common.create_db(empty, db)  # (the same live jobs, ids and all)
        print(f"  age: live jobs {info['live_jobs']} in both databases ({time.monotonic() - t0:.0f} s)", flush=True)
        t1 = time.monotonic()
        out["fill"] = age_fill.fill(db, N_FINISHED, info["schedules"], lambda line: print(line, flush=True))
        out["fill"]["total_s"] = time.monotonic() - t1
        out["sizes"] = {"empty": age_fill.sizes(empty), "aged": age_fill.sizes(db)}
        pgss = _pgss()
        out["buffers_measured"] = pgss
        targets = [Target("empty", empty, info), Target("aged", db, info)]
        raw: dict = {name: {"empty": [], "aged": []} for _, name, _ in PROBES}
        for r in range(runs):
            for t in (targets if r % 2 == 0 else targets[::-1]):
                for _, name, call in PROBES:
                    raw[name][t.label].append(_measure(t, name, call, pgss))
            print(f"  age: run {r + 1} of {runs} measured", flush=True)
        out["probes"] = []
        for group, name, _ in PROBES:
            e, a = _summary(raw[name]["empty"]), _summary(raw[name]["aged"])
            row = {"group": group, "probe": name, "empty": e, "aged": a,
                   "ratio_median": _ratio(a["median_ms"], e["median_ms"]), "ratio_p95": _ratio(a["p95_ms"], e["p95_ms"]),
                   "ratio_buffers": _ratio(a.get("buffers_per_call"), e.get("buffers_per_call"))}
            out["probes"].append(row)
        out["loadavg_at_end"] = list(os.getloadavg())
    finally:
        for t in targets:
            t.close()
        if not KEEP:
            common.drop_db(db)
            common.drop_db(empty)
    _print(out)
    return out


def verdict(row: dict) -> str:
    """Within the target when the buffers (else the median time) of the aged database stay within 1.25x; "error"
    when a run of the probe failed on either database."""
    if row["empty"].get("errors") or row["aged"].get("errors"):
        return "error"
    ratio = row["ratio_buffers"] if row["ratio_buffers"] is not None else row["ratio_median"]
    return "within" if ratio is not None and ratio <= TARGET else "over"


def _print(out: dict) -> None:
    print()
    rows = [[p["probe"], common.fmt(p["empty"]["median_ms"]), common.fmt(p["aged"]["median_ms"]),
             common.fmt(p["ratio_median"]), common.fmt(p["empty"].get("buffers_per_call")),
             common.fmt(p["aged"].get("buffers_per_call")), common.fmt(p["ratio_buffers"]), verdict(p)]
            for p in out["probes"]]
    common.print_table(["probe", "empty ms", f"{out['finished_jobs']:,} finished ms", "ratio", "empty buffers",
                        "aged buffers", "ratio", f"<= {TARGET}"], rows)


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--markdown":
        from .age_page import markdown
        common.write_page(argv[1], argv[2], markdown)
    else:  # python -m bench.age TEMPLATE_DB [RUNS]
        print(json.dumps(run(argv[0], int(argv[1]) if len(argv) > 1 else 1), indent=2, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
