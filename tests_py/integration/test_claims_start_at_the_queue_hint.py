"""Claims that start at the queue's hint (broker_claim_hint) still claim in order every job made
ready after it: released ones, ones enqueued by a transaction still open when the hint was
taken, higher priorities, ones whose last dependency finished; a paused tenant's jobs wait
and are claimed in order once resumed; a hint of another server is not used; a REPEATABLE
READ claim works.
Every claim here is a transaction of its own (autocommit), as the runner's are, so that the
hint is written and used."""
from __future__ import annotations

from conftest import add_job, connect

CLAIM = "SELECT job_name, job_id, lease_token FROM broker.broker_get(1, NULL, 60, %s)"


def claim(conn, n: int = 1) -> list[str]:
    return [r[0] for r in conn.execute(CLAIM, (n,)).fetchall()]


def new_hint(conn) -> tuple:
    """Drop the queue's hint; the next claim writes one where the ready jobs start then."""
    conn.execute("DELETE FROM broker.broker_claim_hint")
    return conn


def hint(conn, tenant: str = "default") -> tuple | None:
    """A tenant's position in queue 1's hint: (priority, job id)."""
    return conn.execute("SELECT p.job_priority, p.job_id FROM broker.broker_claim_hint AS h, unnest(h.positions) AS p "
                        "WHERE h.job_queue = 1 AND p.tenant_id = %s", (tenant,)).fetchone()


def test_a_job_handed_back_below_the_hint_is_claimed_next(db):
    with connect(db) as conn:
        ids = {n: add_job(conn, n, "SELECT 1") for n in ("a", "b", "c", "d", "e")}
        rows = conn.execute(CLAIM, (2,)).fetchall()
        assert [r[0] for r in rows] == ["a", "b"]
        assert claim(new_hint(conn)) == ["c"]
        assert hint(conn) == (0, ids["c"]), "the claim wrote a hint at the first ready job it saw"
        # a and b go back to pending with their old run_after: before the hint in claim order
        handed = conn.execute("SELECT array_agg(job_id ORDER BY job_id) FROM broker.broker_release_jobs(%s, %s)",
                              ([r[1] for r in rows], [r[2] for r in rows])).fetchone()[0]
        assert handed == [ids["a"], ids["b"]]
        assert claim(conn, 3) == ["a", "b", "d"]
        assert claim(conn, 3) == ["e"]


def test_a_job_enqueued_by_a_transaction_open_at_the_hint_is_claimed_in_order(db):
    with connect(db) as conn, connect(db) as other:
        add_job(conn, "warm", "SELECT 1", job_queue=2)   # (the role's first job creates its executor)
        other.execute("BEGIN")
        add_job(other, "early", "SELECT 1")   # run_after: its transaction's start, before the others
        for n in ("x", "y", "z"):
            add_job(conn, n, "SELECT 1")
        assert claim(new_hint(conn)) == ["x"]
        assert hint(conn) is not None
        other.execute("COMMIT")
        assert claim(conn, 2) == ["early", "y"]
        assert claim(conn, 2) == ["z"]


def test_a_higher_priority_job_after_the_hint_is_claimed_first(db):
    with connect(db) as conn:
        for n in ("p0-a", "p0-b", "p0-c"):
            add_job(conn, n, "SELECT 1")
        assert claim(new_hint(conn)) == ["p0-a"]
        add_job(conn, "p5", "SELECT 1", job_priority=5)
        add_job(conn, "p-1", "SELECT 1", job_priority=-1)
        assert claim(conn, 5) == ["p5", "p0-b", "p0-c", "p-1"]


def test_a_job_whose_last_dependency_finished_after_the_hint_is_claimed_in_order(db):
    with connect(db) as conn:
        blocker = add_job(conn, "blocker", "SELECT 1", job_queue=2)
        add_job(conn, "waiter", "SELECT 1", depends_on_job_ids=[blocker])
        for n in ("m", "n"):
            add_job(conn, n, "SELECT 1")
        assert claim(new_hint(conn)) == ["m"]
        job, token = conn.execute("SELECT job_id, lease_token FROM broker.broker_get(2)").fetchone()
        conn.execute("SELECT broker.broker_run(%s, %s)", (job, token))
        assert claim(conn, 2) == ["waiter", "n"]


