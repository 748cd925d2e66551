"""The databases of the age bench (bench/age.py): the same live jobs, once alone and once behind a history.

`prepare(db)` makes the live part through the public functions, as a broker in use has it: the bench's logins
(a runner's, an operator's, a tenant's), a registered instance, a schedule in some tenants, BENCH_AGE_RECENT jobs
finished just now (claimed and run, some failing, some cancelled), BENCH_AGE_RUNNING claimed jobs,
BENCH_AGE_READY ready jobs and a few blocked ones (by id and by group), spread over QUEUES queues and TENANTS
tenants. It also makes one job of each final kind through the real path (claimed and run by
broker_get and broker_run_batch, one failing, one cancelled by broker_cancel_job), keeps copies of their rows
and attempts as prototypes, and deletes them. Job ids of the live part start above the history's, as they would
after years of use.

`fill(db, n)` adds the history: n finished jobs with ids 1..n, copies of the prototypes (so each row and its
attempts are what the finish path writes, width and NULLs alike) with their own tenant, queue, name and times,
finish times spread evenly over BENCH_AGE_SPAN_DAYS up to BENCH_AGE_GAP_MINUTES (185) ago: older than the widest
window a probe reads (the console's charts and the finished counts keep 3 hours), so that both databases hold the
same recent jobs and the history adds only its age (what a window holds costs by the rate of finishes, at any
age); every 10th job waits on an earlier one by id (a
finished edge), every 20th of the tenants with a schedule belongs to it. One INSERT ... SELECT generate_series
per table and chunk, as the superuser with session_replication_role = replica: no trigger fires (they do
nothing for finished rows but count them), so the finished-count deltas of the last hours are written once
afterwards, aggregated, and folded by broker._merge_finished_counts() as the runner's stats would.
"""
from __future__ import annotations

import time

import psycopg
from psycopg import sql

from . import common

TENANTS = common.env_int("BENCH_AGE_TENANTS", 10)
QUEUES = 4
READY = common.env_int("BENCH_AGE_READY", 300)
RUNNING = common.env_int("BENCH_AGE_RUNNING", 40)
RECENT = common.env_int("BENCH_AGE_RECENT", 300)
SPAN_DAYS = common.env_float("BENCH_AGE_SPAN_DAYS", 30.0)
GAP_MINUTES = common.env_float("BENCH_AGE_GAP_MINUTES", 185.0)
CHUNK = common.env_int("BENCH_AGE_CHUNK", 500_000)
SCHEDULED_TENANTS = 3   # tenants t0..t2 have a schedule
NAMES = ("report", "etl", "mail", "cleanup", "sync")
RUNNER, OPS, TENANT_LOGIN = "bench_age_runner", "bench_age_ops", "bench_age_tenant"

LOGINS = f"""DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{RUNNER}') THEN CREATE ROLE {RUNNER} LOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OPS}') THEN CREATE ROLE {OPS} LOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{TENANT_LOGIN}') THEN CREATE ROLE {TENANT_LOGIN} LOGIN; END IF;
END $$;
GRANT broker_runtime TO {RUNNER};
GRANT broker_admin TO {OPS};
GRANT broker_enqueue TO {TENANT_LOGIN};"""

# the kind of history job i (90% completed, 7% failed, 3% cancelled)
KIND = "CASE WHEN mod(i, 100) < 90 THEN 'completed' WHEN mod(i, 100) < 97 THEN 'failed' ELSE 'cancelled' END"
# job i's finish time: the history's span, oldest ids first, the newest finishing GAP_MINUTES ago
FINISHED = "statement_timestamp() - make_interval(secs => %(gap)s + %(span)s * (%(n)s - i)::float8 / %(n)s)"


def _tenant(i: int) -> str:
    return f"t{i % TENANTS}"


