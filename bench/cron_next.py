"""Cost of broker_cron_next on random expressions (not a test; workload `cron` of bench/run.py).

N random five-field expressions (values, ranges, lists, steps, names; seed fixed) with random
start times over ten years, evaluated in one statement per run, in UTC and in
Europe/Berlin / America/New_York / Australia/Lord_Howe (daylight saving). Prints the mean
microseconds per call (median of the runs).
"""
from __future__ import annotations

import random
import statistics
import time
from datetime import datetime, timedelta, timezone

import psycopg

from . import common

N = common.env_int("BENCH_CRON_EXPRESSIONS", 5000)
DB = "bench_cron_next"
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe")
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


def run(template: str, runs: int) -> dict:
    common.create_db(DB, template)
    rng = random.Random(7)
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    exprs = [expression(rng) for _ in range(N)]
    afters = [start + timedelta(seconds=rng.randint(0, 10 * 365 * 86400)) for _ in range(N)]
    results = {"expressions": N}
    try:
        with psycopg.connect(dbname=DB, autocommit=True) as conn:
            for zone in ZONES:
                per_call = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    conn.execute("SELECT count(broker.broker_cron_next(e, a, %s))"
                                 " FROM unnest(%s::text[], %s::timestamptz[]) AS t(e, a)", (zone, exprs, afters))
                    per_call.append((time.perf_counter() - t0) / N * 1e6)
                results[zone] = {"runs_us_per_call": [round(r, 1) for r in per_call],
                                 "median_us_per_call": round(statistics.median(per_call), 1)}
                print(f"  cron     {zone:20s} {results[zone]['median_us_per_call']:.1f} µs per call", flush=True)
    finally:
        common.drop_db(DB)
    return results
