"""Records: the typed payload of a stream, validated by pydantic."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from runnel.exceptions import Misconfigured

PRIMITIVE_TYPES: tuple[type, ...] = (bool, int, float, str, bytes)


class Record(BaseModel):
    """Base class for the records a stream carries.

    A record is a pydantic model: fields are validated on construction, records nest, and
    datetimes, decimals, enums and the like work as pydantic supports them. Such a record is
    serialized into a single stream field named ``data``.

    ``class Click(Record, primitive=True)`` declares a flat record whose fields (``int``,
    ``float``, ``bool``, ``str`` or ``bytes`` only) are stored as native field/value pairs
    of the stream entry: no serializer, and Redis can delta-compress them.
    """

    model_config = ConfigDict(extra="ignore")

    __runnel_primitive__: ClassVar[bool] = False

    def __init_subclass__(cls, *, primitive: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__runnel_primitive__ = primitive

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__runnel_primitive__:
            for name, info in cls.model_fields.items():
                if info.annotation not in PRIMITIVE_TYPES:
                    raise Misconfigured(
                        f"{cls.__name__}.{name}: a primitive record's fields must be one of "
                        f"int, float, bool, str or bytes, not {info.annotation!r}"
                    )

    @classmethod
    def is_primitive(cls) -> bool:
        return cls.__runnel_primitive__
