"""The console's reads and actions, in the database: every runner, active or standby, shows the same, and a
restart loses nothing.

Two logins per database. The runner's own login reads what /metrics already shows (broker_queue_stats across
tenants, the instances, each tenant's share and each key's limit). The console login (databases[].console_dsn, else the runner's login) reads the jobs,
their attempts and dependencies, and performs cancel, retry and pause/resume through the public functions as
itself: row-level security and the functions' checks decide what it may see and do, so a tenant's login acts
only on its tenant, an administrator's on every tenant, and the runner's (broker_runtime) may act on nothing.

Every session is short (one transaction, statement_timeout, search_path pinned) and at most MAX_SESSIONS run
at once per database, on at most MAX_SESSIONS connections per login kept between requests: the HTTP server's
threads cannot take the database's connections.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import psycopg
from psycopg.rows import dict_row

from ..states import JobState
from .flow import bounded
from .job_queries import (ATTEMPTS, CANCEL, FINISHED_PER_MINUTE, GRAPH_DOWN, GRAPH_NODE, GRAPH_UP, INSTANCES, JOB,
                          JOB_ACTION_RETRY, JOB_ACTIONS, KEY_STATS, NOW_MINUTE, PAUSE, QUEUES,
                          RETRY_COUNT, SET_TENANT, TENANT_STATS, WAITED_ON_BY,
                          WAITS_ON, jobs_statements)
from .logs import cap_text
from .schedule_queries import ENABLE, RUN_NOW, SCHEDULES, zoned

MAX_SESSIONS = 2
SESSION_WAIT_SEC = 5.0
IDLE_KEEP_SEC = 60.0  # a console connection unused this long is closed at its next use
STATEMENT_TIMEOUT = "5s"
MAX_LIMIT = 500
COUNT_CAP = 10_000   # matching jobs counted at most (observe/job_queries.py _count)
BULK_MAX = 1_000     # jobs one bulk action takes at most
FINISHED_WITHIN = {"15m": "15 minutes", "1h": "1 hour", "24h": "24 hours", "7d": "7 days"}   # the time filter
GRAPH_STEPS, GRAPH_MAX = 5, 200   # a job's workflow picture: steps each way, nodes
STATES = {state.label: state for state in JobState}

# SQLSTATE class or code -> HTTP status of a refused action
_STATUS = {"42501": 403, "P0002": 404, "42704": 404, "55000": 409, "23505": 409, "22": 400, "57014": 503}


class ConsoleError(Exception):
    """A request the console answers with `status` and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _int(name: str, text: str | None, low: int, high: int) -> int | None:
    if text in (None, ""):
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 18) or not low <= int(text) <= high:
        raise ConsoleError(400, f"{name} must be a whole number from {low} to {high}, got {text[:40]!r}")
    return int(text)


def _text(name: str, text: str | None) -> str | None:
    if text in (None, ""):
        return None
    if len(text) > 200:
        raise ConsoleError(400, f"{name} must be at most 200 characters")
    if "\x00" in text:   # (PostgreSQL text cannot hold it: the driver would refuse it with no SQLSTATE)
        raise ConsoleError(400, f"{name} must not contain NUL characters")
    return text


@dataclass(frozen=True)
class Filters:
    """The job list's filters, from the query string (every value checked)."""
    state: int | None = None
    queue: int | None = None
    tenant: str | None = None
    name: str | None = None
    finished_within: str | None = None   # an interval (FINISHED_WITHIN's values)
    before: int | None = None
    limit: int = 50

    @classmethod
    def parse(cls, query: dict[str, str]) -> "Filters":
        state = query.get("state") or None
        if state is not None and state not in STATES:
            raise ConsoleError(400, f"state must be one of {', '.join(STATES)}, got {state[:40]!r}")
        within = query.get("finished_within") or None
        if within is not None and within not in FINISHED_WITHIN:
            raise ConsoleError(400, f"finished_within must be one of {', '.join(FINISHED_WITHIN)}, got {within[:40]!r}")
        return cls(state=int(STATES[state]) if state else None, queue=_int("queue", query.get("queue"), 1, 1000),
                   tenant=_text("tenant", query.get("tenant")), name=_text("name", query.get("name")),
                   finished_within=FINISHED_WITHIN[within] if within else None,
                   before=_int("before", query.get("before"), 1, 2**62),
                   limit=_int("limit", query.get("limit"), 1, MAX_LIMIT) or 50)


