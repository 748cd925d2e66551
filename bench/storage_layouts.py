"""The storage layouts bench/storage_candidates.py measures (issue 36): each one's tables, its fill, its pgbench
scripts (enqueue, claim + completion, a lookup and a listing through its broker_jobs view) and its retention.
Here the shared parts and the layouts whose body leaves with the job (today's row, split, segments); those whose
body stays until retention are in bench/storage_layouts_kept.py.

  today         broker.broker_jobs itself and broker.broker_job_attempts (every index, CHECK, foreign key and
                trigger; row-level security not applied: the superuser). Not a copy: its triggers' functions name
                broker.broker_jobs, so on a copy they would read and write the real table instead.
  split         a narrow hot table (pending and running jobs only, with the claim, lease, parked and key
                indexes), an immutable wide body table (written at enqueue; its row goes to history at
                completion), history and attempts partitioned by day on finished_at (DETACH + DROP a day).
  segments      PgQ's rotating tables: split's hot and body tables, history and attempts into one of K plain
                segment tables chosen by the day (the writer names the segment), the oldest TRUNCATEd.

Every layout's jobs ids are those of its own sequence, so a fill makes the same ids everywhere. Table names in
the SQL below are this module's constants, never input.
"""
from __future__ import annotations

import datetime

K_SEGMENTS = 3
PER_CLAIM = 50  # the runner's default claim, as bench/ceiling.py's floors
# jobs spread over tenants t0 .. t9 (g % TENANTS) and, independently of them, over QUEUES (g / TENANTS % QUEUES):
# each claim serves one tenant of its queue, picked at random (as fair share does)
TENANTS = 10
QUEUES = 4

# the body: what never changes after enqueue
BODY = """job_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant_id text NOT NULL, job_name text NOT NULL,
  job_group text NOT NULL, execute_str text NOT NULL, job_language text NOT NULL DEFAULT 'sql',
  job_queue integer NOT NULL, run_as name NOT NULL DEFAULT CURRENT_USER, enqueued_by name NOT NULL DEFAULT CURRENT_USER,
  schedule_id bigint, idempotency_key text, max_attempts integer NOT NULL DEFAULT 1, job_timeout interval,
  job_search_path text NOT NULL DEFAULT '"$user", public', created_at timestamptz NOT NULL DEFAULT now(),
  autonomous boolean NOT NULL DEFAULT false, concurrency_key text, traceparent text"""
BODY_COLS = ["job_id", "tenant_id", "job_name", "job_group", "execute_str", "job_language", "job_queue", "run_as",
             "enqueued_by", "schedule_id", "idempotency_key", "max_attempts", "job_timeout", "job_search_path",
             "created_at", "autonomous", "concurrency_key", "traceparent"]
# the hot row: what the claim reads and the claim, a retry, a lease recovery and a cancel write (the rarely set
# ones nullable: a NULL costs a bit of the null bitmap)
HOT = """job_id bigint PRIMARY KEY, job_queue integer NOT NULL, tenant_id text NOT NULL,
  job_priority integer NOT NULL DEFAULT 0, run_after timestamptz NOT NULL DEFAULT now(),
  state smallint NOT NULL DEFAULT 0, pending_deps integer NOT NULL DEFAULT 0, parked smallint NOT NULL DEFAULT 0,
  attempts integer NOT NULL DEFAULT 0, lease_token uuid, lease_instance_id bigint, lease_expires_at timestamptz,
  started_at timestamptz, concurrency_key text, interruptions integer, run_alone boolean, cancel_reason text,
  last_error_sqlstate text, last_error_message text"""
HOT_INDEXES = [
    "CREATE INDEX ON {s}.hot (job_queue, tenant_id, job_priority DESC, run_after, job_id) "
    "WHERE state = 0 AND pending_deps = 0 AND parked = 0",
    "CREATE INDEX ON {s}.hot (lease_expires_at) WHERE state = 1",
    "CREATE INDEX ON {s}.hot (job_queue, run_after) WHERE state = 0 AND parked = 1",
    "CREATE INDEX ON {s}.hot (concurrency_key, tenant_id) WHERE state = 1 AND concurrency_key IS NOT NULL",
]
# the body holds unfinished jobs only (split, segments): group fan-in and the idempotency key need no predicate
BODY_INDEXES = ["CREATE INDEX ON {s}.body (tenant_id, job_group)",
                "CREATE UNIQUE INDEX ON {s}.body (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL",
                "CREATE INDEX ON {s}.body (schedule_id) WHERE schedule_id IS NOT NULL"]
