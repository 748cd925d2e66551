"""The storage layouts whose body stays until retention (bench/storage_layouts.py has the shared parts and the
others; bench/storage_candidates.py measures them all).

  state_tables  Solid Queue's: a jobs body table that keeps every job, a narrow ready table (claim: DELETE ...
                RETURNING with SKIP LOCKED), a claimed table (the lease), a history and an attempts table
                (retention: DELETE in batches, as Solid Queue's clear_finished_jobs).
  split_keep    split's narrow hot table (with the group and the idempotency key, which must see unfinished jobs
                only), a body written once and kept, partitioned by job_id ranges (a range is dropped once all its
                jobs are past retention), and a narrow history (the finished state, beside the body) and attempts
                partitioned by day: completion deletes the hot row and inserts two narrow rows, moving no body.
"""
from __future__ import annotations

from .storage_layouts import (ATT, BODY, BODY_COLS, CLAIM_HEAD, ENQ_VALUES, ENQ_BATCH, HOT, HOT_INDEXES, HOT_VIEW,
                              LIST_COLS, NARROW_HIST, PER_CLAIM, QUEUES, TENANTS, Layout, Split, _same, _ts, _view,
                              fill_rows, ids, listing_parts, pending_rows)

def finish(s: str, source: str) -> str:
    """The rest of a completion: the finished record of the rows of CTE `source` (the running jobs it took out)
    into the narrow history, and an attempt row each."""
    return f"""     x AS (INSERT INTO {s}.hist (job_id, tenant_id, job_priority, run_after, attempts, complete_status,
                                 started_at, finished_at)
           SELECT job_id, tenant_id, job_priority, run_after, attempts, 2, started_at, clock_timestamp() FROM {source}
           RETURNING job_id, tenant_id, attempts, started_at, finished_at)
INSERT INTO {s}.att (job_id, tenant_id, attempt, instance_id, started_at, finished_at, outcome)
SELECT job_id, tenant_id, attempts, 1, started_at, finished_at, 'completed' FROM x;
"""


