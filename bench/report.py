"""The results tables from a results JSON: printed by run.py, read by plot.py, and the peer
comparison page of the docs (`python -m bench.report --markdown bench/results/peers.json
docs/benchmarks-peers.md`, run by `make bench-peers`): every figure comes from the JSON.

    python -m bench.report RESULTS.json                    the terminal tables
    python -m bench.report --markdown RESULTS.json OUT.md  the docs page
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import common
from .broker_workloads import ARRAYS, FALLBACK, FLOOR_BATCH, FLOOR_SINGLE

BROKER = "pgsql_broker"


def ours(name: str) -> bool:
    """pgsql_broker, or the same from a baseline tree (pgsql_broker-baseline): never a peer."""
    return name == BROKER or name.startswith(BROKER + "-")


COMMON = ("drain", "enqueue", "latency")  # the workloads every system runs (or says why it cannot)
# (row label, workload, key path inside the median, key path for the peers or None, higher is better)
ROWS = [
    ("drain, jobs/s", "drain", ("jobs_per_s",), ("jobs_per_s",), True),
    ("enqueue single (1 job/transaction), jobs/s", "enqueue", ("single", "jobs_per_s"), ("single", "jobs_per_s"), True),
    ("enqueue batch 1000 (set-based call), jobs/s", "enqueue", ("batch 1000: broker_add_jobs", "jobs_per_s"),
     ("batch 1000", "jobs_per_s"), True),
    ("enqueue " + ARRAYS + " (set-based, one array per field), jobs/s", "enqueue", (ARRAYS, "jobs_per_s"),
     ("batch 1000", "jobs_per_s"), True),
    ("enqueue " + FALLBACK + ", jobs/s", "enqueue", (FALLBACK, "jobs_per_s"), None, True),
    ("enqueue " + FLOOR_SINGLE + " (no rules; not an API: the floor under broker_add_job), jobs/s", "enqueue",
     (FLOOR_SINGLE, "jobs_per_s"), ("single", "jobs_per_s"), True),
    ("enqueue " + FLOOR_BATCH + " (no rules; not an API: the floor under the batch calls), jobs/s", "enqueue",
     (FLOOR_BATCH, "jobs_per_s"), ("batch 1000", "jobs_per_s"), True),
    ("latency p50, ms", "latency", ("p50_ms",), ("p50_ms",), False),
    ("latency p95, ms", "latency", ("p95_ms",), ("p95_ms",), False),
    ("latency p99, ms", "latency", ("p99_ms",), ("p99_ms",), False),
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
    for label, workload, path, peer_path, _higher in ROWS:
        values = {}
        for name, entry in results["systems"].items():
            median = entry["median"].get(workload)
            if median is None:
                continue
            values[name] = _dig(median, path if ours(name) else peer_path) if (ours(name) or peer_path) else None
        # (a row of a call pgsql_broker did not have when the run was made is left out)
        if values and any(v is not None for n, v in values.items() if ours(n)):
            out.append((label, values))
    return out


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def at_defaults(results: dict, name: str) -> bool:
    """A peer row at its documented defaults: its label does not say "not its defaults" (the extras and
    pg-boss-tuned do, bench/peers/)."""
    return "not its defaults" not in results["systems"][name].get("info", {}).get("label", "")


def best_peer(values: dict, higher: bool, among=None) -> tuple[str, float] | None:
    """(peer, value) of the fastest peer row that has a number (among: the names to choose from)."""
    peers = [(n, v) for n, v in values.items() if not ours(n) and _num(v) and (among is None or n in among)]
    if not peers:
        return None
    return (max if higher else min)(peers, key=lambda nv: nv[1])


def tuned_rows(results: dict) -> list[str]:
    """The peer rows that are not at their defaults (extra, labelled rows)."""
    return [n for n in results["systems"] if not ours(n) and not at_defaults(results, n)]


def _ratio(b, best) -> str:
    return f"{b / best[1]:.2f}" if best and _num(b) and best[1] else "-"


def comparison(results: dict) -> list[list]:
    """[label, value per system..., best peer at its defaults, pgsql_broker / it] per measured row, and when
    some peer row is not at its defaults, then [best peer row of any configuration, pgsql_broker / it]."""
    names = list(results["systems"])
    defaults = [n for n in names if not ours(n) and at_defaults(results, n)]
    tuned = tuned_rows(results)
    higher_of = {r[0]: r[4] for r in ROWS}
    rows = []
    for label, values in headline(results):
        b = values.get(BROKER)
        best = best_peer(values, higher_of[label], defaults)
        row = [label] + [common.fmt(values.get(n)) for n in names] + [best[0] if best else "-", _ratio(b, best)]
        if tuned:
            any_best = best_peer(values, higher_of[label])
            row += [any_best[0] if any_best else "-", _ratio(b, any_best)]
        rows.append(row)
    return rows


# Issue 36's targets (the storage issue; issue 24's were the same but single enqueue 1.2x, p99 10 ms and the
# ceiling 0.6): (what, [(comparison row, the call it names or "")]: the best of them counts, bound, higher is better)
ISSUE_TARGETS = [
    ("drain >= 3x the fastest peer at its defaults", [("drain, jobs/s", "")], 3.0, True),
    ("single enqueue >= 1.0x the fastest peer", [("enqueue single (1 job/transaction), jobs/s", "")], 1.0, True),
    ("batches of 1,000 >= 1.5x the fastest peer's batch call",
     [("enqueue batch 1000 (set-based call), jobs/s", "broker_add_jobs"),
      ("enqueue " + ARRAYS + " (set-based, one array per field), jobs/s", "broker_add_jobs_arrays")], 1.5, True),
    ("latency p50 <= 0.6x the best peer's", [("latency p50, ms", "")], 0.6, False),
]


def targets(results: dict) -> list[list[str]]:
    """[target, measured, met, (when some peer row is not at its defaults) measured against any row] for issue
    36's targets this run measured, every figure from `results`."""
    rows = {r[0]: r for r in comparison(results)}
    n, tuned = len(results["systems"]), bool(tuned_rows(results))

    def best_of(labels, col, higher):
        found = [(float(rows[label][col]), name) for label, name in labels if label in rows and rows[label][col] != "-"]
        return (max if higher else min)(found) if found else None

    out = []
    for what, labels, bound, higher in ISSUE_TARGETS:
        got = best_of(labels, n + 2, higher)
        if got is None:
            continue
        row = [what, f"{got[0]:.2f}" + (f" ({got[1]})" if got[1] else ""),
               "met" if (got[0] >= bound if higher else got[0] <= bound) else "not met"]
        if tuned:
            anyrow = best_of(labels, n + 4, higher)
            row.append(f"{anyrow[0]:.2f}" if anyrow else "-")
        out.append(row)
    p99 = _dig(results["systems"].get(BROKER, {}).get("median", {}).get("latency"), ("p99_ms",))
    if _num(p99):
        out.append(["latency p99 <= 5 ms", f"{p99:.2f} ms", "met" if p99 <= 5 else "not met"] + ([""] if tuned else []))
    c = results.get("ceiling", {})
    if "drain_ratio" in c:
        out.append(["drain >= 0.5 of the pgbench claim+complete ceiling", f"{c['drain_ratio']:.2f}",
                    "met" if c["drain_ratio"] >= 0.5 else "not met"] + ([""] if tuned else []))
    return out


