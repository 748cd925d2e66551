"""Observing the runner: log lines (logs.py), Prometheus metrics (metrics.py), what the dashboard shows
(state.py), and the HTTP server of both (web.py, dashboard.html). Never imports run/."""
