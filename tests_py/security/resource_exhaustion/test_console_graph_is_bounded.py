"""A job's workflow picture (GET /api/jobs/N/graph) costs the console a bounded number of lookups and nodes,
whatever an enqueuer builds: jobs that share a group, or wait on the same jobs, reach the same job many times
over (each step multiplied the work by the group's width: with 40 jobs a step, five steps cost about 2.6 million
lookups in one of the console's two sessions), and a job may wait on many groups, each a node of its own."""
from __future__ import annotations

from contextlib import contextmanager

from conftest import add_job, connect
from pgsql_broker.observe import console as console_module
from pgsql_broker.observe.console import ConsoleDatabase
from runner_process import db_dsn


class Counted:
    """A cursor that counts the statements it sends (and gives up past `most`, so an unbounded walk fails fast)."""

    def __init__(self, cursor, most: int):
        self._cursor, self.most, self.statements = cursor, most, 0

    def execute(self, *args, **kwargs):
        self.statements += 1
        assert self.statements <= self.most, f"more than {self.most} statements for one picture"
        return self._cursor.execute(*args, **kwargs)


class CountingConsole(ConsoleDatabase):
    most = 10_000
    cursor: Counted | None = None

    @contextmanager
    def _session(self, *args, **kwargs):
        with super()._session(*args, **kwargs) as cur:
            self.cursor = Counted(cur, self.most)
            yield self.cursor


def test_jobs_reached_many_times_are_followed_once(db):
    """Six steps of 6 jobs, each job of a step waiting on the previous step's group: 31 jobs, each looked up and
    followed once (with their groups, a few statements a node), not once per path that reaches it."""
    width = 6
    with connect(db) as conn:
        first = add_job(conn, "step 0", "SELECT 1", job_group="step 0")
        for step in range(1, 6):
            for i in range(width):
                add_job(conn, f"step {step}.{i}", "SELECT 1", job_group=f"step {step}",
                        depends_on_groups=[f"step {step - 1}"])
    console = CountingConsole("d", db_dsn(db), None, "test")
    console.most = 400
    graph = console.graph(first, None)
    jobs = [n for n in graph["nodes"] if n["kind"] == "job"]
    assert len(jobs) == 1 + 5 * width and max(n["depth"] for n in jobs) == 5
    assert console.cursor.statements <= 3 * len(graph["nodes"]) + 5


def test_groups_count_toward_the_pictures_nodes(db, monkeypatch):
    """A job waiting on more groups than the picture holds: the picture stops at GRAPH_MAX nodes, groups included."""
    monkeypatch.setattr(console_module, "GRAPH_MAX", 10)
    with connect(db) as conn:
        groups = [f"g{i}" for i in range(20)]
        for group in groups:
            add_job(conn, group, "SELECT 1", job_group=group)
        waiter = add_job(conn, "waits on twenty groups", "SELECT 1", depends_on_groups=groups)
    graph = ConsoleDatabase("d", db_dsn(db), None, "test").graph(waiter, None)
    assert len(graph["nodes"]) == 10
    assert {n["key"] for n in graph["nodes"]} >= {f"job:{waiter}"}
    keys = {n["key"] for n in graph["nodes"]}
    assert all(e["from"] in keys and e["to"] in keys for e in graph["edges"]) and len(graph["edges"]) == 9
