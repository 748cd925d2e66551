"""The runner's queue_count follows the extension's queue range (1..1000): a larger one is a
configuration error naming the field, not 1,000+ idle workers and metric children."""
from __future__ import annotations

import pytest

from pgsql_broker.config import ConfigError
from pgsql_broker.settings import load


def test_queue_count_over_1000_is_a_config_error(tmp_path):
    path = tmp_path / "broker.yaml"
    path.write_text("databases:\n  - {name: a, database: d, user: u, queue_count: 1001, max_open_conns: 2000}\n")
    with pytest.raises(ConfigError, match=r"databases\[0\]\.queue_count must be <= 1000"):
        load(path, env={})
    with pytest.raises(ConfigError, match="queue_count must be <= 1000"):
        load(env={"PGBROKER_QUEUE_COUNT": "5000", "PGBROKER_MAX_OPEN_CONNS": "6000"}, dsns=["dbname=x"])
    assert load(env={"PGBROKER_QUEUE_COUNT": "1000", "PGBROKER_MAX_OPEN_CONNS": "1002"},
                dsns=["dbname=x"]).databases[0].queue_count == 1000