# a finished job: the body's columns and what its end wrote
HIST = BODY.replace(" GENERATED ALWAYS AS IDENTITY PRIMARY KEY", " NOT NULL") + """,
  job_priority integer NOT NULL, run_after timestamptz NOT NULL, attempts integer NOT NULL,
  complete_status smallint NOT NULL, started_at timestamptz, finished_at timestamptz NOT NULL,
  last_error_sqlstate text, last_error_message text, cancel_reason text, interruptions integer, run_alone boolean,
  cancel_cause_job_id bigint"""
# a finished job's own record beside a body that stays (split_keep, state_tables)
NARROW_HIST = """job_id bigint NOT NULL, tenant_id text NOT NULL, job_priority integer NOT NULL,
  run_after timestamptz NOT NULL, attempts integer NOT NULL, complete_status smallint NOT NULL, started_at timestamptz,
  finished_at timestamptz NOT NULL, last_error_sqlstate text, last_error_message text, cancel_reason text,
  interruptions integer, run_alone boolean, cancel_cause_job_id bigint"""
ATT = """attempt_id bigint GENERATED ALWAYS AS IDENTITY, job_id bigint NOT NULL, tenant_id text NOT NULL,
  attempt integer NOT NULL, instance_id bigint, started_at timestamptz, finished_at timestamptz NOT NULL,
  outcome text NOT NULL, error_sqlstate text, error_message text, output text"""
HIST_INSERT_COLS = BODY_COLS + ["job_priority", "run_after", "attempts", "complete_status", "started_at", "finished_at"]

CLAIM_HEAD = f"\\set queue :client_id % {QUEUES} + 1\n\\set t random(0, {TENANTS - 1})\n"
# what a claim hands the runner beside the ids (the job's SQL and how to run it): the claim reads it (today: from
# the row it updates; the others: from the body, one probe of its primary key a job)
RUN_COLS = "execute_str, job_language, run_as, job_search_path, job_timeout"


def ids(body: str | None = None) -> str:
    """The claimed ids into :ids for the completion's transaction, the columns the runner needs read (from the
    claim's rows, or from the body table joined by job_id)."""
    if body is None:
        return "SELECT coalesce(array_agg(job_id), '{}')::text AS ids, count(execute_str) AS n FROM c \\gset\n"
    return (f"SELECT coalesce(array_agg(c.job_id), '{{}}')::text AS ids, count(b.execute_str) AS n "
            f"FROM c JOIN {body} AS b USING (job_id) \\gset\n")
ENQ_VALUES = "'t' || :t, 'e', 'e', 'SELECT 1', :queue"
ENQ_BATCH = "SELECT 't' || :t, 'e', 'e', 'SELECT 1', :queue FROM generate_series(1, 1000)"
LIST_COLS = "job_id, tenant_id, job_name, job_queue, complete_status, created_at, finished_at"


def listing_parts(branches: list[tuple[str, str, str]]) -> str:
    """The console's listing written against the parts instead of the view: each part's newest 50 of the tenant
    (branches: (from clause, its LIST_COLS expressions, its tenant column)), then the newest 50 of those. (Through
    the view the planner cannot hand a join branch the order it wants: it sorts every row of the tenant there.)"""
    legs = [f"(SELECT {cols} FROM {frm} WHERE {tenant} = 't3' ORDER BY 1 DESC LIMIT 50)" for frm, cols, tenant in branches]
    return f"SELECT * FROM ({' UNION ALL '.join(legs)}) AS u ({LIST_COLS}) ORDER BY job_id DESC LIMIT 50;\n"


