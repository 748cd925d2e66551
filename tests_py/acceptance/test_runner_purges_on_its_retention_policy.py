"""Retention on the runner's policy: finished jobs older than the age of their final state are purged by
the runner itself, young ones and unfinished ones are kept, and a login without broker_retention purges
nothing and says what to grant. Time is handed to the code: the test writes finish times in the past."""
from __future__ import annotations

import json

import pytest

from conftest import add_job, connect
from pgsql_broker.config import ConfigError
from pgsql_broker.settings import load
from tenant_logins import tenant_logins

# (name, final state or None for pending, finished this long ago)
JOBS = [("completed-old", 2, "8 days"), ("completed-young", 2, "6 days"),
        ("failed-old", 3, "31 days"), ("failed-young", 3, "29 days"),
        ("cancelled-old", 4, "40 days"), ("cancelled-young", 4, "1 hour"),
        ("pending-old", None, None)]


def _jobs(db: str) -> None:
    with connect(db) as owner:
        for name, state, ago in JOBS:
            job = add_job(owner, name, "SELECT 1", run_after="2999-01-01T00:00:00Z")  # never claimed
            if state is not None:
                owner.execute("UPDATE broker.broker_jobs SET complete_status = %s, finished_at = now() - %s::interval, "
                              "created_at = now() - interval '60 days' WHERE job_id = %s", (state, ago, job))
            else:
                owner.execute("UPDATE broker.broker_jobs SET created_at = now() - interval '60 days' "
                              "WHERE job_id = %s", (job,))


def _names(db: str) -> set[str]:
    with connect(db) as owner:
        return {r[0] for r in owner.execute("SELECT job_name FROM broker.broker_jobs").fetchall()}


def test_the_runner_purges_old_finished_jobs_on_its_policy(db, start):
    _jobs(db)
    with tenant_logins(db, {}, strict=False) as names:
        with connect("postgres") as admin:
            admin.execute(f'GRANT broker_retention TO "{names["runner"]}"')
        runner = start(db, user=names["runner"], extra=("--retention-batch-size", "1"))  # several batches
        runner.wait_for(lambda r: not {"completed-old", "failed-old", "cancelled-old"} & _names(db),
                        what="the old finished jobs purged")
        assert _names(db) == {"completed-young", "failed-young", "cancelled-young", "pending-old"}
        purged = [json.loads(line) for line in runner.log().splitlines()
                  if line.startswith("{") and json.loads(line)["msg"].startswith("purged finished jobs")]
        assert sum(e["jobs"] for e in purged) == 3


def test_a_login_without_broker_retention_purges_nothing_and_says_what_to_grant(db, start):
    _jobs(db)
    with tenant_logins(db, {}, strict=False) as names:
        runner = start(db, user=names["runner"], extra=("--retention-interval-sec", "1"))

        def warnings(r) -> list[str]:
            return [line for line in r.log().splitlines() if "may not purge" in line]
        runner.wait_for(lambda r: warnings(r), what="the warning")
        assert "GRANT broker_retention" in warnings(runner)[0]
        assert _names(db) == {name for name, _, _ in JOBS}


def test_retention_off_or_never_purges_nothing_of_that_state(db, start):
    _jobs(db)
    with tenant_logins(db, {}, strict=False) as names:
        with connect("postgres") as admin:
            admin.execute(f'GRANT broker_retention TO "{names["runner"]}"')
        runner = start(db, user=names["runner"], extra=("--retention-failed-after", "never",
                                                        "--retention-cancelled-after", "35d"))
        runner.wait_for(lambda r: "completed-old" not in _names(db), what="the old completed job purged")
        runner.wait_for(lambda r: "cancelled-old" not in _names(db), what="the old cancelled job purged")
        assert {"failed-old", "failed-young", "cancelled-young"} <= _names(db)


@pytest.mark.parametrize("flags, message", [
    ({"retention_completed_after": "soon"}, "broker.retention_completed_after must be an age"),
    ({"retention_failed_after": "-1d"}, "broker.retention_failed_after must be an age"),
    ({"retention_batch_size": 0}, "broker.retention_batch_size must be >= 1"),
    ({"retention_batch_size": 1_000_000}, "broker.retention_batch_size must be <= 100000"),
    ({"retention_interval_sec": 0.5}, "broker.retention_interval_sec must be >= 1"),
])
def test_retention_settings_are_checked(flags, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load(env={}, flags=flags, dsns=["dbname=x"])


def test_retention_defaults_and_environment():
    settings = load(env={"PGBROKER_RETENTION_COMPLETED_AFTER": "12h", "PGBROKER_RETENTION_ENABLED": "off"},
                    dsns=["dbname=x"]).broker
    assert (settings.retention_enabled, settings.retention_completed_after, settings.retention_failed_after,
            settings.retention_cancelled_after, settings.retention_batch_size, settings.retention_interval_sec) == \
        (False, "12h", "30d", "30d", 1000, 300)


def test_no_retention_flag_turns_it_off(db, start):
    _jobs(db)
    runner = start(db, extra=("--no-retention", "--queue-depth-poll-sec", "0.1"))  # the superuser may purge
    runner.wait_for(lambda r: r.role(db) == "active", what="active")

    def stats_read(r):  # the queue depths and instances the maintenance task read last
        return [(d["queues"], d["instances"]) for d in r.state()["databases"]]
    runner.wait_for(lambda r: any(i for _, i in stats_read(r)), what="a first maintenance pass")
    first = stats_read(runner)
    with connect(db) as owner:  # one more pending job: the next read of the depths differs
        add_job(owner, "marker", "SELECT 1", run_after="2999-01-01T00:00:00Z")
    # a later pass read the depths again: the first pass's purge, which follows its read, is over (the ping, which
    # the instance list shows, moves only every 30 s: no sign of a second pass within a test's wait)
    runner.wait_for(lambda r: stats_read(r) != first, what="a second maintenance pass")
    assert _names(db) == {name for name, _, _ in JOBS} | {"marker"}