class StateTables(Layout):
    """Solid Queue's: jobs (every job's body, kept), ready, claimed, history, attempts."""
    name = "state_tables"
    s = "state_tables"
    hot_tables = ["state_tables.ready", "state_tables.claimed"]
    history_tables = ["state_tables.jobs", "state_tables.hist", "state_tables.att"]

    def ddl(self, day):
        s = self.s
        return [f"CREATE SCHEMA {s}", f"CREATE TABLE {s}.jobs ({BODY})",
                f"CREATE TABLE {s}.ready (job_id bigint PRIMARY KEY, job_queue integer NOT NULL, tenant_id text NOT NULL, "
                "job_priority integer NOT NULL DEFAULT 0, run_after timestamptz NOT NULL DEFAULT now(), "
                "attempts integer NOT NULL DEFAULT 0)",
                f"CREATE INDEX ON {s}.ready (job_queue, tenant_id, job_priority DESC, run_after, job_id)",
                f"CREATE TABLE {s}.claimed (job_id bigint PRIMARY KEY, job_queue integer NOT NULL, tenant_id text NOT NULL, "
                "job_priority integer NOT NULL, run_after timestamptz NOT NULL, attempts integer NOT NULL, "
                "lease_token uuid NOT NULL, lease_instance_id bigint, lease_expires_at timestamptz NOT NULL, "
                "started_at timestamptz NOT NULL)",
                f"CREATE INDEX ON {s}.claimed (lease_expires_at)",
                f"CREATE TABLE {s}.hist (job_id bigint PRIMARY KEY, tenant_id text NOT NULL, job_priority integer NOT NULL, "
                "run_after timestamptz NOT NULL, attempts integer NOT NULL, complete_status smallint NOT NULL, "
                "started_at timestamptz, finished_at timestamptz NOT NULL, last_error_sqlstate text, "
                "last_error_message text, cancel_reason text, cancel_cause_job_id bigint)",
                f"CREATE INDEX ON {s}.hist (finished_at)",
                f"CREATE TABLE {s}.att ({ATT}, PRIMARY KEY (attempt_id))", f"CREATE INDEX ON {s}.att (job_id)",
                f"CREATE INDEX ON {s}.jobs (tenant_id, job_group)"]

    def view(self, columns):
        s = self.s
        lease = _same("c", ["job_priority", "run_after", "attempts", "lease_token", "lease_instance_id",
                            "lease_expires_at", "started_at"])
        base = {**_same("j", BODY_COLS), "pending_deps": "0", "parked": "0::smallint", "interruptions": "0",
                "run_alone": "false"}
        return _view(s, [(f"{s}.ready AS r JOIN {s}.jobs AS j USING (job_id)",
                          {**base, **_same("r", ["job_priority", "run_after", "attempts"]), "complete_status": "0::smallint"}),
                         (f"{s}.claimed AS c JOIN {s}.jobs AS j USING (job_id)",
                          {**base, **lease, "complete_status": "1::smallint"}),
                         (f"{s}.hist AS x JOIN {s}.jobs AS j USING (job_id)",
                          {**base, **_same("x", ["job_priority", "run_after", "attempts", "complete_status", "started_at",
                                                 "finished_at", "last_error_sqlstate", "last_error_message",
                                                 "cancel_reason", "cancel_cause_job_id"])})], columns)

    def fill(self, day, finished, pending, queues):
        s = self.s
        return [f"INSERT INTO {s}.jobs (tenant_id, job_name, job_group, execute_str, job_queue) SELECT 't' || g % {TENANTS}, "
                f"'h', 'h', 'SELECT 1', 1 + g / {TENANTS} % {QUEUES} FROM generate_series(1, {fill_rows(finished)}) g",
                f"INSERT INTO {s}.hist (job_id, tenant_id, job_priority, run_after, attempts, complete_status, started_at, "
                f"finished_at) SELECT g, 't' || g % {TENANTS}, 0, now(), 1, 2, {_ts(day, finished)}, {_ts(day, finished)} "
                f"FROM generate_series(1, {fill_rows(finished)}) g",
                f"INSERT INTO {s}.att (job_id, tenant_id, attempt, started_at, finished_at, outcome) "
                f"SELECT job_id, tenant_id, 1, started_at, finished_at, 'completed' FROM {s}.hist",
                f"WITH j AS (INSERT INTO {s}.jobs (tenant_id, job_name, job_group, execute_str, job_queue) "
                f"{pending_rows(pending, queues)} "
                f"RETURNING job_id, job_queue, tenant_id) INSERT INTO {s}.ready (job_id, job_queue, tenant_id) SELECT * FROM j"]

    def scripts(self, day):
        s = self.s
        enq = (f"WITH j AS (INSERT INTO {s}.jobs (tenant_id, job_name, job_group, execute_str, job_queue) {{values}} "
               f"RETURNING job_id, job_queue, tenant_id) "
               f"INSERT INTO {s}.ready (job_id, job_queue, tenant_id) SELECT * FROM j;\n")
        return {
            "enqueue": CLAIM_HEAD + enq.format(values=f"VALUES ({ENQ_VALUES})"),
            "enqueue_1000": CLAIM_HEAD + enq.format(values=ENQ_BATCH),
            "claim": CLAIM_HEAD + f"""WITH r AS (DELETE FROM {s}.ready WHERE job_id IN (
               SELECT job_id FROM {s}.ready WHERE job_queue = :queue AND tenant_id = 't' || :t
                ORDER BY job_queue, tenant_id, job_priority DESC, run_after, job_id
                LIMIT {PER_CLAIM} FOR UPDATE SKIP LOCKED) RETURNING *),
     c AS (INSERT INTO {s}.claimed SELECT job_id, job_queue, tenant_id, job_priority, run_after, attempts + 1,
                  gen_random_uuid(), 1, now() + interval '60 seconds', now() FROM r RETURNING job_id)
{ids(f"{s}.jobs")}WITH c AS (DELETE FROM {s}.claimed WHERE job_id = ANY (:ids::bigint[]) RETURNING *),
{finish(s, "c")}""",
            "lookup": f"\\set id random(1, IDMAX)\nSELECT * FROM {s}.broker_jobs WHERE job_id = :id;\n",
            "listing": f"SELECT {LIST_COLS} FROM {s}.broker_jobs WHERE tenant_id = 't3' ORDER BY job_id DESC LIMIT 50;\n",
            "listing_parts": listing_parts([
                (f"{s}.{part} AS p JOIN {s}.jobs AS j USING (job_id)",
                 f"j.job_id, p.tenant_id, j.job_name, j.job_queue, {state}, j.created_at, {finished}", "p.tenant_id")
                for part, state, finished in (("ready", "0::smallint", "NULL::timestamptz"),
                                              ("claimed", "1::smallint", "NULL::timestamptz"),
                                              ("hist", "p.complete_status", "p.finished_at"))]),
        }

    def done_sql(self, day):
        return f"SELECT count(*) FROM {self.s}.att WHERE finished_at >= '{day}'"

    def retention(self, day):
        s = self.s
        return [f"WITH x AS (SELECT job_id FROM {s}.hist WHERE finished_at < '{day}' ORDER BY finished_at LIMIT 10000), "
                f"a AS (DELETE FROM {s}.att USING x WHERE att.job_id = x.job_id), "
                f"j AS (DELETE FROM {s}.jobs USING x WHERE jobs.job_id = x.job_id) "
                f"DELETE FROM {s}.hist USING x WHERE hist.job_id = x.job_id"]