class Layout:
    """One candidate: schema (or None for today), its DDL, fill and scripts."""
    name = ""
    hot_tables: list[str] = []      # the tables a claim reads and writes (width, sizes, dead tuples)
    history_tables: list[str] = []  # what retention empties (sizes, dead tuples)

    def ddl(self, day: str) -> list[str]:
        raise NotImplementedError

    def fill(self, day: str, finished: int, pending: int, queues: int) -> list[str]:
        raise NotImplementedError

    def scripts(self, day: str) -> dict[str, str]:
        raise NotImplementedError

    def done_sql(self, day: str) -> str:
        """How many attempts finished on `day` or later (the jobs the run's completions recorded)."""
        raise NotImplementedError

    def retention(self, day: str) -> list[str]:
        """Statements that remove the history finished before `day`; each repeated until it affects no row when
        it is a DELETE, run once otherwise."""
        raise NotImplementedError


def _ts(day: str, n: int, g: str = "g") -> str:
    """A fill's finished_at for row g of fill_rows(n): rows 1 .. n spread over the day before `day` (what retention
    removes), the tenth more between the start of `day` and now (so that the partitions and segments the flow
    writes into hold rows when they are analyzed, as they would in use, and their plans use their indexes)."""
    return (f"(CASE WHEN {g} <= {n} THEN timestamptz '{day}' - interval '1 day' + ({g} - 1) * (interval '1 day' - "
            f"interval '1 minute') / {max(n, 1)} ELSE timestamptz '{day}' + ({g} - {n} - 1) * (now() - timestamptz '{day}') "
            f"/ {n // 10 + 1} END)")


def pending_rows(pending: int, queues: int) -> str:
    """The pending jobs of a fill (name, group, SQL, queue and tenant), as a SELECT."""
    return (f"SELECT 't' || g % {TENANTS}, 'p', 'p', 'SELECT 1', 1 + g / {TENANTS} % {queues} "
            f"FROM generate_series(1, {pending}) g")


def fill_rows(n: int) -> int:
    return n + n // 10


class Today(Layout):
    name = "today"
    hot_tables = ["broker.broker_jobs"]
    history_tables = ["broker.broker_jobs", "broker.broker_job_attempts"]

    def ddl(self, day):
        return []

    def fill(self, day, finished, pending, queues):
        return [f"INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue, "
                f"complete_status, attempts, started_at, finished_at) SELECT 't' || g % {TENANTS}, 'h', 'h', 'SELECT 1', "
                f"1 + g / {TENANTS} % {QUEUES}, 2, 1, {_ts(day, finished)}, {_ts(day, finished)} "
                f"FROM generate_series(1, {fill_rows(finished)}) g",
                "INSERT INTO broker.broker_job_attempts (job_id, tenant_id, attempt, started_at, finished_at, outcome) "
                "SELECT job_id, tenant_id, 1, started_at, finished_at, 'completed' FROM broker.broker_jobs",
                f"INSERT INTO broker.broker_jobs (tenant_id, job_name, job_group, execute_str, job_queue) "
                f"{pending_rows(pending, queues)}"]

    def scripts(self, day):
        cols = "(tenant_id, job_name, job_group, execute_str, job_queue)"
        return {
            "enqueue": f"{CLAIM_HEAD}INSERT INTO broker.broker_jobs {cols} VALUES ({ENQ_VALUES});\n",
            "enqueue_1000": f"{CLAIM_HEAD}INSERT INTO broker.broker_jobs {cols} {ENQ_BATCH};\n",
            "claim": CLAIM_HEAD + f"""WITH c AS (UPDATE broker.broker_jobs AS j
   SET complete_status = 1, attempts = j.attempts + 1, started_at = now(), lease_token = gen_random_uuid(),
       lease_expires_at = now() + interval '60 seconds', lease_instance_id = 1
 WHERE j.job_id IN (SELECT r.job_id FROM broker.broker_jobs AS r
                     WHERE r.job_queue = :queue AND r.tenant_id = 't' || :t
                       AND r.complete_status = 0 AND r.pending_deps = 0 AND r.parked = 0
                     ORDER BY r.job_queue, r.tenant_id, r.job_priority DESC, r.run_after, r.job_id
                     LIMIT {PER_CLAIM} FOR NO KEY UPDATE SKIP LOCKED)
 RETURNING j.job_id, {', '.join('j.' + c for c in RUN_COLS.split(', '))})
{ids()}WITH d AS (UPDATE broker.broker_jobs SET complete_status = 2, finished_at = clock_timestamp(), lease_token = NULL,
                  lease_expires_at = NULL
             WHERE job_id = ANY (:ids::bigint[])
         RETURNING job_id, tenant_id, attempts, lease_instance_id, started_at, finished_at)
INSERT INTO broker.broker_job_attempts (job_id, tenant_id, attempt, instance_id, started_at, finished_at, outcome)
SELECT job_id, tenant_id, attempts, lease_instance_id, started_at, finished_at, 'completed' FROM d;
""",
            "lookup": "\\set id random(1, IDMAX)\nSELECT * FROM broker.broker_jobs WHERE job_id = :id;\n",
            "listing": f"SELECT {LIST_COLS} FROM broker.broker_jobs WHERE tenant_id = 't3' ORDER BY job_id DESC LIMIT 50;\n",
        }

    def done_sql(self, day):
        return f"SELECT count(*) FROM broker.broker_job_attempts WHERE finished_at >= '{day}'"

    def retention(self, day):
        return [f"SELECT broker.broker_purge_jobs(now() - timestamptz '{day}', 10000)"]