def prepare(db: str) -> dict:
    """The live part of db (a fresh database with the extension): returns what the measurements need."""
    roles_sql = (common.ROOT / "sql" / "roles.sql").read_text()
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        conn.execute(roles_sql)
        conn.execute(LOGINS)
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}, {}, {}").format(
            sql.Identifier(db), sql.Identifier(RUNNER), sql.Identifier(OPS), sql.Identifier(TENANT_LOGIN)))
        conn.execute("INSERT INTO broker.broker_tenant_roles (tenant_id, role_name) VALUES ('t1', %s), ('t2', %s)",
                     (TENANT_LOGIN, TENANT_LOGIN))
        instance = conn.execute("SELECT broker.broker_register_instance('bench-age', 'localhost', 1, %s, 'bench')",
                                (QUEUES,)).fetchone()[0]
        schedules = []
        for t in range(SCHEDULED_TENANTS):
            schedules.append(conn.execute("SELECT schedule_id FROM broker.broker_add_schedule(%s, '0 3 * * *', "
                                          "'SELECT 1', p_tenant_id => %s)", (f"nightly-t{t}", f"t{t}")).fetchone()[0])
        _prototypes(conn, instance)
        # the live jobs' ids start above the history's (the biggest N of any run: ids are only names here)
        conn.execute("ALTER TABLE broker.broker_jobs ALTER COLUMN job_id RESTART WITH 1000000000")
        _finish_recent(conn, instance)
        running = _enqueue(conn, RUNNING, "running")
        for q in range(1, QUEUES + 1):
            conn.execute("SELECT count(*) FROM broker.broker_get(%s, %s, 3600, %s)", (q, instance, RUNNING))
        _enqueue(conn, READY, "ready")
        blocked = _blocked(conn)
        conn.execute("SELECT broker._merge_finished_counts()")  # (the prototypes' counts net to nothing)
        conn.execute("VACUUM ANALYZE")
        states = dict(conn.execute("SELECT complete_status, count(*) FROM broker.broker_jobs GROUP BY 1").fetchall())
    return {"instance": instance, "schedules": schedules, "running_job": running[0], "blocked_job": blocked,
            "live_jobs": {str(k): v for k, v in sorted(states.items())}}


