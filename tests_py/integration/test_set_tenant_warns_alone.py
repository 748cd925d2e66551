"""broker_set_tenant as an autocommit statement of its own sets a tenant that ends with it: psql shows a
WARNING naming p_tenant_id; inside BEGIN ... COMMIT, or with the statements it is for in one message, none."""
from __future__ import annotations

import subprocess

import pytest

WARNING = "WARNING:  broker_set_tenant: this statement is a transaction of its own: tenant 'acme' ends with it"


def psql(db: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-d", db, *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_autocommit_set_tenant_warns(db):
    result = psql(db, "-c", "SELECT broker.broker_set_tenant('acme')")
    assert result.returncode == 0 and WARNING in result.stderr, result.stderr
    assert "p_tenant_id => 'acme'" in result.stderr  # the hint names the way that works


@pytest.mark.parametrize("script", [
    "BEGIN;\nSELECT broker.broker_set_tenant('acme');\nSELECT broker.broker_current_tenant();\nCOMMIT;\n",
    "SELECT broker.broker_set_tenant('acme'); SELECT broker.broker_current_tenant();\n",
], ids=["inside BEGIN", "one message with its statements"])
def test_set_tenant_with_the_statements_it_is_for_does_not_warn(db, script):
    result = psql(db, "-A", "-t", stdin=script) if script.startswith("BEGIN") else psql(db, "-A", "-t", "-c", script)
    assert result.returncode == 0 and "WARNING" not in result.stderr, result.stderr
    assert "acme" in result.stdout.split()  # broker_current_tenant() saw it