def _view(s: str, parts: list[tuple[str, dict]], columns: list[tuple[str, str]]) -> str:
    """CREATE VIEW s.broker_jobs: broker_jobs' columns (name, type) in its order, a SELECT per part (from clause,
    {column: expression}); a column a part lacks is NULL of its type."""
    selects = [f"SELECT {', '.join(exprs.get(c, f'NULL::{t}') + f' AS {c}' for c, t in columns)} FROM {frm}"
               for frm, exprs in parts]
    return f"CREATE VIEW {s}.broker_jobs AS\n" + "\nUNION ALL\n".join(selects)


def _same(alias: str, cols: list[str]) -> dict:
    return {c: f"{alias}.{c}" for c in cols}


HOT_VIEW = {**_same("b", BODY_COLS), **_same("h", ["tenant_id", "job_priority", "run_after", "attempts", "pending_deps",
                                                   "lease_token", "lease_instance_id", "lease_expires_at", "started_at",
                                                   "last_error_sqlstate", "last_error_message", "cancel_reason",
                                                   "parked"]),
            "complete_status": "h.state", "interruptions": "coalesce(h.interruptions, 0)",
            "run_alone": "coalesce(h.run_alone, false)"}
HIST_VIEW = {**_same("x", HIST_INSERT_COLS + ["last_error_sqlstate", "last_error_message", "cancel_reason",
                                               "cancel_cause_job_id"]),
             "pending_deps": "0", "parked": "0::smallint", "interruptions": "coalesce(x.interruptions, 0)",
             "run_alone": "coalesce(x.run_alone, false)"}