def _enqueue(conn: psycopg.Connection, n: int, label: str, body=lambda i: "SELECT 1") -> list[int]:
    ids = []
    for i in range(n):
        with conn.transaction():
            conn.execute("SELECT broker.broker_set_tenant(%s)", (_tenant(i),))
            ids.append(conn.execute("SELECT job_id FROM broker.broker_add_job(%s, %s, %s, %s)",
                                    (f"{NAMES[i % len(NAMES)]}-{label}", body(i), 1 + (i // 7) % QUEUES,
                                     i % 3)).fetchone()[0])
    return ids


def _finish_recent(conn: psycopg.Connection, instance: int) -> None:
    """RECENT jobs finished just now through the real path (claimed and run, some failing, some cancelled), in both
    databases: the console's filters on finished jobs find a page of them even in the empty one."""
    ids = _enqueue(conn, RECENT, "recent", lambda i: "SELECT 1/0" if i % 100 in range(90, 97) else "SELECT 1")
    for i, job in enumerate(ids):
        if i % 100 >= 97:
            with conn.transaction():
                conn.execute("SELECT broker.broker_set_tenant(%s)", (_tenant(i),))
                conn.execute("SELECT broker.broker_cancel_job(%s, 'no longer needed')", (job,))
    for q in range(1, QUEUES + 1):
        for job, token in conn.execute("SELECT job_id, lease_token FROM broker.broker_get(%s, %s, 60, %s)",
                                       (q, instance, RECENT)).fetchall():  # (one transaction each, as a failure needs)
            conn.execute("SELECT count(*) FROM broker.broker_run_batch(ARRAY[%s]::bigint[], ARRAY[%s]::uuid[])",
                         (job, token))


def _blocked(conn: psycopg.Connection) -> int:
    """A small workflow in tenant t1: extract (ready) <- transform (by id) <- load (by group); returns transform."""
    with conn.transaction():
        conn.execute("SELECT broker.broker_set_tenant('t1')")
        first = conn.execute("SELECT job_id FROM broker.broker_add_job('extract', 'SELECT 1', "
                             "p_job_group => 'wf-extract')").fetchone()[0]
        middle = conn.execute("SELECT job_id FROM broker.broker_add_job('transform', 'SELECT 1', "
                              "p_depends_on_job_ids => ARRAY[%s]::bigint[])", (first,)).fetchone()[0]
        conn.execute("SELECT job_id FROM broker.broker_add_job('load', 'SELECT 1', "
                     "p_depends_on_groups => ARRAY['transform'])")
    return middle


def _prototypes(conn: psycopg.Connection, instance: int) -> None:
    """One job of each final kind through the real path; their rows and attempts copied, then deleted."""
    made = {}
    for kind, body in (("completed", "SELECT 1"), ("failed", "SELECT 1/0")):
        job = conn.execute("SELECT job_id FROM broker.broker_add_job(%s, %s)", (kind, body)).fetchone()[0]
        claimed = conn.execute("SELECT job_id, lease_token FROM broker.broker_get(1, %s, 60, 1)", (instance,)).fetchone()
        if claimed[0] != job:
            raise RuntimeError(f"the prototype claim took job {claimed[0]}, not {job}")
        conn.execute("SELECT count(*) FROM broker.broker_run_batch(ARRAY[%s]::bigint[], ARRAY[%s]::uuid[])", claimed)
        made[kind] = job
    made["cancelled"] = conn.execute("SELECT job_id FROM broker.broker_add_job('cancelled', 'SELECT 1')").fetchone()[0]
    conn.execute("SELECT broker.broker_cancel_job(%s, 'no longer needed')", (made["cancelled"],))
    kinds = sql.SQL("(VALUES {}) AS k (kind, job_id)").format(
        sql.SQL(", ").join(sql.SQL("({}, {})").format(sql.Literal(k), sql.Literal(v)) for k, v in made.items()))
    conn.execute(sql.SQL("CREATE TABLE public.bench_age_proto_jobs AS SELECT k.kind, j.* FROM broker.broker_jobs AS j "
                         "JOIN {} USING (job_id)").format(kinds))
    conn.execute(sql.SQL("CREATE TABLE public.bench_age_proto_attempts AS SELECT k.kind, a.* "
                         "FROM broker.broker_job_attempts AS a JOIN {} USING (job_id)").format(kinds))
    got = dict(conn.execute("SELECT kind, complete_status FROM public.bench_age_proto_jobs").fetchall())
    if got != {"completed": 2, "failed": 3, "cancelled": 4}:
        raise RuntimeError(f"the prototypes did not finish as expected: {got}")
    conn.execute("DELETE FROM broker.broker_jobs WHERE job_id = ANY (%s)", (list(made.values()),))


def _columns(conn: psycopg.Connection, table: str) -> list[str]:
    return [r[0] for r in conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                                       "AND NOT attisdropped ORDER BY attnum", (table,)).fetchall()]


def _jobs_insert(conn: psycopg.Connection, schedules: list[int]) -> sql.Composed:
    """INSERT of history jobs lo..hi: the prototype of each job's kind, these columns its own."""
    sched = "(ARRAY[" + ", ".join(str(s) for s in schedules) + "]::bigint[])" if schedules else "(ARRAY[]::bigint[])"
    own = {
        "job_id": "i",
        "tenant_id": f"'t' || mod(i, {TENANTS})",
        "job_name": f"(ARRAY{list(NAMES)!r})[1 + mod(i, {len(NAMES)})]",
        "job_group": f"(ARRAY{list(NAMES)!r})[1 + mod(i, {len(NAMES)})]",
        "job_queue": f"1 + mod(i / 7, {QUEUES})",
        "schedule_id": f"CASE WHEN mod(i, 20) = 0 THEN {sched}[1 + mod(i, {TENANTS})] END",
        "created_at": "f.t - interval '2 seconds'",
        "run_after": "f.t - interval '2 seconds'",
        "started_at": "CASE WHEN p.started_at IS NOT NULL THEN f.t - interval '50 milliseconds' END",
        "finished_at": "f.t",
    }
    cols = _columns(conn, "broker.broker_jobs")
    values = [sql.SQL(own[c]) if c in own else sql.SQL("p.") + sql.Identifier(c) for c in cols]
    return sql.SQL("INSERT INTO broker.broker_jobs ({}) OVERRIDING SYSTEM VALUE SELECT {} "
                   "FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i, "
                   "LATERAL (SELECT " + FINISHED + " AS t) AS f, public.bench_age_proto_jobs AS p "
                   "WHERE p.kind = " + KIND).format(
        sql.SQL(", ").join(sql.Identifier(c) for c in cols), sql.SQL(", ").join(values))


