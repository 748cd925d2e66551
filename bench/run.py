"""Benchmark entry point (not a test): `python -m bench.run [--only ...] [--peers] [--runs N]`.

Runs against the cluster named by PG* (`make bench` / `make bench-peers` start a
throwaway one), prints a table and writes bench/results/<name>.json. Runs of the
common workloads are interleaved across systems (run 1 of every system, then
run 2, ...) so that ratios come from the same conditions.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from . import age, broker_deps, ceiling, claim_backlog, common, cron_next, held_snapshot, purge, queue_stats, scale, workloads
from .broker_workloads import Broker
from .report import print_report

ALL = ("drain", "enqueue", "latency", "ceiling", "backlog", "held", "deps", "cron", "purge", "stats", "scale", "parts", "age")
# what runs without --only: all but the age bench (10 million finished jobs to write: `make bench-age`)
DEFAULT = tuple(w for w in ALL if w != "age")


# every peer at its documented defaults, plus pg-boss with its documented opt-ins (at its defaults
# a pg-boss worker takes 1 job every 2 seconds, so its drain and latency cannot run)
PEERS = ("pgqueuer", "procrastinate", "graphile-worker", "pg-boss", "pg-boss-tuned")
# --extras: the configurations earlier versions of this harness used, as labelled rows
EXTRAS = ("pgqueuer-capped", "procrastinate-c4")


def make_system(name: str):
    """The adapter of a system key (peers imported here: their packages live in bench/.venv-peers)."""
    if name == "pgsql_broker-tasks":
        from .task_workloads import BrokerTasks
        return BrokerTasks()
    if name == "pgsql_broker-baseline":
        from .broker_workloads import BrokerBaseline
        return BrokerBaseline()
    if name.startswith("pgqueuer"):
        from .peers.pgqueuer_workloads import PgQueuerSystem
        return PgQueuerSystem({"pgqueuer": "defaults", "pgqueuer-capped": "capped"}[name])
    if name.startswith("procrastinate"):
        from .peers.procrastinate_workloads import ProcrastinateSystem
        return ProcrastinateSystem({"procrastinate": None, "procrastinate-c4": 4}[name])
    from .peers import js_workloads
    return {"graphile-worker": js_workloads.graphile_worker, "pg-boss": js_workloads.pg_boss,
            "pg-boss-tuned": js_workloads.pg_boss_tuned}[name]()


def systems(with_peers: bool, extras: bool = False, only: str | None = None) -> list:
    names = [n.strip() for n in only.split(",") if n.strip()] if only else \
        list(PEERS if with_peers else ()) + list(EXTRAS if extras else ())
    # with the peers, the task worker too: handlers in a process of their own, as the peers run theirs
    ours = [Broker()] + ([make_system("pgsql_broker-tasks")] if with_peers and not only else [])
    return ours + [make_system(n) for n in names if n != "pgsql_broker"]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(DEFAULT), help=f"comma-separated subset of {','.join(ALL)}")
    ap.add_argument("--peers", action="store_true", help=f"also run the peers: {', '.join(PEERS)}")
    ap.add_argument("--extras", action="store_true", help=f"also the labelled non-default rows: {', '.join(EXTRAS)}")
    ap.add_argument("--systems", help=f"comma-separated peers to run instead (of {', '.join(PEERS + EXTRAS)}; also "
                                      "pgsql_broker-baseline: the tree BENCH_BASELINE names, see bench/broker_workloads.py; "
                                      "pgsql_broker-tasks: the Python task worker, bench/task_workloads.py)")
    ap.add_argument("--runs", type=int, default=common.env_int("BENCH_RUNS", 3), help="runs per workload (median)")
    ap.add_argument("--name", help="results file name (default: bench, or peers with --peers)")
    args = ap.parse_args(argv)
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = set(only) - set(ALL)
    if unknown:
        ap.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    bad = {n.strip() for n in (args.systems or "").split(",") if n.strip()} - set(PEERS + EXTRAS + ("pgsql_broker", "pgsql_broker-baseline", "pgsql_broker-tasks"))
    if bad:
        ap.error(f"unknown system(s): {', '.join(sorted(bad))}")
    with_peers = args.peers or args.extras or bool(args.systems)
    name = args.name or ("peers" if with_peers else "bench")

    facts = common.machine_facts()
    print(f"PostgreSQL {facts['server_version']}; {facts['nproc']} cores; load {facts['loadavg_at_start']}; "
          f"{facts['settings']}", flush=True)
    started = time.monotonic()
    chosen = systems(args.peers, args.extras, args.systems)
    for s in chosen:
        s.make_template()
    results: dict = {"machine": facts, "runs": args.runs, "workloads": only,
                     "invocation": "`python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:]) + "`",
                     "sizes": {"drain_jobs": workloads.N_DRAIN, "single_jobs": workloads.N_SINGLE,
                               "batches": workloads.N_BATCHES, "batch_size": workloads.BATCH,
                               "latency_jobs": workloads.N_LATENCY},
                     "systems": {s.name: {"info": s.info(), "runs": {}, "median": {}} for s in chosen}}
    ceilings: list[dict] = []  # (the ceiling and the floors of each round)
    try:
        for r in range(args.runs):
            for w in (w for w in ("drain", "enqueue", "latency") if w in only):
                for s in chosen:
                    res = s.skip.get(w) or asyncio.run(workloads.WORKLOADS[w](s))
                    results["systems"][s.name]["runs"].setdefault(w, []).append(res)
                    print(f"  run {r + 1} {w:8s} {s.name:14s} {_short(res)}", flush=True)
                if w == "drain" and "ceiling" in only:
                    # right after this round's drains: the ratio compares like with like even when
                    # the machine drifts over the invocation
                    ceilings.append(ceiling.run_one(r))
        for s in chosen:
            entry = results["systems"][s.name]
            for w, runs in entry["runs"].items():
                entry["median"][w] = _median(runs)
        broker = results["systems"]["pgsql_broker"]
        if "ceiling" in only:
            if not ceilings:
                ceilings = [ceiling.run_one(r) for r in range(args.runs)]
            results["ceiling"] = ceiling.summary(ceilings, [d["jobs_per_s"] for d in broker["runs"].get("drain", [])])
        if "backlog" in only:
            broker["backlog"] = claim_backlog.run(chosen[0].template, args.runs)
        if "held" in only:
            broker["held"] = held_snapshot.run(chosen[0].template, args.runs)
        if "deps" in only:
            runs = []
            for r in range(args.runs):
                runs.append(broker_deps.run(chosen[0].template))
                print(f"  run {r + 1} deps     {_short(runs[-1])}", flush=True)
            broker["deps"] = {"runs": runs, "median": common.median_of(runs)}
        if "cron" in only:
            broker["cron"] = cron_next.run(chosen[0].template, args.runs)
        if "purge" in only:
            broker["purge"] = purge.run(chosen[0].template, args.runs)
        if "stats" in only:
            broker["stats"] = queue_stats.run(chosen[0].template, args.runs)
        if "scale" in only:
            broker["scale"] = scale.run(chosen[0].template, args.runs)
        if "age" in only:
            broker["age"] = age.run(chosen[0].template, args.runs)
        if "parts" in only:  # where one enqueue spends its time (bench/enqueue_parts), after the rest
            from .enqueue_parts.__main__ import run as enqueue_parts
            results["enqueue_parts"] = enqueue_parts()
    finally:
        for s in chosen:
            common.drop_db(s.template)
    results["elapsed_s"] = time.monotonic() - started
    path = common.write_json(name, results)
    print()
    print_report(results)
    print(f"\nresults: {path} ({results['elapsed_s']:.0f} s)")
    return results


def _median(runs: list) -> dict | str:
    """Median of each numeric field; nested dicts (enqueue variants) per variant; strings kept."""
    first = runs[0]
    if isinstance(first, str):
        return first  # a workload the system cannot run, with the reason
    if all(isinstance(v, (int, float)) for v in first.values()):
        return common.median_of(runs)
    return {k: (_median([r[k] for r in runs]) if isinstance(v, dict) else v) for k, v in first.items()}


def _short(res: dict | str) -> str:
    if isinstance(res, str):
        return res
    return ", ".join(f"{k}={common.fmt(v) if not isinstance(v, dict) else common.fmt(v.get('jobs_per_s'))}"
                     for k, v in res.items())


if __name__ == "__main__":
    main(sys.argv[1:])
