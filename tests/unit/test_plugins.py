"""Plugins: the registry of built-ins, serializers and transports from plugins, unknown names,
the installed example plugin, and what `runnel plugins` is built from."""

from __future__ import annotations

import types
import zlib

import click
import orjson
import pytest

from runnel import App, Misconfigured, Record
from runnel.codecs import GzipCompressor, JSONSerializer, MsgpackSerializer
from runnel.exceptions import UnknownPlugin
from runnel.interfaces import Serializer
from runnel.plugins import hookimpl
from runnel.plugins.inventory import inventory
from runnel.plugins.manager import (
    Provided,
    Registry,
    add_commands,
    commands,
    load_plugin,
    plugin_manager,
    plugin_names,
    registry,
)
from runnel.plugins.providers import PROVIDERS
from runnel.store.backend import Backend
from runnel.store.log import Log

URL = "redis://127.0.0.1:1"


class Item(Record):
    id: int
    name: str


def test_builtin_codecs_are_attributed_to_the_codecs_plugin():
    reg = registry()
    assert {"json", "msgpack"} <= set(reg.names("serializer"))
    assert "gzip" in reg.names("compressor")
    assert reg.get("serializer", "json").plugin == "codecs"
    assert reg.get("serializer", "msgpack").plugin == "codecs"
    assert reg.get("compressor", "gzip").plugin == "codecs"
    assert reg.get("serializer", "json").factory is JSONSerializer
    assert reg.get("serializer", "msgpack").factory is MsgpackSerializer
    assert reg.get("compressor", "gzip").factory is GzipCompressor
    assert "codecs" in plugin_names()


class Reversed(Serializer):
    """A made-up serializer: JSON written backwards."""

    name = "reversed"

    def __init__(self, compressor=None):
        self.compressor = compressor

    def dumps(self, value):
        return orjson.dumps(value)[::-1]

    def loads(self, value):
        return orjson.loads(value[::-1])


def _serializer_plugin(module_name: str, serializer_name: str) -> types.ModuleType:
    plugin = types.ModuleType(module_name)

    @hookimpl
    def runnel_serializers(register):
        register(serializer_name, Reversed)

    plugin.runnel_serializers = runnel_serializers
    return plugin


def test_plugin_module_adds_a_serializer(uid):
    name = f"mine{uid}"
    app = App(name="u", redis_url=URL, plugins=[_serializer_plugin(f"unit_plugin_{uid}", name)])
    assert registry().get("serializer", name).plugin == f"unit_plugin_{uid}"
    stream = app.stream("items", record=Item, partition_by="id", serializer=name)
    assert isinstance(stream.serializer, Reversed)
    fields = stream.encode(Item(id=1, name="a"))
    assert fields == {b"data": b'{"id":1,"name":"a"}'[::-1]}
    assert stream.decode(fields) == Item(id=1, name="a")
    # Combined with a built-in compressor by name.
    zipped = app.stream("items2", record=Item, partition_by="id", serializer=f"{name}+gzip")
    assert isinstance(zipped.serializer.compressor, GzipCompressor)
    assert zipped.decode(zipped.encode(Item(id=2, name="b"))) == Item(id=2, name="b")


def test_plugin_object_adds_a_serializer(uid):
    name = f"obj{uid}"

    class Plugin:
        @hookimpl
        def runnel_serializers(self, register):
            register(name, Reversed)

    app = App(name="u", redis_url=URL, plugins=[Plugin()])
    stream = app.stream("items", record=Item, partition_by="id", serializer=name)
    assert stream.decode(stream.encode(Item(id=1, name="x"))) == Item(id=1, name="x")