def floor_lines(c: dict) -> list[tuple[str, str]]:
    """(what, figures) of each floor measured beside the ceiling (bench/ceiling.py), from its summary c."""
    out = []
    for f in c.get("floors", {}).values():
        figures = f"{f['jobs_per_s']:,.0f} jobs/s, {f['ceiling_ratio']:.2f} of the ceiling"
        if "drain_ratio" in f:
            figures += f"; pgsql_broker's drain {f['drain_ratio']:.2f} of it"
        if f.get("ran_out"):
            figures += " (a run ran out of jobs: its rate understates the floor)"
        out.append((f"floor: {f['label']}", figures))
    return out


def workload_matrix(results: dict) -> dict[str, set]:
    """{system: the common workloads it has a result or a stated reason for}: the same for every system."""
    return {n: {w for w in COMMON if w in e["median"]} for n, e in results["systems"].items()}


def print_report(results: dict) -> None:
    names = list(results["systems"])
    runs = results["runs"]
    rows = comparison(results)
    if rows:
        if len(names) > 1:
            print(f"median of {runs} run(s); ratio = pgsql_broker / the best peer row at its defaults (throughput: "
                  "> 1 is faster; latency: < 1 is faster)" + ("; then the best row of any configuration"
                                                              if tuned_rows(results) else ""))
            common.print_table(["workload"] + names + ["best peer", "ratio"]
                               + (["best, any configuration", "ratio"] if tuned_rows(results) else []), rows)
        else:
            print(f"median of {runs} run(s)")
            common.print_table(["workload"] + names, [r[:-2] for r in rows])
    broker = results["systems"].get(BROKER, {})
    extra = []
    if "ceiling" in results:
        c = results["ceiling"]
        extra.append((f"claim+complete ceiling (pgbench, {c['clients']} clients, up to {c['per_claim']} jobs a claim), jobs/s",
                      f"{c['jobs_per_s']:,.0f}"))
        if "drain_ratio" in c:
            extra.append(("pgsql_broker drain / ceiling, median of the runs' ratios (target >= 0.6)",
                          f"{c['drain_ratio']:.2f} (runs: {', '.join(f'{x:.2f}' for x in c['drain_ratio_runs'])})"))
        else:
            drain = broker.get("median", {}).get("drain", {}).get("jobs_per_s")
            if drain:
                extra.append(("pgsql_broker drain / ceiling (target >= 0.6)", f"{drain / c['jobs_per_s']:.2f}"))
        extra += floor_lines(c)
    if "backlog" in broker:
        b = broker["backlog"]
        extra += [(f"claim (broker_get) latency, empty (only {b['ready']:,} ready jobs)", f"{b['median_latency_ms']['empty']:.3f} ms"),
                  (f"claim latency, {b['finished']:,} finished + {b['blocked']:,} blocked + {b['future']:,} future",
                   f"{b['median_latency_ms']['backlog']:.3f} ms"),
                  ("claim latency ratio backlog / empty (target < 1.5)", f"{b['ratio']:.2f}")]
    if "held" in broker:
        h = broker["held"]
        m = h["median"]
        extra += [(f"claim after {h['jobs']:,} jobs at {h['rate']:,.0f}/s, last 10%: no other transaction",
                   f"{m['free']['last_10pct']['mean_ms']:.2f} ms (p99 {m['free']['last_10pct']['p99_ms']:.2f}), "
                   f"{m['free']['last_10pct']['mean_buffers']:,.0f} buffers"),
                  ("the same while a REPEATABLE READ snapshot is held",
                   f"{m['held']['last_10pct']['mean_ms']:.2f} ms (p99 {m['held']['last_10pct']['p99_ms']:.2f}), "
                   f"{m['held']['last_10pct']['mean_buffers']:,.0f} buffers"),
                  ("claim held / free, mean (target <= 2)", f"{h['ratio_last_10pct_mean']:.2f} "
                   f"(p99 {h['ratio_last_10pct_p99']:.2f}, buffers {h['ratio_last_10pct_buffers']:.2f})"),
                  ("claim on a never-analyzed table / after ANALYZE", f"{h['stats_median_ratio']:.2f}")]
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


