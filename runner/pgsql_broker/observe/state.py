"""What one database's runner shows: the jobs running now, the last failures, completions per minute, queue
depths and instances (the dashboard's /api/state), and the metrics and log lines of every job outcome.

Claimed rows and outcomes are read by field name (run/queries.py defines them); nothing here imports run/.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field

from ..states import JobState
from .logs import cap_text, short_label
from .metrics import Metrics, observe_many

log = logging.getLogger("pgsql_broker")
# an attempt's outcome, by the job's state after it (a failed attempt leaves the job pending when it is retried)
_OUTCOMES = {JobState.COMPLETED: "completed", JobState.PENDING: "retrying", JobState.FAILED: "failed",
             JobState.CANCELLED: "cancelled", JobState.RUNNING: "running"}


@dataclass
class JobView:
    job_id: int
    name: str
    queue: int
    tenant: str
    started: float = field(default_factory=time.time)
    # 'executing', or 'waiting' (in a transaction of several jobs: for its turn, or for the commit)
    activity: str = "executing"


class DatabaseView:
    """The observable state of one database's runner; the supervision sets role, listening and the rest."""

    def __init__(self, database: str, queues: int, metrics: Metrics):
        self.database, self.metrics = database, metrics
        self.role = "starting"
        self.listening = False
        self.instance_id: int | None = None
        self.error: str | None = None
        self.next_schedule_fire = None
        self.running: dict[int, JobView] = {}
        self.failures: deque[dict] = deque(maxlen=20)
        self.finished_at: deque[float] = deque(maxlen=100_000)
        self.queue_stats: list[dict] = []
        self.tenant_stats: list[dict] = []  # flow control (observe/flow.py)
        self.key_stats: list[dict] = []
        self.instances: list[dict] = []
        self.unserved: list[int] = []  # queue numbers with ready jobs beyond queue_count
        self.workers = 0
        self.connections = lambda: 0  # the runner's open connections to this database
        # per-job hot path: the metric children of each queue, looked up once
        numbers = range(1, queues + 1)
        self._duration = {q: metrics.duration.labels(database, str(q)) for q in numbers}
        self._completed = {q: metrics.completed.labels(database, str(q)) for q in numbers}
        self.claim_seconds = {q: metrics.claim_seconds.labels(database, str(q)) for q in numbers}
        # traces (observe/tracing.py): an AttemptTracer when they are on, and the span of each job started
        self.tracer = None
        self._spans: dict[int, object] = {}

    def set_role(self, role: str, listening: bool) -> None:
        self.role, self.listening = role, listening
        self.metrics.set_role(self.database, active=role == "active", listening=listening)

    def planned(self, next_fire_at) -> None:
        self.next_schedule_fire = next_fire_at

    def started(self, queue: int, batch: list, activity: str = "executing") -> None:
        now = time.time()
        for row in batch:
            self.running[row.job_id] = JobView(row.job_id, row.job_name, queue, row.tenant_id, now, activity)
        if self.tracer is not None:
            self._start_spans(queue, batch)

    def ended(self, batch: list) -> None:
        for row in batch:
            self.running.pop(row.job_id, None)

    def record_all(self, queue: int, batch: list, outcomes: list) -> None:
        """Metrics, logs, spans and the dashboard's lists for the outcomes of a transaction of jobs."""
        if self.tracer is not None:
            self._end_spans(batch, outcomes)
        done = [(row, outcome) for row, outcome in zip(batch, outcomes) if outcome.status == JobState.COMPLETED]
        if done:
            observe_many(self._duration[queue], [outcome.seconds for _, outcome in done])
            self._completed[queue].inc(len(done))
            self.finished_at.extend([time.time()] * len(done))
            if log.isEnabledFor(logging.INFO):
                for row, outcome in done:
                    log.info("job completed", extra={"database": self.database, "queue": queue, "job_id": row.job_id,
                                                     "job_name": row.job_name, "seconds": round(outcome.seconds, 6)})
        if len(done) < len(outcomes):
            for row, outcome in zip(batch, outcomes):
                if outcome.status != JobState.COMPLETED:
                    self._record(queue, row, outcome)

    def _record(self, queue: int, row, outcome) -> None:
        """A job that did not complete: not run (lease lost, or gone), cancelled, or failed (retried or for good)."""
        message = cap_text(outcome.error_message)  # the extension caps it too (broker._error_text); this holds for any caller
        fields = {"database": self.database, "queue": queue, "job_id": row.job_id, "job_name": row.job_name}
        if outcome.status is None:  # lease lost meanwhile (55000), or the job is gone
            log.warning("job not run: %s", message, extra=fields)
            return
        retried = outcome.status == JobState.PENDING
        self._duration[queue].observe(outcome.seconds)
        if outcome.status == JobState.CANCELLED:  # its cancel request stopped it (run/cancelling.py)
            log.info("job cancelled", extra=fields | {"sqlstate": outcome.error_sqlstate, "attempt": outcome.attempts})
            return
        (self.metrics.retried if retried else self.metrics.failed).labels(self.database, str(queue)).inc()
        self.failures.appendleft({"job_id": row.job_id, "job_name": row.job_name, "queue": queue,
                                  "tenant": short_label(row.tenant_id), "attempt": outcome.attempts,
                                  "max_attempts": row.max_attempts, "sqlstate": outcome.error_sqlstate,
                                  "error": message, "final": outcome.status == JobState.FAILED, "at": time.time()})
        log.warning("job failed" + (", will retry" if retried else ""),
                    extra=fields | {"sqlstate": outcome.error_sqlstate, "error": message, "attempt": outcome.attempts})

    def _start_spans(self, queue: int, batch: list) -> None:
        if len(self._spans) > 100_000:  # (spans of runs whose outcome never came: a lost connection's)
            self._spans.clear()
        for row in batch:
            self._spans[row.job_id] = self.tracer.start(
                database=self.database, job_id=row.job_id, job_name=row.job_name, tenant=row.tenant_id,
                destination=str(queue), attempt=row.attempts, traceparent=row.traceparent)

    def _end_spans(self, batch: list, outcomes: list) -> None:
        for row, outcome in zip(batch, outcomes):
            span = self._spans.pop(row.job_id, None)
            if span is None:
                continue
            if outcome.status is None:  # not run (lease lost, job gone): no attempt of this runner's
                self.tracer.end(span, database=self.database, job_id=row.job_id, outcome="not_run",
                                sqlstate=outcome.error_sqlstate)
                continue
            self.tracer.end(span, database=self.database, job_id=row.job_id, outcome=_OUTCOMES[outcome.status],
                            sqlstate=outcome.error_sqlstate, rows=outcome.rows, error=cap_text(outcome.error_message))

    def snapshot(self) -> dict:
        now = time.time()
        return {"database": self.database, "role": self.role, "listening": self.listening,
                "instance_id": self.instance_id, "error": self.error, "unserved_queues": self.unserved,
                "workers": self.workers, "connections": self.connections(),
                "next_schedule_fire": self.next_schedule_fire.isoformat() if self.next_schedule_fire else None,
                "running": [{"job_id": v.job_id, "job_name": v.name, "queue": v.queue, "tenant": short_label(v.tenant),
                             "age_seconds": round(now - v.started, 1), "activity": v.activity}
                            for v in self.running.values()],
                "failures": list(self.failures), "queues": self.queue_stats, "instances": self.instances,
                "tenants": self.tenant_stats, "limits": self.key_stats,
                "completed_per_minute": [sum(1 for t in self.finished_at if now - 60 * (m + 1) < t <= now - 60 * m)
                                         for m in range(10)]}