def test_plugin_by_import_path(tmp_path, uid, monkeypatch, forget_modules):
    module = f"unit_plugin_path_{uid}"
    (tmp_path / f"{module}.py").write_text(
        "from runnel.plugins import hookimpl\n"
        "from runnel.codecs import JSONSerializer\n\n"
        "@hookimpl\n"
        "def runnel_serializers(register):\n"
        f"    register('bypath{uid}', JSONSerializer)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_modules.append(module)
    app = App(name="u", redis_url=URL, plugins=[module])
    assert module in plugin_names()
    assert isinstance(
        app.stream("i", record=Item, partition_by="id", serializer=f"bypath{uid}").serializer,
        JSONSerializer,
    )


def test_registering_the_same_plugin_twice_is_harmless(uid):
    plugin = _serializer_plugin(f"unit_plugin_twice_{uid}", f"twice{uid}")
    App(name="u", redis_url=URL, plugins=[plugin])
    App(name="u", redis_url=URL, plugins=[plugin])
    assert f"twice{uid}" in registry().names("serializer")


def test_distinct_plugins_with_the_same_name_both_apply(uid):
    App(
        name="u",
        redis_url=URL,
        plugins=[_serializer_plugin(f"unit_plugin_dup_{uid}", f"first{uid}")],
    )
    App(
        name="u",
        redis_url=URL,
        plugins=[_serializer_plugin(f"unit_plugin_dup_{uid}", f"second{uid}")],
    )
    assert {f"first{uid}", f"second{uid}"} <= set(registry().names("serializer"))


def test_unknown_serializer_lists_known_names(app):
    with pytest.raises(UnknownPlugin) as info:
        app.stream("items", record=Item, partition_by="id", serializer="nope")
    message = str(info.value)
    assert "'nope'" in message
    assert "json" in message and "msgpack" in message
    assert isinstance(info.value, Misconfigured)


@pytest.mark.parametrize(
    ("kind", "name", "package"),
    [
        ("serializer", "avro", "pip install -e packages/runnel-avro"),
        ("compressor", "zstd", 'pip install -e "packages/runnel-core[zstd]"'),
        ("compressor", "lz4", 'pip install -e "packages/runnel-core[lz4]"'),
        ("transport", "rediss+cluster", "pip install -e packages/runnel-redis"),
    ],
)
def test_a_name_of_a_package_not_installed_says_what_to_install(kind, name, package):
    """A registry without the package (json and msgpack only, as with runnel-core alone)."""
    reg = Registry()
    for built_in in ("json", "msgpack"):
        reg.add(Provided("serializer", built_in, JSONSerializer, "codecs"))
    with pytest.raises(UnknownPlugin) as info:
        reg.get(kind, name)
    message = str(info.value)
    assert f"no {kind} named {name!r}" in message
    assert "which is not installed: install runnel[" in message and package in message, message


def test_a_name_no_runnel_package_provides_has_no_install_hint(app):
    with pytest.raises(UnknownPlugin) as info:
        app.stream("items", record=Item, partition_by="id", serializer="protobuf")
    assert "install" not in str(info.value)


def test_the_install_hints_name_the_plugins_that_register_those_names():
    """Every name Runnel's own packages register has a hint, and only those."""
    reg = registry()
    ours = {"codecs", "redis", "avro"}
    registered = {
        (kind, name)
        for kind in ("transport", "serializer", "compressor")
        for name in reg.names(kind)
        if reg.get(kind, name).plugin in ours
    }
    always_there = {("serializer", "json"), ("serializer", "msgpack"), ("compressor", "gzip")}
    hinted = {key for key in PROVIDERS if key[0] != "command"}
    assert hinted == registered - always_there
    for (kind, name), provider in PROVIDERS.items():
        if kind in ("transport", "serializer"):
            assert provider.checkout == f"packages/runnel-{reg.get(kind, name).plugin}"


def test_unknown_compressor_lists_known_names(app):
    with pytest.raises(UnknownPlugin, match="gzip"):
        app.stream("items", record=Item, partition_by="id", serializer="json+zzz")


def test_unknown_default_serializer_is_reported_at_stream_declaration():
    app = App(name="u", redis_url=URL, default_serializer="nope")
    with pytest.raises(UnknownPlugin, match="nope"):
        app.stream("items", record=Item, partition_by="id")


def test_unknown_plugin_module_is_misconfigured(uid):
    with pytest.raises(Misconfigured, match=f"no_such_plugin_{uid}"):
        App(name="u", redis_url=URL, plugins=[f"no_such_plugin_{uid}"])


class FakeLog(Log):
    """A log that only names partitions; anything else would need a store."""

    def partition_key(self, partition):
        app, stream, number = partition
        return f"fake/{app}/{stream}/{number}"

    async def append(self, entries, maxlen=None, ids=None, drop_oldest=False):
        raise NotImplementedError

    async def ensure_group(self, keys, group):
        raise NotImplementedError

    async def adopt_pending(self, key, group, consumer):
        raise NotImplementedError

    async def last_delivered(self, keys, group):
        raise NotImplementedError

    async def wait_for_new(self, after, block_ms):
        raise NotImplementedError


class FakeTransport(Backend):
    """A store whose log only names partitions, and that has no other role."""

    def __init__(self, url, settings):
        self.url = url
        self.settings = settings
        self.log = FakeLog()

    def coordination(self, app, stream, processor):
        raise NotImplementedError

    def leadership(self, app):
        raise NotImplementedError

    def job_store(self, app):
        raise NotImplementedError

    def schema_store(self, app, stream):
        raise NotImplementedError

    async def aclose(self):
        pass


def test_transport_is_chosen_by_url_scheme(uid):
    scheme = f"made-up{uid}"
    plugin = types.ModuleType(f"unit_transport_{uid}")

    @hookimpl
    def runnel_transports(register):
        register(scheme, FakeTransport)

    plugin.runnel_transports = runnel_transports
    app = App(name="u", redis_url=f"{scheme}://x", plugins=[plugin])
    transport = app.transport
    assert isinstance(transport, FakeTransport)
    assert transport.url == f"{scheme}://x"
    assert transport.settings is app.settings
    assert app.transport is transport  # made once (outside an event loop)
    stream = app.stream("items", record=Item, partition_by="id", partition_count=4)
    partition = stream.partition_for(Item(id=42, name=""))
    assert partition.number == stream.partition_number(Item(id=42, name=""))
    assert partition.stream is stream
    assert partition.key == f"fake/u/items/{partition.number}"
    assert [p.key for p in stream.partitions] == [f"fake/u/items/{n}" for n in range(4)]


def test_unknown_scheme_is_misconfigured(uid):
    app = App(name="u", redis_url=f"nothing{uid}://x")
    with pytest.raises(Misconfigured, match=f"nothing{uid}://"):
        _ = app.transport


def test_url_without_scheme_is_misconfigured():
    app = App(name="u", redis_url="127.0.0.1:6379")
    with pytest.raises(Misconfigured):
        _ = app.transport


# --- the installed example plugin (tests/plugins/runnel-example-plugin) ----------------------


def test_example_plugin_is_loaded_through_its_entry_point():
    pm = plugin_manager()
    [dist] = [d for p, d in pm.list_plugin_distinfo() if pm.get_name(p) == "example"]
    assert (dist.project_name, dist.version) == ("runnel-example-plugin", "0.1.0")
    reg = registry()
    assert reg.get("serializer", "tagged-json").plugin == "example"
    assert reg.get("compressor", "example-zlib").plugin == "example"
    [info] = [i for i in inventory() if i.name == "example"]
    assert info.source == "entry point"
    assert info.entry_point == "example = runnel_example_plugin.plugin"
    assert info.provides["serializers"] == ["tagged-json"]
    assert info.provides["compressors"] == ["example-zlib"]


def test_example_codecs_by_name(app):
    stream = app.stream(
        "items", record=Item, partition_by="id", serializer="tagged-json+example-zlib"
    )
    assert (stream.serializer.name, stream.serializer.compressor.name) == (
        "tagged-json",
        "example-zlib",
    )
    fields = stream.encode(Item(id=1, name="a"))
    assert zlib.decompress(fields[b"data"]) == b'TJ1 {"id":1,"name":"a"}'
    assert stream.decode(fields) == Item(id=1, name="a")
    # Data in another format is refused rather than misread.
    plain = app.stream("plain", record=Item, partition_by="id", serializer="tagged-json")
    with pytest.raises(ValueError, match="not tagged-json"):
        plain.serializer.loads(b'{"id":1,"name":"a"}')


# --- what `runnel plugins` is built from ------------------------------------------------------


def test_inventory_reports_app_plugins_and_what_later_ones_override(uid):
    shared = f"shared{uid}"
    first = _serializer_plugin(f"unit_inv_first_{uid}", shared)
    second = _serializer_plugin(f"unit_inv_second_{uid}", shared)
    App(name="u", redis_url=URL, plugins=[first, second])
    # The later registration wins the name...
    assert registry().get("serializer", shared).plugin == second.__name__
    infos = {i.name: i for i in inventory()}
    assert infos[second.__name__].provides["serializers"] == [shared]
    assert infos[second.__name__].source == "App(plugins=...)"
    # ...and the earlier one is reported as overridden, not silently dropped.
    assert infos[first.__name__].provides == {}
    assert infos[first.__name__].overridden == [
        {"kind": "serializer", "name": shared, "by": second.__name__}
    ]
    assert infos[first.__name__].hooks == ["runnel_serializers"]
    # Plugins are listed in registration order, built-ins first.
    names = [i.name for i in inventory()]
    assert names[0] == "codecs"
    assert names.index(first.__name__) < names.index(second.__name__)


def test_direct_load_plugin_is_reported_as_such(uid):
    plugin = _serializer_plugin(f"unit_inv_direct_{uid}", f"direct{uid}")
    load_plugin(plugin)
    [info] = [i for i in inventory() if i.name == plugin.__name__]
    assert info.source == "load_plugin()"
    assert info.distribution is None


def test_add_commands_attributes_each_command_to_its_plugin(uid):
    calls = []
    plugin = types.ModuleType(f"unit_cmd_{uid}")

    @hookimpl
    def runnel_commands(cli):
        calls.append(cli)

        @cli.group(f"grp-{uid}")
        def grp():
            """A group with a sub-command."""

        @grp.command("sub")
        def sub():
            """A sub-command."""

    plugin.runnel_commands = runnel_commands
    load_plugin(plugin)
    group = click.Group("runnel")
    add_commands(group)
    add_commands(group)  # each plugin is asked once per group
    assert calls == [group]
    assert f"grp-{uid}" in group.commands
    added = commands()
    assert added.get("command", f"grp-{uid}").plugin == plugin.__name__
    assert f"grp-{uid} sub" not in added.names("command")  # named through its group
    assert added.get("command", "example-hello").plugin == "example"
    assert added.get("command", "embedded").plugin == "redis"
