"""The console reads from the database, not from a runner's memory: a standby runner shows the same jobs and
attempts as the active one, and a runner started afterwards shows what happened before it. Its sessions carry
nothing from one request to the next (tenant, settings) and it keeps at most two connections per login."""
from __future__ import annotations

import pytest

from conftest import add_job, connect
from console_browser import request
from job_checks import finished, wait_until
from pgsql_broker.observe.console import ConsoleDatabase, ConsoleError, Filters
from runner_process import db_dsn
from tenant_logins import enqueue_as, tenant_logins


def failed_job(db: str) -> int:
    with connect(db) as conn:
        job = add_job(conn, "nightly export", "SELECT * FROM missing_table_of_the_console")
    wait_until(lambda: finished(db, job), what="the failure")
    return job


def shown(runner, db: str, job: int) -> dict:
    code, body = request(runner.url(f"/api/jobs/{job}?database={db}"))
    assert code == 200, body
    return body["job"]


def test_a_standby_and_a_later_runner_show_the_same_jobs(db, start):
    active = start(db, name="first")
    active.wait_for(lambda r: r.role(db) == "active", what="active")
    standby = start(db, name="second")
    standby.wait_for(lambda r: r.role(db) == "standby", what="standby")
    job = failed_job(db)
    for runner in (active, standby):
        code, body = request(runner.url("/api/jobs?state=failed"))
        assert code == 200 and [j["job_id"] for j in body["jobs"]] == [job]
        attempts = shown(runner, db, job)["attempt_history"]
        assert [(a["outcome"], a["error_sqlstate"]) for a in attempts] == [("failed", "42P01")]
        assert "missing_table_of_the_console" in attempts[0]["error_message"]
    active.kill()
    later = start(db, name="third")
    later.wait_for(lambda r: r.role(db) in ("active", "standby"), what="connected")
    assert shown(later, db, job)["last_error_sqlstate"] == "42P01"

    for _ in range(20):
        assert request(standby.url(f"/api/jobs/{job}"))[0] == 200
    with connect(db) as owner:
        kept = owner.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                             "AND application_name = 'second:console'").fetchone()[0]
    assert 1 <= kept <= 2


@pytest.fixture
def ops(db):
    """Without strict tenancy, a broker_enqueue login may act for any tenant it names."""
    with tenant_logins(db, {"ops": None, "acme": "acme"}, strict=False) as names:
        yield names


def test_a_console_session_leaves_no_tenant_behind(db, ops):
    job = enqueue_as(db, ops["acme"], "acme", "acme's job", "SELECT 1")
    console = ConsoleDatabase("d", db_dsn(db), db_dsn(db, ops["ops"]), "test")
    assert [j["job_id"] for j in console.jobs(Filters(tenant="acme"))["jobs"]] == [job]
    assert console.jobs(Filters())["jobs"] == []  # the same kept connection, back in the default tenant
    with pytest.raises(ConsoleError) as refused:
        console.job(job, None, with_sql=True)
    assert refused.value.status == 404
    assert console.job(job, "acme", with_sql=True)["execute_str"] == "SELECT 1"
    assert console.job(job, "acme", with_sql=False)["execute_str"] is None
    assert console.jobs(Filters(tenant="acme", name="x'); DELETE FROM broker.broker_jobs; --"))["jobs"] == []  # data
    assert console.jobs(Filters(tenant="acme", name="ACME'S"))["jobs"][0]["job_id"] == job


def test_the_job_list_pages_by_id_over_any_number_of_jobs_and_counts_what_matches(db, monkeypatch):
    import pgsql_broker.observe.console as console_module
    with connect(db) as conn:
        ids = [add_job(conn, f"page {i}", "SELECT 1") for i in range(7)]
        add_job(conn, "other", "SELECT 1")
    console = ConsoleDatabase("d", db_dsn(db), None, "test")
    first = console.jobs(Filters(name="page", limit=3))
    assert [j["job_id"] for j in first["jobs"]] == ids[:-4:-1] and (first["count"], first["count_capped"]) == (7, False)
    second = console.jobs(Filters(name="page", limit=3, before=first["jobs"][-1]["job_id"]))
    assert [j["job_id"] for j in second["jobs"]] == ids[-4:-7:-1] and second["count"] == 7   # the count ignores the page
    last = console.jobs(Filters(name="page", limit=3, before=second["jobs"][-1]["job_id"]))
    assert [j["job_id"] for j in last["jobs"]] == [ids[0]]
    monkeypatch.setattr(console_module, "COUNT_CAP", 5)
    capped = console.jobs(Filters(name="page", limit=3))
    assert (capped["count"], capped["count_capped"]) == (5, True)


