"""A mistaken setting's name is met with the one meant: an unknown keyword of ``App(...)``
names the nearest setting and ``runnel settings`` (a listing the user has, wherever
runnel is installed), a ``RUNNEL_*`` variable close to a setting's is warned of rather
than silently ignored, and an unknown processor option names the option meant."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from runnel import App, Record, settings
from runnel.exceptions import Misconfigured
from runnel.text import nearest

URL = "memory://"
LISTED = "(runnel settings lists them all)"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("prefetch_count", f"no such setting; did you mean default_prefetch_count? {LISTED}"),
        ("log_levle", f"no such setting; did you mean log_level? {LISTED}"),
        ("REDIS_URLS", f"no such setting; did you mean redis_url? {LISTED}"),
        ("flux_capacitor", f"no such setting {LISTED}"),
    ],
)
def test_an_unknown_keyword_names_the_setting_meant(given: str, said: str) -> None:
    with pytest.raises(ValidationError) as info:
        App(name="u", redis_url=URL, **{given: 5})
    [error] = info.value.errors()
    assert (error["loc"], error["msg"], error["input"]) == ((given,), said, 5)
    assert info.value.title == "Settings"


def test_a_variable_near_a_settings_is_warned_of_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(settings, "_warned", set())
    monkeypatch.setenv("RUNNEL_PREFETCH_COUNT", "5")
    monkeypatch.setenv("RUNNEL_LOG_LEVLE", "debug")
    # Runnel's own variables that are no settings, and one far from every setting.
    for other in (
        "RUNNEL_REDIS_SERVER",
        "RUNNEL_WORKER_SLOT",
        "RUNNEL_DASHBOARD_TOKEN",
        "RUNNEL_DASHBOARD_BASIC_AUTH",
        "RUNNEL_BENCH_BASELINE",
        "RUNNEL_CAUSE",
        "RUNNEL_METRICS_SUPERVISED",
        "RUNNEL_MY_OWN_THING",
    ):
        monkeypatch.setenv(other, "1")
    with caplog.at_level(logging.WARNING, logger="runnel.settings"):
        app = App(name="u", redis_url=URL)
        App(name="v", redis_url=URL)
    assert sorted(r.getMessage() for r in caplog.records) == [
        "RUNNEL_LOG_LEVLE is not a setting and is ignored; did you mean RUNNEL_LOG_LEVEL? "
        + LISTED,
        "RUNNEL_PREFETCH_COUNT is not a setting and is ignored; did you mean "
        "RUNNEL_DEFAULT_PREFETCH_COUNT? " + LISTED,
    ]
    assert app.settings.default_prefetch_count == 32  # ignored, as said


class Order(Record):
    customer: str


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("default_prefetch_count", "default_prefetch_count (did you mean prefetch_count?)"),
        ("prefetchcount", "prefetchcount (did you mean prefetch_count?)"),
        ("zzz", "zzz"),
    ],
)
def test_an_unknown_processor_option_names_the_option_meant(given: str, said: str) -> None:
    app = App(name="u", redis_url=URL)
    orders = app.stream("orders", record=Order, partition_by="customer")
    with pytest.raises(Misconfigured) as info:
        app.processor(orders, **{given: 4})
    assert str(info.value) == f"unknown processor options: {said}"


def test_nearest_takes_the_default_prefix_off_and_on_first() -> None:
    names = ["default_prefetch_count", "prefetch", "log_level"]
    assert nearest("prefetch_count", names) == "default_prefetch_count"
    assert nearest("DEFAULT_LOG_LEVEL", names) == "log_level"
    assert nearest("log_lvel", names) == "log_level"
    assert nearest("log_lvel", names, cutoff=0.95) is None
    assert nearest("anything", []) is None