class Split(Layout):
    """Hot + body; history and attempts partitioned by day."""
    name = "split"
    s = "split"
    hist_cols = HIST

    def __init__(self):
        self.hot_tables = [f"{self.s}.hot"]
        self.history_tables = [f"{self.s}.hist", f"{self.s}.att"]

    def _history_ddl(self, day: str) -> list[str]:
        out = []
        for t, cols in (("hist", self.hist_cols), ("att", ATT)):
            out.append(f"CREATE TABLE {self.s}.{t} ({cols}) PARTITION BY RANGE (finished_at)")
            for i, label in ((-1, "yesterday"), (0, "today"), (1, "tomorrow")):
                out.append(f"CREATE TABLE {self.s}.{t}_{label} PARTITION OF {self.s}.{t} FOR VALUES FROM "
                           f"(timestamptz '{day}' + {i} * interval '1 day') "
                           f"TO (timestamptz '{day}' + {i + 1} * interval '1 day')")
            out.append(f"CREATE TABLE {self.s}.{t}_default PARTITION OF {self.s}.{t} DEFAULT")
        out += [f"CREATE INDEX ON {self.s}.hist (job_id)", f"CREATE INDEX ON {self.s}.att (job_id)"]
        return out

    def ddl(self, day):
        s = self.s
        return ([f"CREATE SCHEMA {s}", f"CREATE TABLE {s}.body ({BODY})", f"CREATE TABLE {s}.hot ({HOT})"]
                + [i.format(s=s) for i in HOT_INDEXES + BODY_INDEXES] + self._history_ddl(day))

    def view(self, columns):
        return _view(self.s, [(f"{self.s}.hot AS h JOIN {self.s}.body AS b USING (job_id)", HOT_VIEW),
                              (f"{self.s}.hist AS x", HIST_VIEW)], columns)

    def fill(self, day, finished, pending, queues):
        s, ts = self.s, _ts(day, finished, "b.job_id")
        out = [f"INSERT INTO {s}.body (tenant_id, job_name, job_group, execute_str, job_queue) SELECT 't' || g % {TENANTS}, "
               f"'h', 'h', 'SELECT 1', 1 + g / {TENANTS} % {QUEUES} FROM generate_series(1, {fill_rows(finished)}) g"]
        for offset, rows in ((-1, f"<= {finished}"), (0, f"> {finished}")):  # yesterday's, then today's
            hist, att = self._day_tables(day, offset)
            out += [f"WITH b AS (DELETE FROM {s}.body WHERE job_id {rows} RETURNING *) INSERT INTO {hist} "
                    f"({', '.join(HIST_INSERT_COLS)}) SELECT {', '.join('b.' + c for c in BODY_COLS)}, 0, b.created_at, 1, 2, "
                    f"{ts}, {ts} FROM b",
                    f"INSERT INTO {att} (job_id, tenant_id, attempt, started_at, finished_at, outcome) "
                    f"SELECT job_id, tenant_id, 1, started_at, finished_at, 'completed' FROM {hist} WHERE job_id {rows}"]
        return out + [
            f"WITH b AS (INSERT INTO {s}.body (tenant_id, job_name, job_group, execute_str, job_queue) "
            f"{pending_rows(pending, queues)} "
            f"RETURNING job_id, job_queue, tenant_id) INSERT INTO {s}.hot (job_id, job_queue, tenant_id) SELECT * FROM b"]

    def _day_tables(self, day: str, offset: int) -> tuple[str, str]:
        """Where the history and attempts of the day `offset` days from `day` go (split: the partitioned tables)."""
        return f"{self.s}.hist", f"{self.s}.att"

    def _enqueue(self, values: str) -> str:
        s = self.s
        return (f"{CLAIM_HEAD}WITH b AS (INSERT INTO {s}.body (tenant_id, job_name, job_group, execute_str, job_queue) "
                f"{values} RETURNING job_id, job_queue, tenant_id) INSERT INTO {s}.hot (job_id, job_queue, tenant_id) "
                "SELECT * FROM b;\n")

    def _claim(self) -> str:
        """The claim of the hot row and the read of its body."""
        s = self.s
        return CLAIM_HEAD + f"""WITH c AS (UPDATE {s}.hot AS j
   SET state = 1, attempts = j.attempts + 1, started_at = now(), lease_token = gen_random_uuid(),
       lease_expires_at = now() + interval '60 seconds', lease_instance_id = 1
 WHERE j.job_id IN (SELECT r.job_id FROM {s}.hot AS r
                     WHERE r.job_queue = :queue AND r.tenant_id = 't' || :t AND r.state = 0 AND r.pending_deps = 0
                       AND r.parked = 0
                     ORDER BY r.job_queue, r.tenant_id, r.job_priority DESC, r.run_after, r.job_id
                     LIMIT {PER_CLAIM} FOR NO KEY UPDATE SKIP LOCKED)
 RETURNING j.job_id)
{ids(f"{s}.body")}"""

    def _completion(self, day: str) -> str:
        """The hot row and the body out, the finished record into history, an attempt row."""
        s, (hist, att) = self.s, self._day_tables(day, 0)
        return f"""WITH h AS (DELETE FROM {s}.hot WHERE job_id = ANY (:ids::bigint[]) RETURNING *),
     b AS (DELETE FROM {s}.body WHERE job_id = ANY (:ids::bigint[]) RETURNING *),
     x AS (INSERT INTO {hist} ({', '.join(HIST_INSERT_COLS)})
           SELECT {', '.join('b.' + c for c in BODY_COLS)}, h.job_priority, h.run_after, h.attempts, 2, h.started_at,
                  clock_timestamp() FROM h JOIN b USING (job_id) RETURNING job_id, tenant_id, attempts, started_at, finished_at)
INSERT INTO {att} (job_id, tenant_id, attempt, instance_id, started_at, finished_at, outcome)
SELECT job_id, tenant_id, attempts, 1, started_at, finished_at, 'completed' FROM x;
"""

    def scripts(self, day):
        s = self.s
        return {
            "enqueue": self._enqueue(f"VALUES ({ENQ_VALUES})"),
            "enqueue_1000": self._enqueue(ENQ_BATCH),
            "claim": self._claim() + self._completion(day),
            "lookup": f"\\set id random(1, IDMAX)\nSELECT * FROM {s}.broker_jobs WHERE job_id = :id;\n",
            "listing": f"SELECT {LIST_COLS} FROM {s}.broker_jobs WHERE tenant_id = 't3' ORDER BY job_id DESC LIMIT 50;\n",
            "listing_parts": listing_parts([
                (f"{s}.hot AS h JOIN {s}.body AS b USING (job_id)",
                 "b.job_id, h.tenant_id, b.job_name, b.job_queue, h.state, b.created_at, NULL::timestamptz", "h.tenant_id"),
                (f"{s}.hist AS x", "x.job_id, x.tenant_id, x.job_name, x.job_queue, x.complete_status, x.created_at, "
                 "x.finished_at", "x.tenant_id")]),
        }

    def done_sql(self, day):
        return f"SELECT count(*) FROM {self.s}.att WHERE finished_at >= '{day}'"

    def retention(self, day):
        return [f"ALTER TABLE {self.s}.{t} DETACH PARTITION {self.s}.{t}_yesterday" for t in ("hist", "att")] + \
               [f"DROP TABLE {self.s}.hist_yesterday, {self.s}.att_yesterday"]


