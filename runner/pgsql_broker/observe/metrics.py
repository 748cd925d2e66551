"""Prometheus metrics of the runner (names prefixed broker_)."""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .logs import MAX_LABEL_CHARS, short_label

_DEPTH_STATES = ("ready", "blocked", "delayed", "running", "completed_last_hour", "failed_last_hour",
                 "cancelled_last_hour")
# what an operator alerts on, from the same rows: gauge name -> (help, column, how the 'other' row sums it)
_QUEUE_GAUGES = {
    "broker_queue_paused": ("1 when claims skip the queue for this tenant (broker_pause_queue)", "paused", any),
    "broker_queue_oldest_ready_seconds": ("Age of the oldest ready job (since its run_after)", "oldest_ready_seconds",
                                          max),
    "broker_jobs_lost_last_hour": ("Attempts whose lease expired with no session executing them (recovered)",
                                   "lost_last_hour", sum),
    "broker_job_cancels_last_hour": ("Cancel requests for running jobs (broker_cancel_job)", "cancels_last_hour", sum),
    "broker_job_retries_last_hour": ("Jobs retried by an operator (broker_retry_job)", "retries_last_hour", sum),
}

# flow control (broker_tenant_stats, broker_key_stats; observe/flow.py): gauge name -> (help, column)
_TENANT_GAUGES = {
    "broker_tenant_ready": ("Jobs of the tenant claimable now in the queue (not paused, not parked)", "ready"),
    "broker_tenant_running": ("Jobs of the tenant claimed in the queue", "running"),
    "broker_tenant_share_served": ("The tenant's share (0..1) of the jobs the queue served in the last minute",
                                   "share_served"),
}
_KEY_GAUGES = {
    "broker_key_running": ("Jobs of the key running under its limit (tenant '': the limit across tenants)", "running"),
    "broker_key_max_running": ("The key's cap (broker_set_limit p_max_running)", "max_running"),
    "broker_key_per_second": ("The key's rate (broker_set_limit p_per_second)", "per_second"),
    "broker_key_waiting": ("Pending jobs of the key (parked by its limit or not)", "waiting"),
}


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["database", "queue"]
        self.completed = Counter("broker_jobs_completed", "Jobs completed", labels, registry=self.registry)
        self.failed = Counter("broker_jobs_failed", "Jobs failed for good (no attempts left)", labels,
                              registry=self.registry)
        self.interrupted = Counter("broker_jobs_interrupted", "Runs the runner's stop ended (back to pending, "
                                   "attempt not counted; broker_jobs.interruptions counts them per job)", labels,
                                   registry=self.registry)
        self.retried = Counter("broker_jobs_retried", "Failed attempts that will be retried", labels,
                               registry=self.registry)
        self.duration = Histogram("broker_job_duration_seconds", "Job run time inside broker_run", labels,
                                  registry=self.registry,
                                  buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.claim_seconds = Histogram("broker_claim_duration_seconds", "Round trip of broker_get", labels,
                                       registry=self.registry,
                                       buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1))
        self.depth = Gauge("broker_queue_depth", "Jobs per queue, tenant and state (from broker_queue_stats)",
                           ["database", "queue", "tenant", "state"], registry=self.registry)
        self.instance_active = Gauge("broker_instance_active", "1 when this runner is the active instance, 0 standby",
                                     ["database"], registry=self.registry)
        self.schedule_ticks = Counter("broker_schedule_ticks", "Calls of broker_schedule_tick", ["database"],
                                      registry=self.registry)
        self.schedule_jobs = Counter("broker_schedule_jobs", "Jobs enqueued by schedules", ["database"],
                                     registry=self.registry)
        self.queue_gauges = {name: Gauge(name, doc, ["database", "queue", "tenant"], registry=self.registry)
                             for name, (doc, _, _) in _QUEUE_GAUGES.items()}
        self.cancels_sent = Counter("broker_job_cancel_signals", "Statements of running jobs cancelled for a cancel "
                                    "request", labels, registry=self.registry)
        self._depth_labels: dict[str, set[tuple[str, ...]]] = {}
        self.connect_seconds = Histogram("broker_connect_seconds", "Time to open a worker connection (a cold "
                                         "connect on the hot path)", ["database"], registry=self.registry,
                                         buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5))
        self.unserved = Gauge("broker_unserved_queue", "1 for a queue number with jobs ready that no worker of this "
                              "runner serves (beyond the database's queue_count)", ["database", "queue"],
                              registry=self.registry)
        self._unserved_labels: dict[str, set[str]] = {}
        self._gauge_labels: dict[str, set[tuple[str, ...]]] = {}
        self.flow_gauges = {name: Gauge(name, doc, ["database", "queue", "tenant"], registry=self.registry)
                            for name, (doc, _) in _TENANT_GAUGES.items()}
        self.flow_gauges.update({name: Gauge(name, doc, ["database", "key", "tenant"], registry=self.registry)
                                 for name, (doc, _) in _KEY_GAUGES.items()})
        self._flow_labels: dict[tuple[str, str], set[tuple[str, ...]]] = {}
        self.listen_connected = Gauge("broker_listen_connected", "1 when the LISTEN connection is up", ["database"],
                                      registry=self.registry)

    def set_role(self, database: str, active: bool, listening: bool) -> None:
        self.instance_active.labels(database).set(1 if active else 0)
        self.listen_connected.labels(database).set(1 if listening else 0)

    def set_unserved(self, database: str, queues: list[int]) -> None:
        current = {str(q) for q in queues[:100]}  # (bounded: queue numbers are 1..1000)
        for queue in current:
            self.unserved.labels(database, queue).set(1)
        for queue in self._unserved_labels.get(database, set()) - current:
            self.unserved.remove(database, queue)
        self._unserved_labels[database] = current

    def set_depth(self, database: str, stats: list[dict]) -> None:
        current = set()
        for row in stats:
            for state in _DEPTH_STATES:
                labels = (database, str(row["job_queue"]), row["tenant_id"], state)
                self.depth.labels(*labels).set(row[state])
                current.add(labels)
        for labels in self._depth_labels.get(database, set()) - current:
            self.depth.remove(*labels)
        self._depth_labels[database] = current
        rows = {(database, str(row["job_queue"]), row["tenant_id"]): row for row in stats}
        for name, (_, column, _) in _QUEUE_GAUGES.items():
            for labels, row in rows.items():
                self.queue_gauges[name].labels(*labels).set(float(row.get(column) or 0))
            for labels in self._gauge_labels.get(database, set()) - rows.keys():
                self.queue_gauges[name].remove(*labels)
        self._gauge_labels[database] = set(rows)

    def set_flow(self, database: str, tenants: list[dict], keys: list[dict]) -> None:
        """The flow-control gauges from bounded rows of broker_tenant_stats and broker_key_stats (observe/flow.py);
        a column that is NULL (no cap, no rate, a queue that served none) has no series."""
        for gauges, rows, first in ((_TENANT_GAUGES, tenants, "job_queue"), (_KEY_GAUGES, keys, "concurrency_key")):
            for name, (_, column) in gauges.items():
                current = set()
                for row in rows:
                    if row[column] is None:
                        continue
                    labels = (database, str(row[first]), row["tenant_id"] or "")
                    self.flow_gauges[name].labels(*labels).set(float(row[column]))
                    current.add(labels)
                for labels in self._flow_labels.get((database, name), set()) - current:
                    self.flow_gauges[name].remove(*labels)
                self._flow_labels[(database, name)] = current


