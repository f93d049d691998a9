"""``redis+sentinel://`` URLs (docs/high-availability.md): what they name, one clear
error for a bad one, and their passwords never shown."""

from __future__ import annotations

import pytest

from runnel import App
from runnel.exceptions import Misconfigured
from runnel.urls import redact, secrets
from runnel_redis import plugin
from runnel_redis import sentinel as sentinel_urls
from runnel_redis.sentinel import FORM, Target, parse


def test_every_part_of_the_url() -> None:
    url = (
        "redis+sentinel://app:p%40ss@s1:26380,s2,[::1]:5000/my%20master/3"
        "?sentinel_username=watch&sentinel_password=w%26tch&socket_timeout=2.5"
    )
    assert parse(url) == Target(
        sentinels=[("s1", 26380), ("s2", 26379), ("::1", 5000)],
        service="my master",
        db=3,
        username="app",
        password="p@ss",
        sentinel_username="watch",
        sentinel_password="w&tch",
        options={"socket_timeout": 2.5},
    )


def test_the_least_url_and_a_password_alone() -> None:
    assert parse("redis+sentinel://s1/mymaster") == Target([("s1", 26379)], "mymaster")
    found = parse("redis+sentinel://:secret@s1:1/mymaster/")
    assert (found.username, found.password, found.db) == (None, "secret", 0)


def test_tls_takes_its_options() -> None:
    found = parse(
        "rediss+sentinel://s1/m?ssl_ca_certs=/ca.pem&ssl_cert_reqs=required"
        "&ssl_check_hostname=false"
    )
    assert found.tls
    assert found.node_options()["ssl"] and found.sentinel_options()["ssl"]
    assert found.sentinel_options()["ssl_ca_certs"] == "/ca.pem"
    assert found.options == {
        "ssl_ca_certs": "/ca.pem",
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": False,
    }


def test_the_credentials_go_each_to_their_servers() -> None:
    found = parse("redis+sentinel://u:p@s1/m?sentinel_password=q")
    assert (found.node_options()["username"], found.node_options()["password"]) == ("u", "p")
    assert found.sentinel_options()["username"] is None
    assert found.sentinel_options()["password"] == "q"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("redis+sentinel://s1:26379", "no service name"),
        ("redis+sentinel://s1:26379/", "no service name"),
        ("redis+sentinel:///m", "no host"),
        ("redis+sentinel://s1,,s2/m", "an empty host"),
        ("redis+sentinel://s1:x/m", "not a port number"),
        ("redis+sentinel://s1:70000/m", "not a port number"),
        ("redis+sentinel://[::1/m", "Invalid IPv6 URL"),
        ("redis+sentinel://[::1]x/m", "a bad address"),
        ("redis+sentinel://s1/m/zero", "the database must be a number"),
        ("redis+sentinel://s1/m/0/x", "too many path parts"),
        ("redis+sentinel://s1/m?db=1", "unknown option 'db'"),
        ("redis+sentinel://s1/m?socket_timeout=soon", "socket_timeout must be a number"),
        ("redis+sentinel://s1/m?socket_timeout=1&socket_timeout=2", "given twice"),
        ("redis+sentinel://s1/m?ssl_ca_certs=/ca.pem", "needs TLS"),
        ("rediss+sentinel://s1/m?ssl_cert_reqs=maybe", "ssl_cert_reqs must be one of"),
        ("redis+sentinel://s1/m#frag", "no #fragment"),
    ],
)
def test_a_bad_url_is_one_clear_error(url: str, why: str) -> None:
    with pytest.raises(Misconfigured) as caught:
        parse(url)
    text = str(caught.value)
    assert why in text and FORM in text and "\n" not in text


def test_an_error_shows_no_password_even_misspelt() -> None:
    url = "redis+sentinel://:data-pw@s1/m/x?sentinel_password=s-pw&sentinel_pasword=typo-pw"
    with pytest.raises(Misconfigured) as caught:
        parse(url)
    text = str(caught.value)
    assert "data-pw" not in text and "s-pw" not in text and "typo-pw" not in text


def test_redact_and_secrets_see_the_sentinel_password() -> None:
    url = "redis+sentinel://u:d%40ta@s1:1,s2:2/m/0?sentinel_password=s3nt&socket_timeout=1"
    assert redact(url) == (
        "redis+sentinel://u:***@s1:1,s2:2/m/0?sentinel_password=***&socket_timeout=1"
    )
    assert set(secrets(url)) == {"d%40ta", "d@ta", "s3nt"}
    assert secrets("redis://host/0") == []


def test_a_list_of_hosts_reaches_the_plugin() -> None:
    """Core's own check of the port (one number) leaves a list of hosts to the plugin:
    the app's store is built, its client asking those sentinels."""
    app = App(name="t", redis_url="redis+sentinel://:pw@127.0.0.1:1,127.0.0.1:2/m/0")
    store = app.store
    assert "pw" not in repr(store) and "***" in repr(store)


def test_the_plugin_names_the_schemes_the_module_parses() -> None:
    assert plugin.SENTINEL_SCHEMES == sentinel_urls.SCHEMES


def test_a_bad_url_through_the_app_is_misconfigured() -> None:
    with pytest.raises(Misconfigured, match="no service name"):
        _ = App(name="t", redis_url="redis+sentinel://127.0.0.1:1,127.0.0.1:2").store