def test_a_bulk_action_takes_only_the_confirmed_jobs_of_the_logins_tenant(db):
    with tenant_logins(db, {"acme": "acme", "evil": "evil"}) as names:
        ids = [enqueue_as(db, names["acme"], "acme", f"stuck {i}", "SELECT 1") for i in range(3)]
        with connect(db) as owner:   # (kept pending: no runner here)
            owner.execute("UPDATE broker.broker_jobs SET run_after = now() + interval '1 day' WHERE job_id = ANY(%s)", (ids,))
        evil = ConsoleDatabase("d", db_dsn(db), db_dsn(db, names["evil"]), "test")
        with pytest.raises(ConsoleError) as other_tenant:   # acme's jobs are not the evil login's to see or cancel
            evil.act_on_jobs("cancel", Filters(state=0, tenant="acme", name="stuck"), 3)
        assert other_tenant.value.status in (403, 409)
        acme = ConsoleDatabase("d", db_dsn(db), db_dsn(db, names["acme"]), "test")
        with pytest.raises(ConsoleError) as no_state:
            acme.act_on_jobs("cancel", Filters(tenant="acme", name="stuck"), 3)
        assert no_state.value.status == 400
        with pytest.raises(ConsoleError) as moved:   # the filter matches 3 now, not the 2 a stale page confirmed
            acme.act_on_jobs("cancel", Filters(state=0, tenant="acme", name="stuck"), 2)
        assert moved.value.status == 409
        done = acme.act_on_jobs("cancel", Filters(state=0, tenant="acme", name="stuck"), 3)
        assert sorted(done["jobs"]) == ids and done["result"] == 3
        with connect(db) as owner:
            assert owner.execute("SELECT count(*) FROM broker.broker_jobs WHERE job_id = ANY(%s) AND complete_status = 4",
                                 (ids,)).fetchone()[0] == 3


def test_a_jobs_workflow_shows_what_it_waits_on_and_what_waits_on_it_groups_included(db):
    with connect(db) as conn:
        a = add_job(conn, "extract a", "SELECT 1", job_group="extract")
        add_job(conn, "extract b", "SELECT 1", job_group="extract")
        c = add_job(conn, "transform", "SELECT 1", depends_on_groups=["extract"])
        d = add_job(conn, "load", "SELECT 1", depends_on_job_ids=[c])
        add_job(conn, "unrelated", "SELECT 1")
    console = ConsoleDatabase("d", db_dsn(db), None, "test")
    graph = console.graph(c, None)
    assert {(n["key"], n["depth"]) for n in graph["nodes"]} == {(f"job:{c}", 0), ("group:extract", -1), (f"job:{d}", 1)}
    assert {(e["from"], e["to"]) for e in graph["edges"]} == {(f"job:{c}", "group:extract"), (f"job:{d}", f"job:{c}")}
    down = console.graph(a, None)   # what waits on a's group, and on that
    assert {n["key"] for n in down["nodes"]} == {f"job:{a}", "group:extract", f"job:{c}", f"job:{d}"}
    assert (f"job:{c}", "group:extract") in {(e["from"], e["to"]) for e in down["edges"]}
    with pytest.raises(ConsoleError) as missing:
        console.graph(10**12, None)
    assert missing.value.status == 404


def test_the_job_list_filters_by_when_jobs_finished(db):
    with connect(db) as conn:
        old, new = add_job(conn, "old", "SELECT 1"), add_job(conn, "new", "SELECT 1")
        conn.execute("UPDATE broker.broker_jobs SET complete_status = 3, finished_at = now() - interval '2 hours' WHERE job_id = %s", (old,))
        conn.execute("UPDATE broker.broker_jobs SET complete_status = 3, finished_at = now() - interval '5 minutes' WHERE job_id = %s", (new,))
    console = ConsoleDatabase("d", db_dsn(db), None, "test")
    assert [j["job_id"] for j in console.jobs(Filters.parse({"state": "failed", "finished_within": "1h"}))["jobs"]] == [new]
    assert [j["job_id"] for j in console.jobs(Filters.parse({"state": "failed", "finished_within": "24h"}))["jobs"]] == [new, old]
    with pytest.raises(ConsoleError) as bad:
        Filters.parse({"finished_within": "1 hour; DROP TABLE x"})
    assert bad.value.status == 400