def observe_many(child, amounts: list[float]) -> None:
    """child.observe(a) for every a in amounts, with one increment per bucket hit (a transaction of 50
    jobs made per-job observe() a noticeable share of the runner's CPU). Uses the labelled histogram's
    bucket values; falls back to observe() should a prometheus_client version lack them."""
    bounds, buckets, total = (getattr(child, a, None) for a in ("_upper_bounds", "_buckets", "_sum"))
    if bounds is None or buckets is None or total is None:
        for amount in amounts:
            child.observe(amount)
        return
    for i, n in Tally(bisect_left(bounds, a) for a in amounts).items():
        buckets[i].inc(n)
    total.inc(sum(amounts))


# (queue, tenant) rows of broker_queue_stats kept per database for broker_queue_depth and the dashboard:
# enqueuers choose queue numbers (1..1000) and, without strict tenancy, tenant ids (of any length), so the
# series are bounded in number and their tenant labels in length
MAX_DEPTH_ROWS = 100
OTHER = "other"


def bounded_stats(stats: list[dict], queue_count: int, limit: int = MAX_DEPTH_ROWS) -> list[dict]:
    """At most `limit` rows of broker_queue_stats: the served queues (1..queue_count) first, then the others;
    within each, every queue's first tenant (in tenant order) before any queue's second, and so on; the rest
    summed into one row with queue and tenant 'other'."""
    stats = [dict(r, tenant_id=short_label(r["tenant_id"])) if len(r["tenant_id"]) > MAX_LABEL_CHARS else r
             for r in stats]
    if len(stats) <= limit:
        return stats
    rank: dict[int, int] = {}
    keyed = []
    for row in sorted(stats, key=lambda r: (r["job_queue"], r["tenant_id"])):
        n = rank[row["job_queue"]] = rank.get(row["job_queue"], -1) + 1
        keyed.append(((not 1 <= row["job_queue"] <= queue_count, n, row["job_queue"]), row))
    ordered = [row for _, row in sorted(keyed, key=lambda k: k[0])]
    kept, rest = ordered[:limit - 1], ordered[limit - 1:]
    other = {"job_queue": OTHER, "tenant_id": OTHER}
    other.update({state: sum(r[state] for r in rest) for state in _DEPTH_STATES})
    other.update({column: fold(r.get(column) or 0 for r in rest) for _, column, fold in _QUEUE_GAUGES.values()})
    return kept + [other]
