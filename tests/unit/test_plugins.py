"""Plugins: the registry of built-ins, serializers and transports from plugins, unknown names."""

from __future__ import annotations

import types

import orjson
import pytest

from runnel import App, Misconfigured, Record
from runnel.codecs import GzipCompressor, JSONSerializer, MsgpackSerializer
from runnel.exceptions import UnknownPlugin
from runnel.interfaces import Serializer
from runnel.plugins import hookimpl
from runnel.plugins.manager import plugin_names, registry
from runnel.transport import Transport

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


class FakeTransport(Transport):
    """A transport that only names partitions; anything else would need a store."""

    def __init__(self, url, settings):
        self.url = url
        self.settings = settings

    def partition_key(self, app, stream, number):
        return f"fake/{app}/{stream}/{number}"

    async def append(self, entries, maxlen=None):
        raise NotImplementedError

    async def ensure_group(self, keys, group):
        raise NotImplementedError

    async def adopt_pending(self, key, group, consumer):
        raise NotImplementedError

    async def read(self, group, consumer, positions, count, block_ms):
        raise NotImplementedError

    async def last_delivered(self, keys, group):
        raise NotImplementedError

    async def wait_for_new(self, after, block_ms):
        raise NotImplementedError

    async def ack(self, group, ids):
        raise NotImplementedError

    async def reset_group(self, keys, group, start):
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
