"""Every hook implementation of the workspace's plugins is annotated as its hookspec is, so
mypy checks what each plugin registers against the factory types the hookspecs name."""

from __future__ import annotations

import importlib
import inspect

import pytest

from runnel.plugins import hookspecs

PLUGINS = [
    "runnel.codecs.plugin",
    "runnel_redis.plugin",
    "runnel_avro.plugin",
    "runnel_spark.plugin",
    "runnel_dashboard.plugin",
    "runnel_otel.plugin",
]


def _signature(function: object) -> list[tuple[str, object]]:
    # The modules use postponed annotations, so these are the annotations as written.
    sig = inspect.signature(function)
    params = [(name, p.annotation) for name, p in sig.parameters.items()]
    return [*params, ("return", sig.return_annotation)]


def _hookimpls(module_name: str) -> dict[str, object]:
    module = importlib.import_module(module_name)
    return {
        name: value
        for name, value in vars(module).items()
        if callable(value) and hasattr(value, "runnel_impl")
    }


@pytest.mark.parametrize("module_name", PLUGINS)
def test_hookimpls_are_annotated_like_their_hookspecs(module_name):
    impls = _hookimpls(module_name)
    assert impls, f"{module_name} implements no hooks"
    for name, impl in impls.items():
        spec = getattr(hookspecs, name)
        assert _signature(impl) == _signature(spec), f"{module_name}.{name}"


def test_every_hookspec_is_annotated():
    specs = [v for v in vars(hookspecs).values() if hasattr(v, "runnel_spec")]
    assert specs
    for spec in specs:
        for name, annotation in _signature(spec):
            assert annotation is not inspect.Parameter.empty, f"{spec.__name__}: {name}"