DEFAULT_SIZES = {"drain_jobs": 20_000, "single_jobs": 2_000, "batches": 10, "latency_jobs": 500}
GENERATED = ("<!-- Generated by `python -m bench.report --markdown RESULTS.json {dst}` (`{target}` runs "
             "it) from {src}, its copy of the results: do not edit by hand; tests_py/acceptance/test_bench_harness_runs.py checks "
             "that this page is what the generator makes of that JSON. -->")


def _cell(v) -> str:
    return common.fmt(v).replace("|", "\\|")


# pages other than the peer comparison that the generator writes, by file name
TITLES = {"benchmarks-enqueue.md": "Enqueue: this tree, its baseline and the peers"}
TARGETS = {"benchmarks-enqueue.md": "make bench-enqueue"}


def markdown(results: dict, src: str = "docs/benchmarks-peers.json", dst: str = "docs/benchmarks-peers.md") -> str:
    """The docs page of the peer comparison (or of a run of some workloads: TITLES), every figure from `results`."""
    m, sizes, names = results["machine"], results["sizes"], list(results["systems"])
    out = ["# " + TITLES.get(Path(dst).name, "Peer comparison"), "",
           GENERATED.format(src=src, dst=dst, target=TARGETS.get(Path(dst).name, "make bench-peers")), ""]
    why = smoke_reasons(results)
    if why:
        out += ["!!! warning \"Smoke run, not results\"", "",
                "    These figures come from a smoke run of the harness: " + "; ".join(why) + ". They show that "
                "the harness runs, not how fast any system is.", ""]
    out += [f"{results.get('invocation', '`make bench-peers`')}, {m['date']} (UTC), {m['nproc']} cores, load average {_load(m)} at the start, "
            f"PostgreSQL {m['server_version']} ({', '.join(f'{k} {v}' for k, v in sorted(m['settings'].items()))}); "
            f"median of {results['runs']} interleaved run(s) (run 1 of every system, then run 2, ...), each "
            f"workload in a fresh database of the same cluster; drain {sizes['drain_jobs']:,} jobs, single "
            f"enqueue {sizes['single_jobs']:,} jobs, {sizes['batches']} batches of {sizes['batch_size']:,}, "
            f"latency {sizes['latency_jobs']:,} jobs; {results.get('elapsed_s', 0):.0f} s in all. Absolute "
            "figures from another invocation are not comparable; the ratios within one are.", "",
            "Ratio: pgsql_broker's median over that of the best peer row of the same run among the peers at "
            "their documented defaults (throughput: above 1 is faster; latency: below 1 is faster)"
            + ("; the last two columns take the best row of any configuration, the labelled extras included."
               if tuned_rows(results) else "."), ""]
    labels = {n: results["systems"][n].get("info", {}).get("label", n) for n in names}
    extra = " best row, any configuration | pgsql_broker ÷ it |" if tuned_rows(results) else ""
    out += ["| workload | " + " | ".join(names) + " | best peer at its defaults | pgsql_broker ÷ best peer |" + extra,
            "|---" * (len(names) + (5 if extra else 3)) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in comparison(results)]
    goals = targets(results)
    if goals:
        tuned = bool(tuned_rows(results))
        out += ["", "Against issue 36's targets, in this run (ratios to the best peer at its defaults; for batches, "
                "the faster of pgsql_broker's two set-based calls" + ("; the last column: the same ratio to the "
                                                                       "best row of any configuration" if tuned else "")
                + "):", "", "| target | measured | |" + (" any configuration |" if tuned else ""),
                "|---|---|---|" + ("---|" if tuned else "")]
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in goals]
    out += ["", "## The systems and how each runs", "",
            "Every client and worker connects to the same throwaway cluster as its superuser. Each peer runs "
            "as its documentation says to by default; a row whose name says \"not its defaults\" is an extra, "
            "with the change named. Drain counts from each system's first completion to its last (pgsql_broker's "
            "runner and every peer's worker start as processes of their own; start-up is not counted). Every worker "
            "logs warnings and errors only: pgbroker-runner and procrastinate with --log-level warning, Graphile "
            "Worker with a logger that drops info and debug (its default logs a line per job), PgQueuer (started "
            "by pgqueuer.run, not its CLI) and pg-boss log nothing per job.", "",
            "| column | system | version | configuration | defaults documented in |", "|---|---|---|---|---|"]
    for n in names:
        i = results["systems"][n].get("info", {})
        out.append(f"| {n} | {labels[n]} | {i.get('version', '?')} | {_cell(i.get('config', '?'))} | "
                   f"{_cell(i.get('doc', '?'))} |")
    out += ["", "## Every run", "", "| system | workload | runs |", "|---|---|---|"]
    for n in names:
        for w, runs in results["systems"][n]["runs"].items():
            out.append(f"| {n} | {w} | {'; '.join(_run_cell(r) for r in runs)} |")
    if "enqueue_parts" in results:
        out += _parts_markdown(results["enqueue_parts"])
    if "ceiling" in results:
        c = results["ceiling"]
        out += ["", f"The pgbench claim+complete ceiling in the same run ({c['clients']} clients, up to "
                f"{c['per_claim']} jobs a claim): {c['jobs_per_s']:,.0f} jobs/s"
                + (f"; pgsql_broker's drain was {c['drain_ratio']:.2f} of it (median of the runs' ratios)."
                   if "drain_ratio" in c else ".")]
        if c.get("floors"):
            out += ["", "Beside it in each round, the floors (bench/ceiling.py): what a queue that commits its claim "
                    "before the jobs run (so that a job that kills its backend has used an attempt) reaches at best, "
                    "with nothing done but what the row names; and pgsql_broker's own statements without its runner. "
                    "The same pgbench clients, the jobs completed over the run's seconds, medians of the rounds' "
                    "ratios:", "", "| floor | jobs/s | ÷ the ceiling | pgsql_broker's drain ÷ it |", "|---|---|---|---|"]
            for f in c["floors"].values():
                out.append(f"| {_cell(f['label'])}" + (" (a run ran out of jobs: its rate understates the floor)" if f.get("ran_out") else "")
                           + f" | {f['jobs_per_s']:,.0f} | {f['ceiling_ratio']:.2f} | "
                           + (f"{f['drain_ratio']:.2f}" if "drain_ratio" in f else "-") + " |")
    return "\n".join(out) + "\n"