class Segments(Split):
    """Split's hot and body; history and attempts in K plain segment tables, a segment a day, in turn."""
    name = "segments"
    s = "segments"

    def __init__(self):
        self.hot_tables = [f"{self.s}.hot"]
        self.history_tables = [f"{self.s}.{t}_{k}" for t in ("hist", "att") for k in range(K_SEGMENTS)]

    @staticmethod
    def _k(day: str, offset: int) -> int:
        """The segment of the day `offset` days from `day` (days since 2000-01-01 modulo K)."""
        return ((datetime.date.fromisoformat(day[:10]) - datetime.date(2000, 1, 1)).days + offset) % K_SEGMENTS

    def _segment(self, day, offset, t="hist"):
        return f"{self.s}.{t}_{self._k(day, offset)}"

    def _day_tables(self, day, offset):
        return self._segment(day, offset), self._segment(day, offset, "att")

    def _history_ddl(self, day):
        out = []
        for k in range(K_SEGMENTS):
            out += [f"CREATE TABLE {self.s}.hist_{k} ({HIST})", f"CREATE TABLE {self.s}.att_{k} ({ATT})",
                    f"CREATE INDEX ON {self.s}.hist_{k} (job_id)", f"CREATE INDEX ON {self.s}.att_{k} (job_id)"]
        out.append(f"CREATE VIEW {self.s}.hist AS " + " UNION ALL ".join(
            f"SELECT * FROM {self.s}.hist_{k}" for k in range(K_SEGMENTS)))
        return out

    def done_sql(self, day):
        return f"SELECT count(*) FROM {self._segment(day, 0, 'att')} WHERE finished_at >= '{day}'"

    def retention(self, day):
        return [f"TRUNCATE {self._segment(day, -1)}, {self._segment(day, -1, 'att')}"]
