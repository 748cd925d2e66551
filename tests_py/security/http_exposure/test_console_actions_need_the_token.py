"""The console's actions and job SQL need the bearer token: there is no default one, a short one is refused,
it is taken from the config file or the environment but never from the command line (ps shows that), it is
not in the settings' repr, and the API refuses actions without it (403 when none is configured, 401 when the
request lacks it or has another). These checks reach no database: refusals come first."""
from __future__ import annotations

import json

import pytest

from pgsql_broker.cli import runner_main
from pgsql_broker.config import ConfigError
from pgsql_broker.observe.console import ConsoleDatabase, ConsoleError
from pgsql_broker.observe.console_api import ConsoleAPI
from pgsql_broker.settings import BrokerSettings, load

TOKEN = "s3cret-console-token-0123456789"
DSN = ["dbname=d host=/nonexistent user=u"]


def api(token: str = "") -> ConsoleAPI:
    return ConsoleAPI([ConsoleDatabase("d", "dbname=d host=/nonexistent", None, "test")], token)


def post(console: ConsoleAPI, path: str, **headers: str):
    reply = console.handle("POST", path, {"Content-Type": "application/json", "Host": "127.0.0.1:1", **headers},
                           b'{"tenant": "acme"}')
    return reply.status, json.loads(reply.body)


def test_there_is_no_default_token_and_a_short_one_is_refused(tmp_path):
    assert BrokerSettings().console_token == ""
    assert load(env={}, dsns=DSN).broker.console_token == ""
    with pytest.raises(ConfigError, match="console_token must be at least 16 characters"):
        load(env={"PGBROKER_CONSOLE_TOKEN": "short"}, dsns=DSN)
    with pytest.raises(ConfigError, match="without surrounding spaces"):
        load(env={"PGBROKER_CONSOLE_TOKEN": f" {TOKEN} "}, dsns=DSN)
    config = tmp_path / "broker.json"
    config.write_text(json.dumps({"broker": {"console_token": TOKEN}}))
    assert load(config, env={}, dsns=DSN).broker.console_token == TOKEN
    assert load(env={"PGBROKER_CONSOLE_TOKEN": TOKEN}, dsns=DSN).broker.console_token == TOKEN


def test_named_console_accounts_each_have_their_own_token():
    """broker.console_token 'alice:T1,bob:T2': each token signs in its own account (what it does is signed with its
    name); a name with other characters, a short token or the same token twice is refused."""
    other = TOKEN[::-1]
    console = ConsoleAPI([ConsoleDatabase("d", "dbname=d host=/nonexistent", None, "test")], f"alice:{TOKEN},bob:{other}")
    assert console.user("Bearer " + TOKEN) == "alice" and console.user("Bearer " + other) == "bob"
    assert console.user(None) is None
    with pytest.raises(ConsoleError):
        console.user("Bearer " + TOKEN + "x")
    assert ConsoleAPI([], TOKEN).user("Bearer " + TOKEN) == "console"
    for bad in (f"al ice:{TOKEN}", f"alice:short", f"alice:{TOKEN},bob:{TOKEN}", f"alice:{TOKEN},"):
        with pytest.raises(ConfigError, match="NAME:TOKEN pairs"):
            load(env={"PGBROKER_CONSOLE_TOKEN": bad}, dsns=DSN)


def test_the_token_is_neither_a_flag_nor_in_the_settings_repr():
    assert "--console-token" not in {opt for p in runner_main.params for opt in p.opts}
    settings = load(env={"PGBROKER_CONSOLE_TOKEN": TOKEN}, dsns=DSN)
    assert TOKEN not in repr(settings) and TOKEN not in repr(settings.broker)


def test_without_a_configured_token_actions_are_refused_with_403():
    for path in ("/api/jobs/1/retry", "/api/jobs/1/cancel", "/api/queues/1/pause", "/api/queues/1/resume"):
        status, body = post(api(), path)
        assert status == 403 and "read-only" in body["error"], path
        assert post(api(), path, Authorization=f"Bearer {TOKEN}")[0] == 403


def test_with_a_token_a_request_without_it_or_with_another_gets_401():
    console = api(TOKEN)
    for headers in ({}, {"Authorization": "Bearer " + TOKEN[:-1]}, {"Authorization": "Bearer " + TOKEN + "x"},
                    {"Authorization": "Basic " + TOKEN}, {"Authorization": "Bearer"},
                    {"Authorization": "Bearer \udcff" + TOKEN[1:]}):
        status, body = post(console, "/api/jobs/1/retry", **headers)
        assert status == 401, headers
    reply = console.handle("GET", "/api/session", {"Authorization": "Bearer wrong-token-wrong-token"})
    assert reply.status == 401 and reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(console.handle("GET", "/api/session", {}).body) == {
        "token_configured": True, "authenticated": False, "user": None, "databases": ["d"]}
    assert json.loads(console.handle("GET", "/api/session", {"Authorization": "Bearer " + TOKEN}).body)["authenticated"]


def test_csrf_shaped_requests_are_refused_even_with_the_token():
    console = api(TOKEN)
    auth = {"Authorization": "Bearer " + TOKEN}
    assert post(console, "/api/jobs/1/retry", Origin="http://evil.example", **auth)[0] == 403
    assert post(console, "/api/jobs/1/retry", **{"Content-Type": "application/x-www-form-urlencoded"}, **auth)[0] == 415
    assert console.handle("GET", "/api/jobs/1/retry", auth).status == 404  # actions are POST only
    assert console.handle("PUT", "/api/jobs/1/retry", auth).status == 405
