"""The results table (printed by run.py, read by plot.py): medians from a results JSON."""
from __future__ import annotations

import json
import sys

from . import common
from .broker_workloads import FALLBACK

BROKER = "pgsql_broker"
# (row label, workload, key path inside the median, key path for the peers or None)
ROWS = [
    ("drain, jobs/s", "drain", ("jobs_per_s",), ("jobs_per_s",)),
    ("enqueue single (1 job/transaction), jobs/s", "enqueue", ("single", "jobs_per_s"), ("single", "jobs_per_s")),
    ("enqueue batch 1000 (set-based call), jobs/s", "enqueue", ("batch 1000: broker_add_jobs", "jobs_per_s"),
     ("batch 1000", "jobs_per_s")),
    ("enqueue " + FALLBACK + ", jobs/s", "enqueue", (FALLBACK, "jobs_per_s"), None),
    ("latency p50, ms", "latency", ("p50_ms",), ("p50_ms",)),
    ("latency p95, ms", "latency", ("p95_ms",), ("p95_ms",)),
    ("latency p99, ms", "latency", ("p99_ms",), ("p99_ms",)),
]


def _dig(d, path):
    for k in path:
        if isinstance(d, str) or d is None:
            return d
        d = d.get(k)
    return d


def headline(results: dict) -> list[tuple[str, dict]]:
    """[(row label, {system: value or 'n/a ...' string})] for the rows that were measured."""
    out = []
    for label, workload, path, peer_path in ROWS:
        values = {}
        for name, entry in results["systems"].items():
            median = entry["median"].get(workload)
            if median is None:
                continue
            values[name] = _dig(median, path if name == BROKER else peer_path) if (name == BROKER or peer_path) else None
        if values:
            out.append((label, values))
    return out


def print_report(results: dict) -> None:
    names = list(results["systems"])
    peers = [n for n in names if n != BROKER]
    runs = results["runs"]
    rows = []
    for label, values in headline(results):
        row = [label] + [common.fmt(values.get(n)) for n in names]
        for p in peers:
            b, v = values.get(BROKER), values.get(p)
            row.append(f"{b / v:.2f}" if isinstance(b, (int, float)) and isinstance(v, (int, float)) and v else "-")
        rows.append(row)
    if rows:
        print(f"median of {runs} run(s)" + ("; ratio = pgsql_broker / peer (throughput: > 1 is faster; latency: < 1 "
                                            "is faster)" if peers else ""))
        common.print_table(["workload"] + names + [f"ratio vs {p}" for p in peers], rows)
    broker = results["systems"].get(BROKER, {})
    extra = []
    if "ceiling" in results:
        c = results["ceiling"]
        extra.append((f"claim+complete ceiling (pgbench, {c['clients']} clients, up to {c['per_claim']} jobs a claim), jobs/s",
                      f"{c['jobs_per_s']:,.0f}"))
        if "drain_ratio" in c:
            extra.append(("pgsql_broker drain / ceiling, median of the runs' ratios (target >= 0.50)",
                          f"{c['drain_ratio']:.2f} (runs: {', '.join(f'{x:.2f}' for x in c['drain_ratio_runs'])})"))
        else:
            drain = broker.get("median", {}).get("drain", {}).get("jobs_per_s")
            if drain:
                extra.append(("pgsql_broker drain / ceiling (target >= 0.50)", f"{drain / c['jobs_per_s']:.2f}"))
    if "backlog" in broker:
        b = broker["backlog"]
        extra += [(f"claim (broker_get) latency, empty (only {b['ready']:,} ready jobs)", f"{b['median_latency_ms']['empty']:.3f} ms"),
                  (f"claim latency, {b['finished']:,} finished + {b['blocked']:,} blocked + {b['future']:,} future",
                   f"{b['median_latency_ms']['backlog']:.3f} ms"),
                  ("claim latency ratio backlog / empty (target < 1.5)", f"{b['ratio']:.2f}")]
    if "deps" in broker:
        d = broker["deps"]["median"]
        extra += [(f"complete a job {d['jobs']:,} jobs wait on (by group)", f"{d['complete_fan_in_ms']:.1f} ms"),
                  (f"then release the deferred rest: {d.get('release_rest_claims', 0):.0f} calls",
                   f"{d.get('release_rest_ms', 0):.1f} ms"),
                  ("complete a job nobody waits on", f"{d['complete_no_dependents_ms']:.1f} ms"),
                  (f"enqueue into a {d['jobs']:,}-job graph (cycle-check walk)", f"{d['enqueue_into_graph_ms']:.1f} ms"),
                  ("same enqueue, group nobody waits on (no walk)", f"{d['enqueue_no_walk_ms']:.1f} ms")]
    if "cron" in broker:
        c = broker["cron"]
        extra += [(f"broker_cron_next, {c['expressions']:,} random expressions, {zone}", f"{v['median_us_per_call']:.1f} µs a call")
                  for zone, v in c.items() if isinstance(v, dict)]
    if extra:
        print()
        common.print_table(["pgsql_broker only", f"median of {runs}"], [list(e) for e in extra])


if __name__ == "__main__":
    print_report(json.loads(open(sys.argv[1]).read()))
