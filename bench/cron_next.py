#!/usr/bin/env python3
"""Cost of broker_cron_next on random expressions (not a test).

N random five-field expressions (values, ranges, lists, steps, names; seed fixed) with random
start times over ten years, evaluated in one statement per run, in UTC and in
Europe/Berlin / America/New_York / Australia/Lord_Howe (daylight saving). Prints the mean
microseconds per call (median of ROUNDS runs) and writes bench/results/cron_next.json.
Expects PG* to point at a server with pgsql_broker installed (`make bench` starts one).
"""
from __future__ import annotations

import json
import os
import random
import statistics
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psycopg

N = int(os.environ.get("BENCH_CRON_EXPRESSIONS", "5000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
DB = "bench_cron_next"
NAMES = {3: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
         4: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]}
RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


def expression(rng: random.Random) -> str:
    fields = []
    for i, (lo, hi) in enumerate(RANGES):
        if rng.random() < (0.2 if i < 2 else 0.5):
            fields.append("*")
            continue
        a = rng.randint(lo, hi)
        b = rng.randint(min(a + 1, hi), hi)
        step = rng.randint(1, max(1, (hi - lo) // 3))
        name = NAMES.get(i)
        first = name[a - lo] if name and a - lo < len(name) and rng.random() < 0.3 else str(a)
        fields.append(rng.choice([first, f"{first}-{b}", f"{first}-{b}/{step}", f"*/{step}", f"{a},{b}"]))
    return " ".join(fields)


def main() -> None:
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}"')
        admin.execute(f'CREATE DATABASE "{DB}"')
    rng = random.Random(7)
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    exprs = [expression(rng) for _ in range(N)]
    afters = [start + timedelta(seconds=rng.randint(0, 10 * 365 * 86400)) for _ in range(N)]
    results = {}
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgsql_broker")
        for zone in ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"):
            runs = []
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                conn.execute("SELECT count(broker.broker_cron_next(e, a, %s)) FROM unnest(%s::text[], %s::timestamptz[])"
                             " AS t(e, a)", (zone, exprs, afters)).fetchone()
                runs.append((time.perf_counter() - t0) / N * 1e6)
            results[zone] = {"runs_us_per_call": [round(r, 1) for r in runs],
                             "median_us_per_call": round(statistics.median(runs), 1)}
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DB}"')
    print(f"broker_cron_next, {N} random expressions, mean per call (median of {ROUNDS} runs):")
    for zone, r in results.items():
        print(f"  {zone:<22} {r['median_us_per_call']:8.1f} µs")
    out = Path(__file__).resolve().parent / "results" / "cron_next.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"expressions": N, "rounds": ROUNDS, "nproc": os.cpu_count(),
                               "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                               "zones": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
