"""Running jobs: database supervision and LISTEN (database.py), the queue workers (worker.py), maintenance,
schedules, connections, the stop (stopping.py), the login check, and every statement the runner sends
(queries.py)."""
