"""Observing the runner: log lines (logs.py), Prometheus metrics (metrics.py), this runner's own state (state.py:
role, listening, the jobs it runs), the console (console.py reads and acts in the database, console_api.py is its
HTTP API, console.html/.js/.css its page) and the HTTP server of all (web.py). Never imports run/."""