def _parts_markdown(p: dict) -> list[str]:
    """The section of bench/enqueue_parts' figures: the ladder per role, then the checks per call."""
    out = ["", "## Where one enqueue spends its time", "",
           f"`bench/enqueue_parts` in the same invocation: one pgbench client per role for {p['seconds']} s, one "
           "row per transaction, every script of a table chosen at random in the same run (mean latency per "
           f"script; `synchronous_commit` {p['synchronous_commit']}). Each rung of the ladder is a table with one "
           "more part of `broker_jobs` than the one above it (`parts.*`, bench/enqueue_parts/setup.sql); "
           "`01_narrow` is a peer's narrow queue table (PgQueuer's columns), `02_narrow_notify` the same with its "
           "statement trigger that notifies.", ""]
    for title, key in (("as the superuser (the harness's role: row-level security does not apply)", "superuser_ms"),
                       ("as a `broker_enqueue` login (row-level security applies)", "enqueue_role_ms")):
        runs = p[key]
        out += [f"One row per transaction, {title}:", "", "| script | ms | ÷ narrow | over the row above, ms |",
                "|---|---|---|---|"]
        prev = None
        for k, v in runs.items():
            out.append(f"| {k} | {v:.3f} | {v / runs['01_narrow']:.2f} | {'' if prev is None else f'{v - prev:+.3f}'} |")
            prev = v
        out.append("")
    if "baseline_ms" in p:
        b = p["baseline_ms"]
        out += ["This tree and the baseline tree's code (installed beside it as schema `broker_base`), their calls "
                "interleaved in one pgbench run (a 1,000-job call picked 1 time in 40): mean ms a call, and this "
                "tree's over the baseline's:", "", "| call | this tree, ms | baseline, ms | this tree ÷ baseline |",
                "|---|---|---|---|"]
        for call in ("single", "bulk_jsonb", "bulk_arrays"):
            mine, base = b.get(f"{call}_this_tree"), b.get(f"{call}_baseline")
            out.append(f"| {call} | {mine:.3f} | {'-' if base is None else f'{base:.3f}'} | "
                       f"{'-' if base is None else f'{mine / base:.2f}'} |")
        out.append("")
    out += ["`broker_add_job`'s checks, µs a call (1,000 calls in one statement, less an empty loop; a check's "
            "first call in a transaction costs more):", "", "| check | µs |", "|---|---|"]
    out += [f"| {k} | {v:.1f} |" for k, v in p["check_us_per_call"].items()]
    return out


