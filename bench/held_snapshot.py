"""The claim under a held snapshot, and on a table without statistics (pgsql_broker only).

held   N jobs (BENCH_HELD_JOBS, 50,000) flow through claim and completion at a fixed rate
       (BENCH_HELD_RATE, 250 jobs/s): every tick one INSERT of BENCH_HELD_BATCH (10) ready
       jobs into queue 1, one claim of up to that many (`broker_get`, its own transaction, run
       under EXPLAIN (ANALYZE, BUFFERS): its execution time and the buffers it and every
       statement inside it touched), one `broker_run_batch` of what it claimed (its own
       transaction). Once with nothing else open ("free"), once while another session holds a
       REPEATABLE READ transaction that took its snapshot before the first job ("held"); each
       case on a fresh database, the cases alternate run by run. Reported per case: mean and p99
       claim time and mean buffers, over the whole flow and over its last 10% (the cost "after N
       jobs"), the dead tuples of broker_jobs at the end, and the held / free ratios.
stats  BENCH_NOSTATS_READY (60,000) ready jobs inserted into a fresh table (autovacuum off for it,
       so no autoanalyze interferes), then BENCH_NOSTATS_CLAIMS (20) claims of 10 before ANALYZE
       and as many after it: mean claim time and buffers of each, and their ratio.

`make bench-held` runs both (`python -m bench.run --only held`) and writes the docs page
docs/benchmarks-held.md from the results JSON (`python -m bench.held_snapshot --markdown
RESULTS.json OUT.md`): every figure on it comes from the JSON.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid

import psycopg

from . import common

N = common.env_int("BENCH_HELD_JOBS", 50_000)
RATE = common.env_float("BENCH_HELD_RATE", 250.0)
BATCH = common.env_int("BENCH_HELD_BATCH", 10)
STATS_READY = common.env_int("BENCH_NOSTATS_READY", 60_000)
STATS_CLAIMS = common.env_int("BENCH_NOSTATS_CLAIMS", 20)

INSERT = ("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
          "SELECT 'flow', 'flow', 'SELECT 1', 1 FROM generate_series(1, %s)")
# (into a temporary table: EXPLAIN ANALYZE discards a SELECT's rows; a temporary table's dead rows
# are pruned whatever snapshot another session holds)
CLAIMED = "CREATE TEMP TABLE claimed (job_id bigint, lease_token uuid)"
CLAIM = ("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
         "INSERT INTO claimed SELECT job_id, lease_token FROM broker.broker_get(1, NULL, 60, %s)")


def _claim(conn: psycopg.Connection, size: int) -> tuple[float, int, int]:
    """One measured claim: (execution ms, shared buffers touched, jobs claimed); the claimed jobs
    are then run and completed with broker_run_batch."""
    plan = conn.execute(CLAIM, (size,)).fetchone()[0][0]
    top = plan["Plan"]
    buffers = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
    ids = conn.execute("WITH c AS (DELETE FROM claimed RETURNING *) "
                       "SELECT array_agg(job_id), array_agg(lease_token) FROM c").fetchone()
    n = 0
    if ids[0]:
        n = len(ids[0])
        conn.execute("SELECT count(*) FROM broker.broker_run_batch(%s, %s)", ids)
    return plan["Execution Time"], buffers, n


def _summary(values: list[tuple[float, int, int]]) -> dict:
    ms = [v[0] for v in values]
    buf = [v[1] for v in values]
    pct = common.percentiles(ms)
    return {"claims": len(values), "mean_ms": statistics.mean(ms), "p99_ms": pct["p99_ms"],
            "mean_buffers": statistics.mean(buf), "max_buffers": max(buf)}


def flow(template: str, held: bool) -> dict:
    db = f"bench_held_{uuid.uuid4().hex[:6]}"
    common.create_db(db, template)
    holder = None
    try:
        if held:
            holder = psycopg.connect(dbname=db)
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT count(*) FROM broker.broker_jobs").fetchone()  # takes the snapshot
        values = []
        with psycopg.connect(dbname=db, autocommit=True) as conn:
            conn.execute(CLAIMED)
            tick = BATCH / RATE
            t_next = time.monotonic()
            done = 0
            while done < N:
                conn.execute(INSERT, (BATCH,))
                ms, buf, n = _claim(conn, BATCH)
                if n != BATCH:
                    raise RuntimeError(f"claimed {n} jobs, expected {BATCH}")
                values.append((ms, buf, n))
                done += n
                t_next += tick
                delay = t_next - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            dead = conn.execute("SELECT n_dead_tup FROM pg_stat_user_tables "
                                "WHERE relid = 'broker.broker_jobs'::regclass").fetchone()[0]
            claim_idx = conn.execute("SELECT pg_relation_size('broker.broker_jobs_claim_idx')").fetchone()[0]
        tail = values[-max(1, len(values) // 10):]
        step = max(1, len(values) // 10)
        deciles = [round(statistics.mean(v[0] for v in values[i:i + step]), 3) for i in range(0, len(values), step)]
        return {"jobs": done, "all": _summary(values), "last_10pct": _summary(tail), "mean_ms_by_tenth": deciles,
                "n_dead_tup": dead, "claim_idx_bytes": claim_idx, "loadavg_at_end": os.getloadavg()[0]}
    finally:
        if holder is not None:
            holder.close()
        common.drop_db(db)


def stats_case(template: str) -> dict:
    db = f"bench_stats_{uuid.uuid4().hex[:6]}"
    common.create_db(db, template, "ALTER TABLE broker.broker_jobs SET (autovacuum_enabled = false)")
    try:
        with psycopg.connect(dbname=db, autocommit=True) as conn:
            conn.execute(CLAIMED)
            conn.execute(INSERT, (STATS_READY,))
            out = {}
            for label in ("no_stats", "analyzed"):
                if label == "analyzed":
                    conn.execute("ANALYZE broker.broker_jobs")
                out[label] = _summary([_claim(conn, BATCH) for _ in range(STATS_CLAIMS)])
        out["ratio"] = out["no_stats"]["mean_ms"] / out["analyzed"]["mean_ms"]
        return out
    finally:
        common.drop_db(db)


def run(template: str, runs: int) -> dict:
    out: dict = {"jobs": N, "rate": RATE, "batch": BATCH, "nostats_ready": STATS_READY, "nostats_claims": STATS_CLAIMS,
                 "runs": {"free": [], "held": []}, "stats": []}
    for r in range(runs):
        for case in ("free", "held"):
            res = flow(template, case == "held")
            out["runs"][case].append(res)
            print(f"  run {r + 1} held-snapshot {case}: mean {res['all']['mean_ms']:.2f} ms, "
                  f"last 10% mean {res['last_10pct']['mean_ms']:.2f} ms p99 {res['last_10pct']['p99_ms']:.2f} ms "
                  f"{res['last_10pct']['mean_buffers']:.0f} buffers; dead tuples {res['n_dead_tup']}", flush=True)
        s = stats_case(template)
        out["stats"].append(s)
        print(f"  run {r + 1} no-statistics claim: {s['no_stats']['mean_ms']:.2f} ms "
              f"({s['no_stats']['mean_buffers']:.0f} buffers), analyzed {s['analyzed']['mean_ms']:.2f} ms "
              f"({s['analyzed']['mean_buffers']:.0f} buffers): x{s['ratio']:.2f}", flush=True)
    med = {case: {part: {k: statistics.median(r[part][k] for r in rs) for k in rs[0][part]}
                  for part in ("all", "last_10pct")} for case, rs in out["runs"].items()}
    out["median"] = med
    out["ratio_last_10pct_mean"] = med["held"]["last_10pct"]["mean_ms"] / med["free"]["last_10pct"]["mean_ms"]
    out["ratio_last_10pct_p99"] = med["held"]["last_10pct"]["p99_ms"] / med["free"]["last_10pct"]["p99_ms"]
    out["ratio_last_10pct_buffers"] = (med["held"]["last_10pct"]["mean_buffers"]
                                       / med["free"]["last_10pct"]["mean_buffers"])
    out["ratio_all_mean"] = med["held"]["all"]["mean_ms"] / med["free"]["all"]["mean_ms"]
    out["stats_median_ratio"] = statistics.median(s["ratio"] for s in out["stats"])
    # run by run: each held run against the free run just before it
    out["ratio_last_10pct_mean_runs"] = [h["last_10pct"]["mean_ms"] / f["last_10pct"]["mean_ms"]
                                         for f, h in zip(out["runs"]["free"], out["runs"]["held"])]
    return out


GENERATED = ("<!-- Generated by `python -m bench.held_snapshot --markdown RESULTS.json {dst}` (`make bench-held` "
             "runs it) from {src}, its copy of the results: do not edit by hand; "
             "tests_py/acceptance/test_bench_harness_runs.py checks that this page is what the generator makes "
             "of that JSON. -->")
FULL = {"runs": 3, "jobs": 50_000, "nostats_ready": 60_000}


def smoke_reasons(results: dict) -> list[str]:
    """Why a run is a smoke run (fewer runs or smaller sizes than FULL), or [] for a full run."""
    h = results["systems"]["pgsql_broker"]["held"]
    have = {"runs": results["runs"], "jobs": h["jobs"], "nostats_ready": h.get("nostats_ready", 0)}
    return [f"{k.replace('_', ' ')} {have[k]:,} (default {v:,})" for k, v in FULL.items() if have[k] < v]


def markdown(results: dict, src: str = "docs/benchmarks-held.json", dst: str = "docs/benchmarks-held.md") -> str:
    """The docs page of the held-snapshot and no-statistics figures, every one from `results`."""
    m, h = results["machine"], results["systems"]["pgsql_broker"]["held"]
    med = h["median"]
    out = ["# Claims under a held snapshot", "", GENERATED.format(src=src, dst=dst), ""]
    why = smoke_reasons(results)
    if why:
        out += ["!!! warning \"Smoke run, not results\"", "",
                "    These figures come from a smoke run of the harness: " + "; ".join(why) + ". They show that "
                "the harness runs, not how fast the claim is.", ""]
    la = m.get("loadavg_at_start") or [0.0]
    out += [f"`make bench-held`, {m['date']} (UTC), {m['nproc']} cores, load average {la[0]:.2f} at the start, "
            f"PostgreSQL {m['server_version']} ({', '.join(f'{k} {v}' for k, v in sorted(m['settings'].items()))}); "
            f"{results['runs']} run(s), each a flow with no other transaction (\"free\") then one while another "
            f"session holds a `REPEATABLE READ` snapshot taken before the first job (\"held\"), each in a fresh "
            f"database: {h['jobs']:,} jobs at {h['rate']:,.0f} jobs/s, one `INSERT` of {h['batch']} jobs and one "
            f"claim of up to {h['batch']} a tick; {results.get('elapsed_s', 0):.0f} s in all. What the workload "
            "measures: [Benchmarks](benchmarks.md#workloads); why the claim keeps its cost: "
            "[Benchmarks](benchmarks.md#claims-under-a-held-snapshot-and-without-statistics).", "",
            f"## The claim after {h['jobs']:,} jobs (medians of the runs)", "",
            "| | no other transaction | snapshot held | held ÷ free |", "|---|---|---|---|"]
    f, hd = med["free"], med["held"]
    out += [f"| claim, last 10% of the flow: mean ms | {f['last_10pct']['mean_ms']:.2f} | "
            f"{hd['last_10pct']['mean_ms']:.2f} | **{h['ratio_last_10pct_mean']:.2f}** (target ≤ 2) |",
            f"| claim, last 10%: p99 ms | {f['last_10pct']['p99_ms']:.2f} | {hd['last_10pct']['p99_ms']:.2f} | "
            f"{h['ratio_last_10pct_p99']:.2f} |",
            f"| claim, last 10%: shared buffers touched, mean | {f['last_10pct']['mean_buffers']:,.0f} | "
            f"{hd['last_10pct']['mean_buffers']:,.0f} | {h['ratio_last_10pct_buffers']:.2f} |",
            f"| claim, whole flow: mean ms | {f['all']['mean_ms']:.2f} | {hd['all']['mean_ms']:.2f} | "
            f"{h['ratio_all_mean']:.2f} |", "",
            "## Every run", "",
            "| run | case | whole flow: mean ms | last 10%: mean / p99 ms, buffers | mean ms of each tenth of the flow "
            "| dead tuples of broker_jobs at the end | claim index, KiB | load at the end |",
            "|---|---|---|---|---|---|---|---|"]
    for i, (fr, hr) in enumerate(zip(h["runs"]["free"], h["runs"]["held"]), start=1):
        for case, r in (("free", fr), ("held", hr)):
            out.append(f"| {i} | {case} | {r['all']['mean_ms']:.2f} | {r['last_10pct']['mean_ms']:.2f} / "
                       f"{r['last_10pct']['p99_ms']:.2f}, {r['last_10pct']['mean_buffers']:,.0f} | "
                       f"{', '.join(f'{x:.2f}' for x in r['mean_ms_by_tenth'])} | {r['n_dead_tup']:,} | "
                       f"{r['claim_idx_bytes'] / 1024:,.0f} | {r.get('loadavg_at_end', 0):.2f} |")
    out += ["", "Held ÷ free run by run (last 10%, mean): "
            + ", ".join(f"{x:.2f}" for x in h["ratio_last_10pct_mean_runs"]) + ".", "",
            "## The claim on a table without statistics", "",
            f"{h.get('nostats_ready', 0):,} ready jobs inserted into a fresh table (autovacuum off for it), "
            f"then {h.get('nostats_claims', 0)} claims of {h['batch']} before `ANALYZE` and as many after it.", "",
            "| run | never analyzed: mean ms, buffers | after ANALYZE: mean ms, buffers | ratio |", "|---|---|---|---|"]
    for i, st in enumerate(h["stats"], start=1):
        out.append(f"| {i} | {st['no_stats']['mean_ms']:.2f}, {st['no_stats']['mean_buffers']:,.0f} | "
                   f"{st['analyzed']['mean_ms']:.2f}, {st['analyzed']['mean_buffers']:,.0f} | {st['ratio']:.2f} |")
    out += ["", f"Median ratio: {h['stats_median_ratio']:.2f}."]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--markdown":
        common.write_page(argv[1], argv[2], markdown)
    else:  # python -m bench.held_snapshot TEMPLATE_DB [RUNS]
        print(json.dumps(run(argv[0], int(argv[1]) if len(argv) > 1 else 1), indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])


