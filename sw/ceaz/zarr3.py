"""ceaz as a Zarr format 3 array-to-bytes codec, named ``numcodecs.ceaz`` in array metadata.

Zarr 3 does not take numcodecs codecs directly: it wraps each one in a class of its own
(`zarr.codecs.numcodecs.ZFPY` and the like). This is that wrapper for `ceaz.numcodecs_codec.Ceaz`,
built on the same base class, so ceaz chunks are written and read exactly as ZFP's are. Pass it
as the serializer (it turns the chunk array into bytes):

    zarr.create_array(store, shape=..., chunks=..., dtype="f4",
                      serializer=ceaz.zarr3.Ceaz(eb=1e-3), compressors=None)

The package declares the ``zarr.codecs`` entry point ``numcodecs.ceaz``, so arrays written with
it open without importing ceaz first. The config is normalised through the numcodecs codec, so
bad values fail here and a NaN fill value is stored as the string "nan" (JSON has no NaN).
"""

from __future__ import annotations

from typing import Any

from zarr.codecs.numcodecs import _NumcodecsArrayBytesCodec

from .numcodecs_codec import Ceaz as _Numcodec


class Ceaz(_NumcodecsArrayBytesCodec, codec_name="ceaz"):
    """The Zarr 3 face of `ceaz.numcodecs_codec.Ceaz` (same arguments)."""

    def __init__(self, **codec_config: Any) -> None:
        config = dict(codec_config)
        codec_id = config.pop("id", _Numcodec.codec_id)
        if codec_id != _Numcodec.codec_id:
            raise ValueError(f"codec id must be {_Numcodec.codec_id!r}, got {codec_id!r}")
        super().__init__(**_Numcodec(**config).get_config())
