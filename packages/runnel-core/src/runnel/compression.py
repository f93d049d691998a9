"""runnel 0.1's compressor names, mapped onto :mod:`runnel.codecs`.

``Gzip()`` writes gzip members any gzip reader (0.1 included) decompresses; ``LZ4()``
writes LZ4 frames, as 0.1 did, and needs the ``lz4`` package.
"""

from runnel.codecs.compressors import GzipCompressor, LZ4Compressor

Gzip = GzipCompressor
LZ4 = LZ4Compressor

__all__ = ["LZ4", "Gzip"]