def tenant_of(value: object) -> str | None:
    """An action's tenant (JSON body): a short string or nothing."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConsoleError(400, "tenant must be a string")
    return _text("tenant", value)


def _refused(exc: psycopg.Error) -> ConsoleError:
    state = exc.sqlstate or ""
    status = _STATUS.get(state) or _STATUS.get(state[:2]) or 500
    message = (exc.diag.message_primary if exc.diag else None) or str(exc).strip().splitlines()[0]
    return ConsoleError(status, cap_text(f"{state}: {message}", 500))


class ConsoleDatabase:
    """One database as the console sees it."""

    def __init__(self, name: str, runner_dsn: str, console_dsn: str | None, application_name: str):
        self.name = name
        self._runner_dsn, self._console_dsn = runner_dsn, console_dsn or runner_dsn
        self._application_name = f"{application_name}:console"
        self._slots = threading.BoundedSemaphore(MAX_SESSIONS)
        self._idle: dict[str, list[tuple[psycopg.Connection, float]]] = {}
        self._idle_lock = threading.Lock()

    def _connection(self, dsn: str) -> psycopg.Connection:
        """An idle connection of this login kept from an earlier request (the page asks every 2 s), or a new one."""
        with self._idle_lock:
            while self._idle.get(dsn):
                conn, since = self._idle[dsn].pop()
                if not conn.closed and time.monotonic() - since < IDLE_KEEP_SEC:
                    return conn
                conn.close()
        conn = psycopg.connect(dsn, connect_timeout=5, application_name=self._application_name, autocommit=True)
        conn.prepare_threshold = None
        return conn

    @contextmanager
    def _session(self, dsn: str, tenant: str | None = None, read_only: bool = True) -> Iterator[psycopg.Cursor]:
        """One transaction; every setting in it is transaction-local, so a kept connection carries nothing over."""
        if not self._slots.acquire(timeout=SESSION_WAIT_SEC):
            raise ConsoleError(503, "the console is busy: try again")
        conn = None
        try:
            conn = self._connection(dsn)
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                if read_only:
                    cur.execute("SET TRANSACTION READ ONLY")
                cur.execute("SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), "
                            "pg_catalog.set_config('statement_timeout', %s, true)", (STATEMENT_TIMEOUT,))
                if tenant is not None:
                    cur.execute(SET_TENANT, {"tenant": tenant})
                yield cur
            with self._idle_lock:
                self._idle.setdefault(dsn, []).append((conn, time.monotonic()))
            conn = None
        except psycopg.OperationalError as exc:
            if exc.sqlstate:
                raise _refused(exc) from None
            raise ConsoleError(503, f"database {self.name} is unavailable to the console") from None
        except psycopg.Error as exc:
            raise _refused(exc) from None
        finally:
            if conn is not None:
                conn.close()
            self._slots.release()

    def jobs(self, filters: Filters) -> dict:
        """A page of the jobs the filters match (newest first, below `before`), and how many match in all (up to
        COUNT_CAP; `count_capped` when there are more)."""
        params = vars(filters) | {"name_like": None, "cap": COUNT_CAP + 1}
        with self._session(self._console_dsn, filters.tenant) as cur:
            page, counted = jobs_statements(filters.finished_within)
            jobs = cur.execute(page, params).fetchall()
            count = cur.execute(counted, params).fetchone()["n"]
        return {"jobs": jobs, "count": min(count, COUNT_CAP), "count_capped": count > COUNT_CAP}

    def job(self, job_id: int, tenant: str | None, with_sql: bool) -> dict:
        with self._session(self._console_dsn, tenant) as cur:
            job = cur.execute(JOB, {"job_id": job_id, "with_sql": with_sql}).fetchone()
            if job is None:
                raise ConsoleError(404, f"job {job_id} does not exist or is not visible to the console's login")
            keys = {"job_id": job_id, "job_group": job["job_group"], "tenant_id": job["tenant_id"]}
            job["attempt_history"] = cur.execute(ATTEMPTS, keys).fetchall()
            job["waits_on"] = cur.execute(WAITS_ON, keys).fetchall()
            job["waited_on_by"] = cur.execute(WAITED_ON_BY, keys).fetchall()
            job["actions"] = cur.execute(JOB_ACTIONS, keys).fetchall()
            return job

    def graph(self, job_id: int, tenant: str | None) -> dict:
        """The job's workflow: the jobs and groups it waits on, and the jobs that wait on it (by its id or its
        group), transitively, GRAPH_STEPS steps each way and GRAPH_MAX nodes at most, groups included. Nodes carry
        their depth (waited on < 0 < waiting); a group is a node of its own ("group:<name>"), not its members. Each
        node is followed once per direction: jobs that share a group, or wait on the same jobs, are reached many
        times over (the work grew as their number to the power of the steps), and a node reached again adds only its edge."""
        nodes: dict[str, dict] = {}
        edges: set[tuple[str, str]] = set()
        with self._session(self._console_dsn, tenant) as cur:
            def job_node(jid: int, depth: int) -> dict | None:
                key = f"job:{jid}"
                if key not in nodes and len(nodes) < GRAPH_MAX:
                    row = cur.execute(GRAPH_NODE, {"job_id": jid}).fetchone()
                    if row is None:
                        return None
                    nodes[key] = {"key": key, "kind": "job", "depth": depth, **row}
                return nodes.get(key)

            def group_node(group: str, depth: float) -> str:
                key = f"group:{group}"
                if key not in nodes and len(nodes) < GRAPH_MAX:
                    nodes[key] = {"key": key, "kind": "group", "depth": depth, "job_group": group}
                return key   # (an edge to a node left out is dropped below)
            start = job_node(job_id, 0)
            if start is None:
                raise ConsoleError(404, f"job {job_id} does not exist or is not visible to the console's login")
            for direction in (-1, 1):
                frontier, followed = [start], {start["key"]}
                for step in range(1, GRAPH_STEPS + 1):
                    reached = []
                    for node in frontier:
                        if direction < 0:
                            for r in cur.execute(GRAPH_UP, {"job_id": node["job_id"]}).fetchall():
                                if r["job_id"] is not None:
                                    up = job_node(r["job_id"], -step)
                                    if up is not None:
                                        edges.add((node["key"], up["key"]))
                                        reached.append(up)
                                else:
                                    edges.add((node["key"], group_node(r["job_group"], -step)))
                        else:
                            for r in cur.execute(GRAPH_DOWN, node).fetchall():
                                down = job_node(r["job_id"], step)
                                if down is None:
                                    continue
                                if r["job_group"] is None:
                                    edges.add((down["key"], node["key"]))
                                else:   # it waits on the node's group: drawn through the group
                                    key = group_node(r["job_group"], step - 0.5)
                                    edges.update({(down["key"], key), (key, node["key"])})
                                reached.append(down)
                    frontier = []
                    for node in reached:
                        if node["key"] not in followed:
                            followed.add(node["key"])
                            frontier.append(node)
        return {"job_id": job_id, "nodes": list(nodes.values()),
                "edges": [{"from": a, "to": b} for a, b in sorted(edges) if a in nodes and b in nodes]}

    def queues(self) -> dict:
        with self._session(self._runner_dsn) as cur:
            return {"queues": cur.execute(QUEUES).fetchall(), "instances": cur.execute(INSTANCES).fetchall()}

    def charts(self) -> dict:
        """Jobs finished per minute over the last three hours, per queue, tenant and state, as the runner's login
        reads them (broker_finished_per_minute), and the server's minute now (the charts' right edge)."""
        with self._session(self._runner_dsn) as cur:
            rows = cur.execute(FINISHED_PER_MINUTE).fetchall()
            now = cur.execute(NOW_MINUTE).fetchone()["m"]
        return {"now_minute": now, "finished": rows}

    def flow(self) -> dict:
        """Each tenant's part of its queues and each key's limit and use, as the runner's login reads them."""
        with self._session(self._runner_dsn) as cur:
            return {"tenants": bounded(cur.execute(TENANT_STATS).fetchall()),
                    "limits": bounded(cur.execute(KEY_STATS).fetchall())}

    def schedules(self, tenant: str | None) -> list[dict]:
        """The tenant's schedules (the console login's, as row-level security shows them), next and last fire on
        each schedule's own clock."""
        with self._session(self._console_dsn, tenant) as cur:
            rows = cur.execute(SCHEDULES, {"limit": 500}).fetchall()
        return [{k: v for k, v in r.items() if not k.endswith(("_local", "_offset"))}
                | {"next_fire_in_zone": zoned(r["next_local"], r["next_offset"]),
                   "last_fire_in_zone": zoned(r["last_local"], r["last_offset"])} for r in rows]

    def act_on_schedule(self, action: str, name: str, tenant: str | None) -> dict:
        """run-now, pause or resume schedule `name`, as the console login (its owner, or a member of that role)."""
        with self._session(self._console_dsn, tenant, read_only=False) as cur:
            if action == "run-now":
                row = cur.execute(RUN_NOW, {"name": name}).fetchone()
                result = {"job_id": row["job_id"], "is_new": row["is_new"]}
            else:
                result = cur.execute(ENABLE, {"name": name, "enabled": action == "resume"}).fetchone()["next_fire_at"]
        return {"action": action, "target": name, "result": result}

    def act_on_jobs(self, action: str, filters: Filters, expect: int, user: str = "console") -> dict:
        """cancel or retry every job the filters match (at most BULK_MAX), as the console login: only when they are
        still the `expect` jobs the confirmation counted (else 409: look again). The filter must name the state the
        action applies to (cancel: pending or running; retry: failed or cancelled). Each job is cancelled or retried
        through the public functions, its reason naming the bulk action and its filter (the job's history keeps it)."""
        allowed = {"cancel": ("pending", "running"), "retry": ("failed", "cancelled")}[action]
        if filters.state is None or JobState(filters.state).label not in allowed:
            raise ConsoleError(400, f"a bulk {action} takes a filter on state {' or '.join(allowed)}")
        described = ", ".join(f"{k}={v}" for k, v in (("state", JobState(filters.state).label), ("queue", filters.queue),
                                                       ("tenant", filters.tenant), ("name", filters.name),
                                                       ("finished within", filters.finished_within)) if v is not None)
        reason = f"bulk {action} from the console by {user} ({expect} jobs: {described})"
        if expect > BULK_MAX:
            raise ConsoleError(400, f"a bulk {action} takes at most {BULK_MAX:,} jobs: narrow the filter")
        # one more than the cap: a filter that matches more must be refused, not cut to the newest BULK_MAX
        params = vars(filters) | {"name_like": None, "before": None, "limit": BULK_MAX + 1}
        with self._session(self._console_dsn, filters.tenant, read_only=False) as cur:
            ids = [r["job_id"] for r in cur.execute(jobs_statements(filters.finished_within)[0], params).fetchall()]
            if len(ids) > BULK_MAX:
                raise ConsoleError(409, f"the filter matches more than {BULK_MAX:,} jobs now, more than a bulk {action} "
                                        f"takes: narrow it")
            if len(ids) != expect:
                raise ConsoleError(409, f"the filter matches {len(ids)} jobs now, not the {expect} confirmed: look again")
            done = 0
            for job_id in ids:
                if action == "cancel":
                    done += cur.execute(CANCEL, {"job_id": job_id, "reason": reason}).fetchone()["result"]
                else:
                    cur.execute(JOB_ACTION_RETRY, {"job_id": job_id, "reason": reason})
                    done += 1
        return {"action": "bulk " + action, "target": described, "result": done, "jobs": ids}

    def act(self, action: str, target: int, tenant: str | None, reason: str | None = None, user: str = "console") -> dict:
        """cancel or retry job `target`, pause or resume queue `target`, as the console login; a job's reason names
        the console account that acted (the login is the database's record: broker_job_actions.requested_by)."""
        signed = f"{'cancelled' if action == 'cancel' else 'retried'} from the console by {user}" + (f": {reason}" if reason else "")
        query = {"cancel": CANCEL, "retry": JOB_ACTION_RETRY, "pause": PAUSE, "resume": PAUSE}[action]
        params = {"job_id": target, "queue": target, "paused": action == "pause", "reason": signed}
        with self._session(self._console_dsn, tenant, read_only=False) as cur:
            cur.execute(query, params)
            result = cur.execute(RETRY_COUNT).fetchone()["result"] if action == "retry" else cur.fetchone()["result"]
        return {"action": action, "target": target, "result": result}
