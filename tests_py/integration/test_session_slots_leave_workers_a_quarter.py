"""How max_open_conns_total splits into session slots and worker connections (run/rota.py): every database
keeps its session while a quarter of the cap (at least one) stays for workers; beyond that they take turns."""
from pgsql_broker.run.rota import session_slots


def test_session_slots():
    assert session_slots(0, 100) == 100  # no cap: a session per database
    assert session_slots(30, 20) == 20  # 10 left for workers
    assert session_slots(21, 20) == 16  # a quarter (5) for workers: 4 databases take turns
    assert session_slots(95, 100) == 72
    assert session_slots(2, 5) == 1  # the least: one session slot and one worker connection
    assert session_slots(4, 8) == 3
