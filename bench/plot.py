"""docs/bench.png from a results JSON: throughput and latency of pgsql_broker vs the peers.

    python -m bench.plot [bench/results/peers.json] [docs/bench.png]

Needs matplotlib (the `bench` extra / bench/.venv-peers), not a runtime dependency.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .common import RESULTS, ROOT  # noqa: E402
from .report import BROKER, headline, smoke_reasons  # noqa: E402

THROUGHPUT = ("drain, jobs/s", "enqueue single (1 job/transaction), jobs/s", "enqueue batch 1000 (set-based call), jobs/s")
LATENCY = ("latency p50, ms", "latency p99, ms")


def _bars(ax, rows: dict, labels: tuple, names: list, fallback: dict) -> None:
    """Grouped bars; where pgsql_broker has no value but a fallback, the fallback is drawn and named."""
    width = 0.8 / len(names)
    ticks = [lbl.rsplit(",", 1)[0].replace(" (", "\n(") for lbl in labels]
    for i, name in enumerate(names):
        xs, ys = [], []
        for j, label in enumerate(labels):
            v = rows.get(label, {}).get(name)
            if not isinstance(v, (int, float)) and name == BROKER and label in fallback:
                v = fallback[label]  # broker_add_jobs missing: the generate_series path
                ticks[j] += "\npgsql_broker: generate_series fallback"
            if isinstance(v, (int, float)):
                xs.append(j + i * width)
                ys.append(v)
        bars = ax.bar(xs, ys, width, label=name)
        for b, y in zip(bars, ys):
            ax.annotate(f"{y:,.0f}" if y >= 100 else f"{y:.1f}", (b.get_x() + b.get_width() / 2, y),
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels(ticks, fontsize=8)


def plot(results: dict, out: Path) -> None:
    rows = dict(headline(results))
    names = list(results["systems"])
    fallback_label = next((lbl for lbl in rows if "generate_series" in lbl), None)
    fallback = {THROUGHPUT[2]: rows[fallback_label][BROKER]} if fallback_label else {}
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    _bars(a, rows, THROUGHPUT, names, fallback)
    a.set_yscale("log")
    a.set_ylabel("jobs/s (log scale, higher is better)")
    a.set_title("throughput")
    _bars(b, rows, LATENCY, names, {})
    b.set_ylabel("ms (lower is better)")
    b.set_title("enqueue-to-start latency, idle worker")
    a.legend(fontsize=8)
    m = results["machine"]
    fig.suptitle(("SMOKE RUN, NOT RESULTS: " if smoke_reasons(results) else "") + f"median of {results['runs']} runs (drain: {results['sizes']['drain_jobs']:,} jobs), {m['date'][:10]}, "
                 f"{m['nproc']} cores (shared), PostgreSQL "
                 f"{m['server_version'].split()[0]}, fsync={m['settings'].get('fsync')}, "
                 f"synchronous_commit={m['settings'].get('synchronous_commit')}", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS / "peers.json"
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "docs" / "bench.png"
    plot(json.loads(src.read_text()), dst)
