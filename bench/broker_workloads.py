"""pgsql_broker in the common workloads: `pgbroker-runner` with default settings.

Jobs are `SELECT 1` spread over the runner's default 4 queues. Latency's start is
the moment the job's own SQL runs: each latency job records its clock_timestamp() as
its output (broker_set_output), read back from its attempt; the same machine clock as
t0, and the same moment a peer's handler records (issue 36: the claim's started_at,
read before, came a round trip and a statement earlier).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from psycopg.types.json import Jsonb

from . import common
from .workloads import PgSystem

QUEUES = 4  # the runner's default queue_count
ADD_JOBS = "broker.broker_add_jobs(jsonb, text)"
MISSING = "n/a (broker_add_jobs missing)"
# (by name: the bench passes its first three parameters, which every version of it has, whatever it added after)
ADD_JOBS_ARRAYS = "broker_add_jobs_arrays"
ARRAYS = "batch 1000: broker_add_jobs_arrays"
FALLBACK = "batch 1000: SELECT broker_add_job(...) FROM generate_series(1,1000)"
# What an enqueue into broker_jobs costs at least, whatever broker_add_job checks: the same client's plain INSERT
# (the table's defaults, CHECKs, indexes and triggers; none of the rules). No API: a floor beside the calls.
FLOOR_SINGLE = "floor, single: INSERT INTO broker_jobs"
FLOOR_BATCH = "floor, batch 1000: INSERT INTO broker_jobs SELECT FROM unnest"


class Broker(PgSystem):
    name = "pgsql_broker"
    label = "pgsql_broker"
    version = "this tree"
    config = "pgbroker-runner with its default settings (4 queues, so up to 4 jobs at once)"
    doc = "runner/pgsql_broker (its defaults)"
    template = "bench_tpl_broker"
    remaining_sql = "SELECT count(*) FROM broker.broker_jobs WHERE complete_status < 2"
    # the group index holds exactly the unfinished jobs; its order makes the planner use it
    any_left_sql = ("SELECT count(*) FROM (SELECT 1 FROM broker.broker_jobs WHERE complete_status = ANY ('{0,1}'::smallint[]) "
                    "ORDER BY tenant_id, job_group LIMIT 1) AS x")

    def make_template(self) -> None:
        common.create_broker_db(self.template)  # (with the executor, which the preload's raw INSERTs do not make)

    async def enqueue_one(self) -> int:
        cur = await self.conn.execute("SELECT job_id FROM broker.broker_add_job('single', 'SELECT 1')")
        return (await cur.fetchone())[0]

    async def latency_enqueues(self, n: int) -> dict:
        return await common.latency_loop(self.enqueue_clocked, n)

    async def enqueue_clocked(self) -> int:
        """A job whose SQL records when it runs (its attempt's output: epoch seconds)."""
        cur = await self.conn.execute(
            "SELECT job_id FROM broker.broker_add_job('latency', "
            "$$SELECT broker.broker_set_output(extract(epoch FROM clock_timestamp())::text)$$)")
        return (await cur.fetchone())[0]

    async def enqueue_runs(self, n_single: int, n_batches: int, batch: int) -> dict:
        out = await super().enqueue_runs(n_single, n_batches, batch)
        out[FLOOR_SINGLE] = await common.timed_loop(self.insert_one, n_single)
        out[FLOOR_BATCH] = await common.timed_loop(lambda: self.insert_rows(batch), n_batches, batch)
        return out

    async def insert_one(self) -> int:
        cur = await self.conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str) "
                                      "VALUES ('single', 'single', 'SELECT 1') RETURNING job_id")
        return (await cur.fetchone())[0]

    async def insert_rows(self, size: int) -> None:
        await self.conn.execute(
            "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
            "SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::integer[])",
            (["bulk"] * size, ["bulk"] * size, ["SELECT 1"] * size, [1 + i % QUEUES for i in range(size)]))

    def batch_variants(self) -> list:
        return [("batch 1000: broker_add_jobs", self.add_jobs if self.has(ADD_JOBS) else MISSING),
                (ARRAYS, self.add_jobs_arrays if self.has_named(ADD_JOBS_ARRAYS)
                 else "n/a (broker_add_jobs_arrays missing)"),
                (FALLBACK, self.add_job_series)]

    def has(self, signature: str) -> bool:
        return common.scalar(self.template, "SELECT to_regprocedure(%s) IS NOT NULL", (signature,))

    def has_named(self, name: str) -> bool:
        return common.scalar(self.template, "SELECT EXISTS (SELECT FROM pg_catalog.pg_proc WHERE proname = %s "
                             "AND pronamespace = to_regnamespace('broker'))", (name,))

    async def add_jobs(self, size: int) -> None:
        jobs = Jsonb([{"job_name": "bulk", "execute_str": "SELECT 1", "job_queue": 1 + i % QUEUES}
                      for i in range(size)])
        cur = await self.conn.execute("SELECT count(*) FROM broker.broker_add_jobs(%s)", (jobs,))
        if (await cur.fetchone())[0] != size:
            raise RuntimeError("broker_add_jobs returned a wrong number of rows")

    async def add_jobs_arrays(self, size: int) -> None:
        cur = await self.conn.execute(
            # (binary parameters: no array literal is written or parsed as text)
            "SELECT count(*) FROM broker.broker_add_jobs_arrays(%b::text[], %b::text[], %b::integer[])",
            (["bulk"] * size, ["SELECT 1"] * size, [1 + i % QUEUES for i in range(size)]))
        if (await cur.fetchone())[0] != size:
            raise RuntimeError("broker_add_jobs_arrays returned a wrong number of rows")

    async def add_job_series(self, size: int) -> None:
        await self.conn.execute(
            "SELECT count(j.job_id) FROM generate_series(1, %s) AS g, "
            "LATERAL broker.broker_add_job('bulk', 'SELECT 1', p_job_queue => 1 + g %% %s) AS j", (size, QUEUES))

    async def preload(self, n: int) -> None:
        """Plain INSERT (the triggers keep the bookkeeping), the fastest way in."""
        await self.conn.execute(
            "INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, job_queue) "
            "SELECT 'drain', 'drain', 'SELECT 1', 1 + g %% %s FROM generate_series(1, %s) AS g", (QUEUES, n))

    def worker_argv(self, db: str, outfile) -> list[str]:
        return [sys.executable, "-c", "from pgsql_broker.cli import runner_main; runner_main()",
                "--dsn", f"dbname={db}", "--metrics-host", "127.0.0.1", "--metrics-port", str(common.free_port()),
                "--log-level", "warning", "--allow-privileged-login"]  # a throwaway cluster's superuser

    async def start_times(self, outfile) -> dict:
        """When each job's own SQL ran (a clocked job's output), else, for the warm-up job, its claim."""
        cur = await self.conn.execute(
            "SELECT j.job_id, COALESCE((SELECT a.output::float8 FROM broker.broker_job_attempts AS a "
            "WHERE a.job_id = j.job_id AND a.outcome = 'completed'), extract(epoch FROM j.started_at)::float8) "
            "FROM broker.broker_jobs AS j")
        return {job: started for job, started in await cur.fetchall() if started is not None}


