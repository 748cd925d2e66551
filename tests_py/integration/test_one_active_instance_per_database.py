"""One active broker instance per database; a dead one is replaced, a live one is not."""
from __future__ import annotations

import time

import psycopg
import pytest

from conftest import connect


def test_second_instance_is_refused_while_the_first_lives_and_replaces_it_after(db):
    first = connect(db)
    first_id = first.execute("SELECT broker.broker_register_instance('broker-a', 'host-a', 111, 2)").fetchone()[0]

    standby = connect(db)
    with pytest.raises(psycopg.errors.LockNotAvailable) as err:
        standby.execute("SELECT broker.broker_register_instance('broker-b', 'host-b', 222, 2)")
    assert f"Instance {first_id} (broker-a on host-a, pid 111)" in err.value.diag.message_detail

    first_pid = first.info.backend_pid
    first.close()  # the active runner dies: its session ends, the lock goes with it
    # ... once its backend has exited, which happens just after the client closes
    deadline = time.monotonic() + 30
    while standby.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (first_pid,)).fetchone()[0]:
        assert time.monotonic() < deadline, "the closed session's backend did not exit"
        time.sleep(0.01)
    second_id = standby.execute("SELECT broker.broker_register_instance('broker-b', 'host-b', 222, 2)").fetchone()[0]
    rows = dict(standby.execute("SELECT instance_id, status FROM broker.broker_queueinstance").fetchall())
    assert rows == {first_id: "dead", second_id: "active"}
    assert standby.execute("SELECT broker.broker_ping_instance(%s) IS NOT NULL", (second_id,)).fetchone() == (True,)


def test_clean_shutdown_lets_a_standby_take_over_at_once(db):
    a = connect(db)
    a_id = a.execute("SELECT broker.broker_register_instance('a')").fetchone()[0]
    b = connect(db)
    with pytest.raises(psycopg.errors.LockNotAvailable):
        b.execute("SELECT broker.broker_register_instance('b')")
    assert a.execute("SELECT broker.broker_shutdown_instance(%s)", (a_id,)).fetchone() == (True,)
    b_id = b.execute("SELECT broker.broker_register_instance('b')").fetchone()[0]
    rows = dict(b.execute("SELECT instance_id, status FROM broker.broker_queueinstance").fetchall())
    assert rows == {a_id: "stopped", b_id: "active"}
    # the old instance's session can no longer ping
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        a.execute("SELECT broker.broker_ping_instance(%s)", (a_id,))


def test_instances_are_per_database(db, template_db):
    with connect("postgres") as admin:
        admin.execute(f'CREATE DATABASE "{db}_2" TEMPLATE "{template_db}"')
        admin.execute(f'GRANT CREATE ON DATABASE "{db}_2" TO broker_admin')
    try:
        one = connect(db)
        two = connect(f"{db}_2")
        one.execute("SELECT broker.broker_register_instance('x')")
        two.execute("SELECT broker.broker_register_instance('x')")  # another database: no conflict
        one.close()
        two.close()
    finally:
        with connect("postgres") as admin:
            admin.execute(f'DROP DATABASE "{db}_2" WITH (FORCE)')
