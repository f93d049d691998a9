"""A Record class as a neutral tree of field types, for plugins with schemas of their own.

Reading pydantic's annotations (``Annotated``, optional and other unions, generic
containers, nested and recursive records, constrained decimals) is the same work for
every schema language, so it is done once here: :func:`walk` turns a record class into
:class:`Nested`, whose fields hold the nodes below. Each plugin (runnel-avro, runnel-spark)
maps the nodes to its own types and decides what it cannot carry; :class:`Opaque` marks
what has no neutral form. Every node knows where it is (``Order.items[].sku``), so errors
can name the field.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import types
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

SCALARS: tuple[type, ...] = (bool, int, float, str, bytes, datetime.datetime, datetime.date)
"""Scalar kinds matched by subclass, in this order (``bool`` before ``int``, ``datetime``
before ``date``); ``datetime.time`` and ``uuid.UUID`` are matched exactly."""


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    where: str
    """The field's path from the record, for messages: ``Order.items[].sku``."""


@dataclasses.dataclass(frozen=True, eq=False)
class Scalar(Node):
    kind: type
    """One of :data:`SCALARS`, ``datetime.time`` or ``uuid.UUID``."""
    cls: type
    """The annotated class itself (a subclass of ``kind``, or ``kind``)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Decimal(Node):
    digits: int | None
    places: int | None
    """``max_digits`` and ``decimal_places`` when the field constrains them."""


@dataclasses.dataclass(frozen=True, eq=False)
class Literal(Node):
    values: tuple[Any, ...]


@dataclasses.dataclass(frozen=True, eq=False)
class Enum(Node):
    cls: type[enum.Enum]


@dataclasses.dataclass(frozen=True, eq=False)
class Null(Node):
    """``None`` as a type of its own (outside an optional)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Array(Node):
    """``list[X]``, ``set[X]``, ``frozenset[X]``, ``tuple[X, ...]``, ``Sequence[X]``."""

    item: Node


@dataclasses.dataclass(frozen=True, eq=False)
class Map(Node):
    key: Node
    value: Node


@dataclasses.dataclass(frozen=True, eq=False)
class Union(Node):
    """A union, ``None`` left out of ``branches`` and said by ``nullable``: ``X | None`` is
    a union of one branch."""

    branches: tuple[Node, ...]
    nullable: bool


@dataclasses.dataclass(frozen=True, eq=False)
class Field:
    name: str
    type: Node
    required: bool
    default: Any
    """The default value (factories called); None when required."""
    description: str | None


@dataclasses.dataclass(frozen=True, eq=False)
class Nested(Node):
    """A record (any pydantic model) and its fields, in declaration order."""

    cls: type[BaseModel]
    fields: tuple[Field, ...]


@dataclasses.dataclass(frozen=True, eq=False)
class Recursive(Node):
    """A record inside itself: the :class:`Nested` being walked further up."""

    cls: type[BaseModel]


OPAQUE_REASONS = ("any", "fixed-tuple", "no-item-type", "class")


@dataclasses.dataclass(frozen=True, eq=False)
class Opaque(Node):
    """What has no neutral form: ``Any`` or another annotation that is no type (``any``),
    a fixed-length tuple (``fixed-tuple``), a container without its item type
    (``no-item-type``), a class of no known kind (``class``)."""

    annotation: Any
    reason: str


def walk(record: type[BaseModel]) -> Nested:
    """The tree of ``record``'s fields."""
    node = _Walker().record(record, record.__name__)
    assert isinstance(node, Nested)
    return node


class _Walker:
    def __init__(self) -> None:
        self.open: set[type] = set()

    def record(self, cls: type[BaseModel], where: str) -> Node:
        if cls in self.open:
            return Recursive(where, cls)
        self.open.add(cls)
        try:
            fields = []
            for name, info in cls.model_fields.items():
                required = info.is_required()
                fields.append(
                    Field(
                        name,
                        self.annotation(info.annotation, list(info.metadata), f"{where}.{name}"),
                        required,
                        None if required else info.get_default(call_default_factory=True),
                        info.description,
                    )
                )
            return Nested(where, cls, tuple(fields))
        finally:
            self.open.discard(cls)

    def annotation(self, annotation: Any, metadata: list[Any], where: str) -> Node:
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            return self.annotation(args[0], [*args[1:], *metadata], where)
        if annotation is type(None):
            return Null(where)
        if origin in (typing.Union, types.UnionType):
            branches = tuple(
                self.annotation(a, metadata, where) for a in args if a is not type(None)
            )
            return Union(where, branches, len(branches) < len(args))
        if origin is typing.Literal:
            return Literal(where, args)
        if origin in (list, set, frozenset, tuple, Sequence) or annotation in (list, set, tuple):
            if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
                return Opaque(where, annotation, "fixed-tuple")
            if not args:
                return Opaque(where, annotation, "no-item-type")
            return Array(where, self.annotation(args[0], [], f"{where}[]"))
        if origin in (dict, Mapping) or annotation is dict:
            if not args:
                return Map(where, Opaque(where, Any, "any"), Opaque(f"{where}{{}}", Any, "any"))
            key = self.annotation(args[0], [], where)
            return Map(where, key, self.annotation(args[1], [], f"{where}{{}}"))
        if isinstance(annotation, type):
            return self.concrete(annotation, metadata, where)
        return Opaque(where, annotation, "any")

    def concrete(self, cls: type, metadata: list[Any], where: str) -> Node:
        if issubclass(cls, BaseModel):
            return self.record(cls, where)
        if issubclass(cls, enum.Enum):
            return Enum(where, cls)
        for kind in SCALARS:
            if issubclass(cls, kind):
                return Scalar(where, kind, cls)
        if cls in (datetime.time, uuid.UUID):
            return Scalar(where, cls, cls)
        if cls is decimal.Decimal:
            return Decimal(
                where, _constraint(metadata, "max_digits"), _constraint(metadata, "decimal_places")
            )
        return Opaque(where, cls, "class")


def _constraint(metadata: list[Any], name: str) -> Any:
    for item in metadata:
        value = getattr(item, name, None)
        if value is not None:
            return value
    return None
