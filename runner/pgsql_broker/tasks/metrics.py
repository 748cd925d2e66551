"""The worker's Prometheus metrics, in a registry of its own (served on 127.0.0.1 at /metrics when asked)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


class TaskMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.ended_total = Counter("pgsql_broker_worker_tasks_total", "Tasks this worker ran, by task and outcome "
                                   "(completed, failed, cancelled, lost, released).", ["task", "outcome"],
                                   registry=self.registry)
        self.seconds = Histogram("pgsql_broker_worker_task_seconds", "Time from a task's start in this worker to its "
                                 "end, by task.", ["task"], registry=self.registry)
        self.running = Gauge("pgsql_broker_worker_tasks_running", "Tasks running in this worker, by task.", ["task"],
                             registry=self.registry)
        self._children: dict = {}   # (metric, labels) -> child: labels() costs a lookup and a lock each time

    def _child(self, metric, *labels: str):
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def started(self, task: str) -> None:
        self._child(self.running, task).inc()

    def ended(self, task: str, outcome: str, seconds: float) -> None:
        self._child(self.running, task).dec()
        self._child(self.ended_total, task, outcome).inc()
        self._child(self.seconds, task).observe(seconds)

    def serve(self, port: int):
        server, _thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        return server