ATTEMPTS = ("INSERT INTO broker.broker_job_attempts (job_id, tenant_id, attempt, instance_id, started_at, finished_at, "
            "outcome, error_sqlstate, error_message, command_status, rows_affected, output) "
            "SELECT j.job_id, j.tenant_id, a.attempt, a.instance_id, j.started_at, j.finished_at, a.outcome, "
            "a.error_sqlstate, a.error_message, a.command_status, a.rows_affected, a.output "
            "FROM broker.broker_jobs AS j JOIN public.bench_age_proto_attempts AS a "
            "ON a.kind = " + KIND.replace("(i,", "(j.job_id,") + " "
            "WHERE j.job_id BETWEEN %(lo)s AND %(hi)s ORDER BY j.job_id, a.attempt_id")
EDGES = (f"INSERT INTO broker.broker_job_dependency (tenant_id, job_id, depends_on_job_id) "
         f"SELECT 't' || mod(i, {TENANTS}), i, i - {TENANTS} FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i "
         f"WHERE mod(i, 10) = 5 AND i > {TENANTS}")
COUNTS = """INSERT INTO broker.broker_finished_count (finished_minute, job_queue, tenant_id, complete_status, jobs)
            SELECT broker._finished_minute(finished_at), job_queue, tenant_id, complete_status, count(*)
              FROM broker.broker_jobs
             WHERE complete_status >= 2 AND finished_at >= statement_timestamp() - broker._finished_kept()
             GROUP BY 1, 2, 3, 4"""


def fill(db: str, n: int, schedules: list[int], progress=print) -> dict:
    """The history (module docstring); returns the seconds each step took."""
    took: dict = {}
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET maintenance_work_mem = '512MB'")
        insert_jobs = _jobs_insert(conn, schedules)
        params = {"span": SPAN_DAYS * 86400, "gap": GAP_MINUTES * 60, "n": n}
        t0 = time.monotonic()
        for lo in range(1, n + 1, CHUNK):
            hi = min(n, lo + CHUNK - 1)
            p = params | {"lo": lo, "hi": hi}
            conn.execute(insert_jobs, p)
            conn.execute(ATTEMPTS, p)
            conn.execute(EDGES, p)
            progress(f"  age fill: {hi:,} of {n:,} finished jobs ({time.monotonic() - t0:.0f} s)")
        took["insert_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        conn.execute("SET session_replication_role = origin")
        conn.execute(COUNTS)
        took["merged_counts"] = conn.execute("SELECT broker._merge_finished_counts()").fetchone()[0]
        took["counts_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        conn.execute("VACUUM ANALYZE")
        took["vacuum_analyze_s"] = time.monotonic() - t2
        progress(f"  age fill: VACUUM ANALYZE {took['vacuum_analyze_s']:.0f} s")
    return took


SIZES = """SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid),
                  c.reltuples::bigint
             FROM pg_class AS c WHERE c.relnamespace = 'broker'::regnamespace AND c.relkind = 'r'
            ORDER BY pg_total_relation_size(c.oid) DESC"""
INDEX_SIZES = """SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)
                   FROM pg_index AS i WHERE i.indrelid = ANY (ARRAY['broker.broker_jobs'::regclass,
                        'broker.broker_job_attempts'::regclass, 'broker.broker_job_dependency'::regclass])
                  ORDER BY 2 DESC"""


def sizes(db: str) -> dict:
    """The database's size, each broker table's (heap, indexes, total, rows) and the big tables' indexes."""
    with psycopg.connect(dbname=db, autocommit=True) as conn:
        return {"database_bytes": conn.execute("SELECT pg_database_size(current_database())").fetchone()[0],
                "tables": [{"table": r[0], "heap_bytes": r[1], "index_bytes": r[2], "total_bytes": r[3], "rows": r[4]}
                           for r in conn.execute(SIZES).fetchall() if r[3] > 0],
                "indexes": [{"index": r[0], "bytes": r[1]} for r in conn.execute(INDEX_SIZES).fetchall()]}
