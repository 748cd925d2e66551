"""Benchmark (not a test): candidate storage layouts of the job table, measured side by side (issue 36).
`python -m bench.storage_candidates` against the cluster named by PG* (`.ci/with-cluster`; pgsql_broker installed).

The layouts (bench/storage_layouts.py, bench/storage_layouts_kept.py): today (broker_jobs as it is), split
(narrow hot + immutable body + history partitioned by day), split_keep (the same hot path, the body kept and a
narrow history), state_tables (Solid Queue's ready and claimed tables) and segments (PgQ's rotating history
tables). One scratch database holds them all, each filled with BENCH_STORAGE_FINISHED (100,000) jobs finished
yesterday (with an attempt row each; a tenth more finished today) and BENCH_STORAGE_PENDING (200,000) pending
jobs over 4 queues and 10 tenants, and the ceiling's bare table (bench/ceiling.py, BENCH_STORAGE_CEILING_ROWS
200,000 rows); vacuumed, then autovacuum off (as bench/table_parts.py: a vacuum during the timed run would slow
whichever scripts ran).

mixed    one pgbench run (-M prepared) of every layout's scripts and the ceiling's, chosen at random (WEIGHTS), so that
         their means compare like with like on a noisy machine: enqueue of one job, of 1,000 in one statement,
         a claim of up to 50 (its own transaction) and their completion (another: state, finished_at, an
         attempt row; no job run), a lookup by job_id and a tenant's newest 50 through the layout's broker_jobs
         view; with 1 client, then 4 (BENCH_STORAGE_SECONDS, 30, each). µs per job: a script's mean latency
         over the jobs it handled (a claim's: the attempts its runs recorded). Then each layout's hot row
         (mean width), its tables' and indexes' sizes and dead tuples.
held     on a fresh database of pending jobs only (BENCH_STORAGE_HELD_PENDING, 150,000, queue 1), the claim
         scripts and the ceiling's for BENCH_STORAGE_HELD_SECONDS (30), then again for a third of that (the
         claim "after N jobs"); once with nothing else open, once while another session holds a REPEATABLE
         READ snapshot taken before the first; the hot tables' dead tuples at the end.
retention on the mixed database after its runs: what removes yesterday's history (today: broker_purge_jobs in
         batches of 10,000; split: DETACH + DROP the day's partitions; state_tables: DELETE in batches of
         10,000, as Solid Queue; segments: TRUNCATE the day's segment), its seconds, and what it leaves
         (sizes and dead tuples of the history tables before and after).

Prints Markdown tables and writes bench/results/storage_candidates.json. Figures and the recommendation:
docs/storage-model.md.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from . import common
from .ceiling import BARE, PER_CLAIM as CEILING_PER_CLAIM, SCRIPT as CEILING_SCRIPT
from .storage_layouts import PER_CLAIM, QUEUES, Segments, Split, Today, fill_rows
from .storage_layouts_kept import SplitKeep, StateTables

LAYOUTS = [Today(), Split(), SplitKeep(), StateTables(), Segments()]

SECONDS = common.env_int("BENCH_STORAGE_SECONDS", 30)
HELD_SECONDS = common.env_int("BENCH_STORAGE_HELD_SECONDS", 30)
FINISHED = common.env_int("BENCH_STORAGE_FINISHED", 100_000)
PENDING = common.env_int("BENCH_STORAGE_PENDING", 200_000)
HELD_PENDING = common.env_int("BENCH_STORAGE_HELD_PENDING", 150_000)
CEILING_ROWS = common.env_int("BENCH_STORAGE_CEILING_ROWS", 200_000)
DB = "bench_storage_candidates"
WORKLOADS = ("enqueue", "enqueue_1000", "claim", "lookup", "listing", "listing_parts")
PER_JOB = {"enqueue": 1, "enqueue_1000": 1000}  # jobs a run of the script handles (a claim's: counted)
# how often pgbench picks each script (relative): the claims and the ceiling most, so that each gets hundreds of runs
# beside the slow ones (a batch of 1,000, a listing through a view: tens of ms each)
WEIGHTS = {"ceiling": 10, "claim": 10, "enqueue": 5, "lookup": 5, "listing_parts": 2, "enqueue_1000": 1, "listing": 1}


def setup(db: str, finished: int, pending: int, queues: int) -> str:
    """The scratch database with every layout filled; returns the start of its day (the history's boundary)."""
    common.create_broker_db(db)
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        # (create_broker_db's job took id 1: every layout's ids start at 1, so that lookups find the same jobs)
        conn.execute("ALTER TABLE broker.broker_jobs ALTER COLUMN job_id RESTART WITH 1")
        day = conn.execute("SELECT date_trunc('day', now())::text").fetchone()[0]
        columns = conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                               "'broker.broker_jobs'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum").fetchall()
        for statement in (BARE, "CREATE INDEX q_pending ON q (id) WHERE status = 0",
                          f"INSERT INTO q (payload) SELECT 'SELECT 1' FROM generate_series(1, {CEILING_ROWS})"):
            conn.execute(statement)
        for layout in LAYOUTS:
            for statement in layout.ddl(day) + ([layout.view(columns)] if hasattr(layout, "view") else []):
                conn.execute(statement)
            for statement in layout.fill(day, finished, pending, queues):
                conn.execute(statement)
        conn.execute("VACUUM ANALYZE")
        for schema, table in conn.execute(
                "SELECT n.nspname, c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND (n.nspname = ANY (%s) OR c.oid IN ('broker.broker_jobs'::regclass, "
                "'broker.broker_job_attempts'::regclass))", (["public"] + [lay.s for lay in LAYOUTS[1:]],)).fetchall():
            conn.execute(sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(sql.Identifier(schema, table)))
        conn.execute("CHECKPOINT")
    return day