def smoke_reasons(results: dict) -> list[str]:
    """Why a run is a smoke run (fewer than 3 runs, sizes below the defaults), or [] for a full run."""
    small = {k: v for k, v in results["sizes"].items() if v < DEFAULT_SIZES.get(k, 0)}
    why = [f"{results['runs']} run(s) (a full run takes the median of 3)"] if results["runs"] < 3 else []
    return why + [f"{k.replace('_', ' ')} {v:,} (default {DEFAULT_SIZES[k]:,})" for k, v in small.items()]


def _load(m: dict) -> str:
    la = m.get("loadavg_at_start") or [None]
    return f"{la[0]:.2f}" if _num(la[0]) else "?"


def _run_cell(r) -> str:
    if isinstance(r, str):
        return _cell(r)
    if "p50_ms" in r:
        return f"p50 {r['p50_ms']:.2f} / p99 {r['p99_ms']:.2f} ms"
    if "jobs_per_s" in r:
        return f"{r['jobs_per_s']:,.0f} jobs/s"
    return ", ".join(f"{k}: {_run_cell(v)}" for k, v in r.items())


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--markdown":
        common.write_page(argv[1], argv[2], markdown)
    else:
        print_report(json.loads(Path(argv[0]).read_text()))


if __name__ == "__main__":
    main(sys.argv[1:])
