"""A bulk cancel or retry (POST /api/jobs/bulk/cancel|retry) acts only on every job its filter matches, at most
1,000: when more match, it refuses and touches none. It used to read the first 1,000 and compare their number with
the confirmed count, so a filter that matched 1,000 when the operator confirmed and 1,500 by the time of the click
(or any script sending expect=1000) cancelled the newest 1,000 and left the rest, answering 200."""
from __future__ import annotations

import pytest

from conftest import connect
from pgsql_broker.observe.console import BULK_MAX, ConsoleDatabase, ConsoleError, Filters
from runner_process import db_dsn


def test_a_filter_matching_more_than_the_cap_cancels_nothing(db):
    with connect(db) as conn:
        conn.execute("SELECT broker.broker_add_job('stuck ' || i, 'SELECT 1') FROM generate_series(1, %s) AS i",
                     (BULK_MAX + 1,))
    console = ConsoleDatabase("d", db_dsn(db), None, "test")
    for expect in (BULK_MAX, BULK_MAX + 1):
        with pytest.raises(ConsoleError) as refused:
            console.act_on_jobs("cancel", Filters(state=0, name="stuck"), expect)
        assert refused.value.status in (400, 409) and "1,000" in str(refused.value)
    with connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM broker.broker_jobs WHERE complete_status = 4").fetchone()[0] == 0
