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

    def started(self, task: str) -> None:
        self.running.labels(task).inc()

    def ended(self, task: str, outcome: str, seconds: float) -> None:
        self.running.labels(task).dec()
        self.ended_total.labels(task, outcome).inc()
        self.seconds.labels(task).observe(seconds)

    def serve(self, port: int):
        server, _thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        return server
