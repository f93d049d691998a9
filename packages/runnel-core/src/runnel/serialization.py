"""runnel 0.1's serializer names, mapped onto :mod:`runnel.codecs`.

0.1 had ``JSONSerializer`` (stdlib json) and ``FastJSONSerializer`` (orjson), both
writing plain UTF-8 JSON. Both are now the one orjson-based
:class:`runnel.codecs.JSONSerializer`, which writes and reads the same bytes.
"""

from runnel.codecs.serializers import JSONSerializer
from runnel.interfaces import Serializer

FastJSONSerializer = JSONSerializer
"""0.1's orjson serializer: the same class as :class:`JSONSerializer` now."""

default: Serializer = JSONSerializer()
"""The serializer a stream gets when none is given (0.1 exposed it under this name)."""

__all__ = ["FastJSONSerializer", "JSONSerializer", "default"]