class BrokerBaseline(Broker):
    """pgsql_broker from another source tree (BENCH_BASELINE: its root, e.g. `git archive main` unpacked),
    so that the code before and after a change run side by side in one invocation: that tree's built
    script extension/pgsql_broker--<version>.sql run as a plain script into schema broker (not
    CREATE EXTENSION, which the cluster's extension directory holds once), without its pg_dump
    registrations, which only an extension script may make; its workers run that tree's runner."""

    name = "pgsql_broker-baseline"
    template = "bench_tpl_broker_baseline"

    def __init__(self) -> None:
        self.tree = Path(os.environ["BENCH_BASELINE"]).resolve()
        self.label = f"pgsql_broker, baseline ({os.environ.get('BENCH_BASELINE_LABEL') or self.tree.name})"
        self.version = os.environ.get("BENCH_BASELINE_LABEL") or str(self.tree)
        self.config = ("the same client calls, on the baseline tree's SQL (its script run into schema broker), and "
                       "that tree's runner for its workers")
        self.doc = "BENCH_BASELINE"

    def worker_argv(self, db: str, outfile) -> list[str]:
        # the baseline tree's runner too (its package first on the path), so that the column is that tree whole
        return ["env", f"PYTHONPATH={self.tree / 'runner'}"] + super().worker_argv(db, outfile)

    def make_template(self) -> None:
        common.create_db(self.template, None, "CREATE SCHEMA broker")
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.template], input=baseline_script(self.tree),
                       text=True, check=True, stdout=subprocess.DEVNULL)
        # (recorded as tracked migrations record it: the runner starts only on a schema of its version)
        common.sql(self.template, f"INSERT INTO broker.broker_schema_migrations (version) VALUES ('{tree_version(self.tree)}')",
                   "SELECT broker.broker_add_job('warm', 'SELECT 1')", "DELETE FROM broker.broker_jobs")


def tree_version(tree: Path) -> str:
    """The default_version of the source tree `tree` (its pgsql_broker.control)."""
    return re.search(r"^default_version\s*=\s*'([^']+)'", (tree / "pgsql_broker.control").read_text(), re.M)[1]


def baseline_script(tree: Path, schema: str = "broker") -> str:
    """The built script of the source tree `tree` (its extension/pgsql_broker--<default_version>.sql) as a
    plain script: without its pg_dump registrations, and with another schema than broker when asked
    (every object is named schema-qualified, and the schema by name where a guard looks it up), so that
    it can sit beside this tree's extension in one database."""
    text = "\n".join(line for line in (tree / "extension" / f"pgsql_broker--{tree_version(tree)}.sql").read_text().splitlines()
                     if "pg_extension_config_dump" not in line and not line.startswith("\\echo"))
    if schema != "broker":
        text = re.sub(r"\bbroker\.", schema + ".", text).replace("'broker'", f"'{schema}'")
    return text
