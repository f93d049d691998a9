"""The exceptions Runnel raises on purpose."""


class RunnelError(Exception):
    """Base class of every error Runnel raises itself."""


class Misconfigured(RunnelError):
    """The application, a stream or a processor is defined in a way that cannot work."""


class UnknownPlugin(Misconfigured):
    """A serializer, compressor or transport was asked for by a name no plugin provides."""


class DecodeError(RunnelError):
    """An event's stored bytes could not be turned back into its record."""


class EncodeError(RunnelError):
    """A valid record could not be encoded by its stream's serializer (nothing was sent)."""


class SchemaIncompatible(Misconfigured):
    """A record's schema cannot be used with the schemas already stored for its stream."""