def test_a_hint_of_another_server_start_is_not_used(db):
    with connect(db) as conn:
        add_job(conn, "first", "SELECT 1")
        assert claim(new_hint(conn), 1) == ["first"]
        add_job(conn, "second", "SELECT 1")
        # a hint that would hide every job the snapshot sees (as a dump restored from another
        # server could carry), marked as written by another start of the server
        conn.execute("""UPDATE broker.broker_claim_hint
                           SET snapshot = pg_current_snapshot(), positions = '{}',
                               started_at = pg_postmaster_start_time() - interval '1 second'""")
        assert claim(conn, 1) == ["second"]


def test_a_repeatable_read_claim_works_beside_a_newer_hint(db):
    with connect(db) as conn, connect(db) as rr:
        for n in ("r1", "r2", "r3"):
            add_job(conn, n, "SELECT 1")
        assert claim(new_hint(conn)) == ["r1"]   # writes a hint
        rr.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        rr.execute("SELECT 1").fetchone()        # its snapshot sees that hint
        conn.execute("UPDATE broker.broker_claim_hint SET positions = positions")  # a newer version of it
        for _ in range(101):                     # and the hint gets old enough to be written again
            conn.execute("SELECT pg_current_xact_id()")
        # rr would write one and cannot serialise: it leaves the hint as it is, and claims
        assert claim(rr) == ["r2"]
        rr.execute("COMMIT")
        assert claim(conn, 5) == ["r3"]


def test_a_paused_tenants_jobs_before_the_hint_are_claimed_in_order_once_resumed(db):
    with connect(db) as conn:
        first = add_job(conn, "acme-1", "SELECT 1", tenant_id="acme")
        add_job(conn, "acme-2", "SELECT 1", tenant_id="acme")
        for n in ("d-1", "d-2", "d-3"):
            add_job(conn, n, "SELECT 1")
        conn.execute("INSERT INTO broker.broker_queue_pause (job_queue, tenant_id) VALUES (1, 'acme')")
        assert claim(new_hint(conn)) == ["d-1"]
        assert hint(conn, "acme") == (0, first), "the hint is where each tenant's ready jobs start, paused ones included"
        for _ in range(101):   # the hint gets old enough to be written again, while acme is paused
            conn.execute("SELECT pg_current_xact_id()")
        conn.execute("UPDATE broker.broker_claim_hint SET positions = ARRAY(SELECT ROW(p.tenant_id, p.job_priority, "
                     "'-infinity', 0)::broker._claim_position FROM unnest(positions) AS p)")   # (still true; to see that it is)
        assert claim(conn) == ["d-2"]
        assert hint(conn, "acme") == (0, first)
        conn.execute("DELETE FROM broker.broker_queue_pause")
        assert claim(conn, 5) == ["acme-1", "acme-2", "d-3"]


def test_a_row_written_with_an_old_ready_xid_is_still_claimed(db):
    """A row written straight into broker_jobs with its own ready_xid (a data-only restore, COPY, an INSERT ...
    SELECT of archived rows) records the writing transaction all the same: a claim at the hint finds it."""
    with connect(db) as conn:
        for n in ("a", "b", "c", "d", "e"):
            add_job(conn, n, "SELECT 1")
        assert claim(new_hint(conn)) == ["a"]
        assert hint(conn) is not None
        conn.execute("INSERT INTO broker.broker_jobs (job_name, job_group, execute_str, run_after, ready_xid, "
                     "enqueued_by, tenant_id) VALUES ('restored', 'restored', 'SELECT 1', now() - interval '1 day', "
                     "'5', current_user, 'default')")
        assert conn.execute("SELECT ready_xid <> '5' FROM broker.broker_jobs WHERE job_name = 'restored'").fetchone() == (True,)
        assert claim(conn, 2) == ["restored", "b"]


def test_a_write_that_leaves_a_ready_job_in_place_keeps_its_ready_xid(db):
    """An enqueuer's no-op UPDATE of its own pending jobs (cancel_reason = NULL cancels nothing) does not re-stamp
    them: it would make every later claim treat them as new (and turn a HOT update into one of every index)."""
    with connect(db) as conn:
        job = add_job(conn, "a", "SELECT 1")
        before = conn.execute("SELECT ready_xid FROM broker.broker_jobs WHERE job_id = %s", (job,)).fetchone()[0]
        conn.execute("UPDATE broker.broker_jobs SET cancel_reason = NULL WHERE job_id = %s", (job,))
        assert conn.execute("SELECT ready_xid FROM broker.broker_jobs WHERE job_id = %s", (job,)).fetchone()[0] == before
        conn.execute("UPDATE broker.broker_jobs SET job_priority = 5 WHERE job_id = %s", (job,))  # it moves: re-stamped
        assert conn.execute("SELECT ready_xid FROM broker.broker_jobs WHERE job_id = %s", (job,)).fetchone()[0] != before