class SplitKeep(Split):
    """Split's hot path; the body stays (partitioned by job_id range), history narrow and partitioned by day."""
    name = "split_keep"
    s = "split_keep"
    hist_cols = NARROW_HIST

    def __init__(self):
        self.hot_tables = [f"{self.s}.hot"]
        self.history_tables = [f"{self.s}.hist", f"{self.s}.att", f"{self.s}.body"]

    def ddl(self, day):
        s = self.s
        body = BODY.replace("job_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                            f"job_id bigint NOT NULL DEFAULT nextval('{s}.job_id_seq') PRIMARY KEY")
        return ([f"CREATE SCHEMA {s}", f"CREATE SEQUENCE {s}.job_id_seq",
                 f"CREATE TABLE {s}.body ({body}) PARTITION BY RANGE (job_id)",
                 f"CREATE TABLE {s}.hot ({HOT}, job_group text NOT NULL, idempotency_key text)"]
                + [i.format(s=s) for i in HOT_INDEXES]
                + [f"CREATE INDEX ON {s}.hot (tenant_id, job_group)",
                   f"CREATE UNIQUE INDEX ON {s}.hot (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL",
                   f"CREATE INDEX ON {s}.body (schedule_id) WHERE schedule_id IS NOT NULL"]
                + self._history_ddl(day))

    def view(self, columns):
        s = self.s
        finished = {**_same("b", BODY_COLS), **_same("x", ["tenant_id", "job_priority", "run_after", "attempts",
                                                           "complete_status", "started_at", "finished_at",
                                                           "last_error_sqlstate", "last_error_message", "cancel_reason",
                                                           "cancel_cause_job_id"]),
                    "pending_deps": "0", "parked": "0::smallint", "interruptions": "coalesce(x.interruptions, 0)",
                    "run_alone": "coalesce(x.run_alone, false)"}
        return _view(s, [(f"{s}.hot AS h JOIN {s}.body AS b USING (job_id)", HOT_VIEW),
                         (f"{s}.hist AS x JOIN {s}.body AS b USING (job_id)", finished)], columns)

    def fill(self, day, finished, pending, queues):
        s = self.s
        return [f"CREATE TABLE {s}.body_old PARTITION OF {s}.body FOR VALUES FROM (MINVALUE) TO ({finished + 1})",
                f"CREATE TABLE {s}.body_new PARTITION OF {s}.body FOR VALUES FROM ({finished + 1}) TO (MAXVALUE)",
                f"INSERT INTO {s}.body (tenant_id, job_name, job_group, execute_str, job_queue, created_at) "
                f"SELECT 't' || g % {TENANTS}, 'h', 'h', 'SELECT 1', 1 + g / {TENANTS} % {QUEUES}, {_ts(day, finished)} "
                f"FROM generate_series(1, {fill_rows(finished)}) g",
                f"INSERT INTO {s}.hist (job_id, tenant_id, job_priority, run_after, attempts, complete_status, started_at, "
                f"finished_at) SELECT job_id, tenant_id, 0, created_at, 1, 2, created_at, created_at FROM {s}.body",
                f"INSERT INTO {s}.att (job_id, tenant_id, attempt, started_at, finished_at, outcome) "
                f"SELECT job_id, tenant_id, 1, started_at, finished_at, 'completed' FROM {s}.hist",
                f"WITH b AS (INSERT INTO {s}.body (tenant_id, job_name, job_group, execute_str, job_queue) "
                f"{pending_rows(pending, queues)} "
                f"RETURNING job_id, job_queue, tenant_id, job_group) "
                f"INSERT INTO {s}.hot (job_id, job_queue, tenant_id, job_group) SELECT * FROM b"]

    def _enqueue(self, values):
        s = self.s
        return (f"{CLAIM_HEAD}WITH b AS (INSERT INTO {s}.body (tenant_id, job_name, job_group, execute_str, job_queue) "
                f"{values} RETURNING job_id, job_queue, tenant_id, job_group, idempotency_key) "
                f"INSERT INTO {s}.hot (job_id, job_queue, tenant_id, job_group, idempotency_key) SELECT * FROM b;\n")

    def _completion(self, day):
        s = self.s
        return f"""WITH h AS (DELETE FROM {s}.hot WHERE job_id = ANY (:ids::bigint[]) RETURNING *),
{finish(s, "h")}"""

    def scripts(self, day):
        s = self.s
        out = super().scripts(day)
        out["listing_parts"] = listing_parts([
            (f"{s}.hot AS h JOIN {s}.body AS b USING (job_id)",
             "b.job_id, h.tenant_id, b.job_name, b.job_queue, h.state, b.created_at, NULL::timestamptz", "h.tenant_id"),
            (f"{s}.hist AS x JOIN {s}.body AS b USING (job_id)",
             "x.job_id, x.tenant_id, b.job_name, b.job_queue, x.complete_status, b.created_at, x.finished_at",
             "x.tenant_id")])
        return out

    def retention(self, day):
        # (the body's range goes with the day here because the fill put exactly yesterday's jobs in it; in use a
        # range goes once every job in it has a history row past retention: a job that waits long holds it)
        s = self.s
        return ([f"ALTER TABLE {s}.{t} DETACH PARTITION {s}.{t}_yesterday" for t in ("hist", "att")]
                + [f"ALTER TABLE {s}.body DETACH PARTITION {s}.body_old",
                   f"DROP TABLE {s}.hist_yesterday, {s}.att_yesterday, {s}.body_old"])