def pgbench(db: str, scripts: dict[str, str], seconds: int, clients: int) -> dict:
    """One pgbench run of the scripts ({name: text}), chosen at random (WEIGHTS), -M prepared: {name: (mean ms or
    None, transactions)}."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [common.PGBENCH, "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds)]
        for name, text in scripts.items():
            path = Path(tmp) / f"{name}.sql"
            path.write_text(text)
            argv += ["-f", f"{path}@{WEIGHTS[name.split('.')[-1]]}"]
        done = subprocess.run(argv + [db], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench exited with {done.returncode}: {done.stderr.strip()[-2000:]}")
    out = {}
    for block in re.split(r"\nSQL script \d+: ", done.stdout)[1:]:
        name = Path(block.split("\n", 1)[0].strip()).stem
        tx = re.search(r" - (\d+) transactions", block)
        ms = re.search(r" - latency average = ([0-9.]+) ms", block)
        out[name] = (float(ms.group(1)) if ms else None, int(tx.group(1)) if tx else 0)
    if set(out) != set(scripts):
        raise RuntimeError(f"pgbench printed {sorted(out)} for {sorted(scripts)}:\n{done.stdout}")
    return out


def _done(db: str, day: str) -> dict:
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        return {layout.name: conn.execute(layout.done_sql(day)).fetchone()[0] for layout in LAYOUTS}


def timed(db: str, day: str, scripts: dict[str, str], seconds: int, clients: int) -> dict:
    """µs per job of each script of one run (a claim's over the attempts its runs recorded), ms a call of the
    lookups and listings, and the ceiling's µs per job."""
    before = _done(db, day)
    load = os.getloadavg()[0]
    found = pgbench(db, scripts, seconds, clients)
    after = _done(db, day)
    out: dict = {"clients": clients, "seconds": seconds, "loadavg_at_start": load, "loadavg_at_end": os.getloadavg()[0],
                 "ceiling_us_per_job": _per(found["ceiling"], CEILING_PER_CLAIM), "layouts": {}}
    for layout in LAYOUTS:
        res = {}
        for workload in WORKLOADS:
            key = f"{layout.name}.{workload}"
            if key not in found:
                continue
            ms, tx = found[key]
            if workload == "claim":
                jobs = after[layout.name] - before[layout.name]
                res["claim_jobs"] = jobs
                res["claim_runs"] = tx
                res["claim_us_per_job"] = ms * tx * 1000 / jobs if ms is not None and jobs else None
            elif workload in PER_JOB:
                res[f"{workload}_us_per_job"] = _per(found[key], PER_JOB[workload])
            else:
                res[f"{workload}_ms"] = ms
        out["layouts"][layout.name] = res
    return out


def _per(found: tuple, jobs: int) -> float | None:
    ms, _tx = found
    return None if ms is None else ms * 1000 / jobs


def all_scripts(day: str, workloads: tuple[str, ...], idmax: int) -> dict[str, str]:
    out = {"ceiling": CEILING_SCRIPT}
    for layout in LAYOUTS:
        for workload, text in layout.scripts(day).items():
            if workload in workloads:
                out[f"{layout.name}.{workload}"] = text.replace("IDMAX", str(idmax))
    return out


def table_facts(db: str, tables: list[str], width: bool) -> dict:
    """Rows, dead tuples, heap and index bytes of the tables (summed), and the hot row's mean width (the first
    table's, when width)."""
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        out = {"live": 0, "dead": 0, "heap_bytes": 0, "index_bytes": 0}
        for t in tables:
            live, dead, heap, idx = conn.execute(
                "SELECT coalesce(sum(s.n_live_tup), 0), coalesce(sum(s.n_dead_tup), 0), "
                "coalesce(sum(pg_table_size(c.oid)), 0), coalesce(sum(pg_indexes_size(c.oid)), 0) "
                "FROM pg_class AS c LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid "
                "WHERE c.oid = %s::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)",
                (t, t)).fetchone()
            for k, v in (("live", live), ("dead", dead), ("heap_bytes", heap), ("index_bytes", idx)):
                out[k] += int(v)
        if width:
            out["row_width"] = float(conn.execute(f"SELECT coalesce(avg(pg_column_size(t.*)), 0) FROM {tables[0]} AS t "
                                                  "WHERE t.job_id IS NOT NULL").fetchone()[0])
    return out


def backends_gone(db: str, keep: int = 0) -> None:
    """Wait until no other session than `keep` ones is connected to db: a backend's table statistics reach
    pg_stat_user_tables as it exits (pgbench's, a retention's)."""
    deadline = time.monotonic() + 30
    while common.scalar(db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                            "backend_type = 'client backend' AND pid <> pg_backend_pid()") > keep:
        if time.monotonic() > deadline:
            raise TimeoutError(f"sessions of {db} still open after 30 s")
        time.sleep(0.05)


def retention(db: str, day: str) -> dict:
    out = {}
    for layout in LAYOUTS:
        before = table_facts(db, layout.history_tables, False)
        t0 = time.perf_counter()
        with psycopg.connect(dbname=db, autocommit=True) as conn:
            for statement in layout.retention(day):
                while True:
                    cur = conn.execute(statement)
                    n = cur.fetchone()[0] if statement.startswith("SELECT") else cur.rowcount
                    if not statement.startswith(("SELECT", "WITH", "DELETE")) or n <= 0:
                        break
        out[layout.name] = {"seconds": time.perf_counter() - t0, "before": before}
    backends_gone(db)
    for layout in LAYOUTS:
        out[layout.name]["after"] = table_facts(db, [t for t in layout.history_tables if _exists(db, t)], False)
    return out


def _exists(db: str, table: str) -> bool:
    return common.scalar(db, "SELECT to_regclass(%s) IS NOT NULL", (table,))


def mixed() -> dict:
    day = setup(DB, FINISHED, PENDING, QUEUES)
    try:
        scripts = all_scripts(day, WORKLOADS, fill_rows(FINISHED) + PENDING)
        runs = []
        for clients in (1, 4):
            print(f"  mixed: {clients} client(s), {SECONDS} s", flush=True)
            runs.append(timed(DB, day, scripts, SECONDS, clients))
            backends_gone(DB)
            runs[-1]["hot"] = {layout.name: table_facts(DB, layout.hot_tables, True) for layout in LAYOUTS}
        return {"day": day, "runs": runs, "retention": retention(DB, day)}
    finally:
        common.drop_db(DB)


def held() -> dict:
    out = {}
    for case in ("free", "held"):
        db = f"{DB}_{case}"
        print(f"  held: {case}", flush=True)
        day = setup(db, 0, HELD_PENDING, 1)  # (one client: queue 1)
        holder = None
        try:
            if case == "held":
                holder = psycopg.connect(dbname=db)
                holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                holder.execute("SELECT count(*) FROM q").fetchone()  # takes the snapshot
            scripts = all_scripts(day, ("claim",), HELD_PENDING)
            flow = timed(db, day, scripts, HELD_SECONDS, 1)
            after = timed(db, day, scripts, max(1, HELD_SECONDS // 3), 1)
            backends_gone(db, 1 if holder else 0)
            out[case] = {"flow": flow, "after": after,
                         "hot": {layout.name: table_facts(db, layout.hot_tables, False) for layout in LAYOUTS}}
        finally:
            if holder is not None:
                holder.close()
            common.drop_db(db)
    return out


def _fmt(v, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def report(results: dict) -> None:
    names = [layout.name for layout in LAYOUTS]
    for run in results["mixed"]["runs"]:
        ceiling = run["ceiling_us_per_job"]
        print(f"\n{run['clients']} client(s), {run['seconds']} s, load {run['loadavg_at_start']:.2f} -> "
              f"{run['loadavg_at_end']:.2f}; ceiling {_fmt(ceiling)} µs a job. µs a job (x today, x ceiling); "
              "lookups and listings: ms a call")
        rows = []
        for key, label in (("enqueue_us_per_job", "enqueue, one job"), ("enqueue_1000_us_per_job", "enqueue, 1,000 jobs"),
                           ("claim_us_per_job", f"claim of {PER_CLAIM} + completion"),
                           ("lookup_ms", "view: lookup by job_id"), ("listing_ms", "view: tenant's newest 50"),
                           ("listing_parts_ms", "parts: tenant's newest 50")):
            today = run["layouts"]["today"].get("listing_ms" if key == "listing_parts_ms" else key)
            cells = []
            for n in names:
                v = run["layouts"][n].get(key)
                extra = "" if v is None or today is None else f" (x{v / today:.2f}"
                if extra and key.endswith("per_job") and ceiling:
                    extra += f", x{v / ceiling:.2f} ceiling"
                cells.append(_fmt(v, 3 if key.endswith("_ms") else 1) + (extra + ")" if extra else ""))
            rows.append([label] + cells)
        common.print_table(["workload"] + names, rows)
        common.print_table(["after the run"] + names, [
            ["hot row, mean bytes"] + [_fmt(run["hot"][n]["row_width"], 0) for n in names],
            ["hot tables, heap KiB"] + [_fmt(run["hot"][n]["heap_bytes"] / 1024, 0) for n in names],
            ["hot tables, indexes KiB"] + [_fmt(run["hot"][n]["index_bytes"] / 1024, 0) for n in names],
            ["hot tables, dead tuples"] + [_fmt(run["hot"][n]["dead"], 0) for n in names]])
    h = results["held"]
    print("\nheld snapshot: claim + completion, µs a job in the run after the flow (free / held = x), "
          "jobs of the flow, hot tables' dead tuples")
    common.print_table(["layout", "free", "held", "held / free", "flow jobs free / held", "dead free / held"], [
        [n, _fmt(h["free"]["after"]["layouts"][n].get("claim_us_per_job")),
         _fmt(h["held"]["after"]["layouts"][n].get("claim_us_per_job")),
         _fmt(_ratio(h["held"]["after"]["layouts"][n].get("claim_us_per_job"),
                     h["free"]["after"]["layouts"][n].get("claim_us_per_job")), 2),
         f"{h['free']['flow']['layouts'][n]['claim_jobs']:,} / {h['held']['flow']['layouts'][n]['claim_jobs']:,}",
         f"{h['free']['hot'][n]['dead']:,} / {h['held']['hot'][n]['dead']:,}"] for n in names])
    r = results["mixed"]["retention"]
    print("\nretention of yesterday's history")
    common.print_table(["layout", "seconds", "history tables KiB before -> after", "their live rows before -> after",
                        "their dead tuples before -> after"], [
        [n, _fmt(r[n]["seconds"], 3)] + [f"{_fmt(a, 0)} -> {_fmt(b, 0)}" for a, b in (
            ((r[n]["before"]["heap_bytes"] + r[n]["before"]["index_bytes"]) / 1024,
             (r[n]["after"]["heap_bytes"] + r[n]["after"]["index_bytes"]) / 1024),
            (r[n]["before"]["live"], r[n]["after"]["live"]), (r[n]["before"]["dead"], r[n]["after"]["dead"]))]
        for n in names])


def _ratio(a, b):
    return None if a is None or not b else a / b


def main() -> None:
    results = {"machine": common.machine_facts(),
               "sizes": {"seconds": SECONDS, "held_seconds": HELD_SECONDS, "finished": FINISHED, "pending": PENDING,
                         "held_pending": HELD_PENDING, "ceiling_rows": CEILING_ROWS}}
    t0 = time.perf_counter()
    results["mixed"] = mixed()
    results["held"] = held()
    results["elapsed_s"] = time.perf_counter() - t0
    results["machine"]["loadavg_at_end"] = os.getloadavg()
    report(results)
    print(f"\nwrote {common.write_json('storage_candidates', results)}")


if __name__ == "__main__":
    main()
