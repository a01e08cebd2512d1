"""Format constants: the one source of truth for the model, the RTL and the driver.

Everything that two implementations must agree on bit for bit lives here: the
symbol alphabet, the escape payload widths, the code-length limit, the byte
layouts of the container and the defaults. docs/format.md explains each field;
change both together.
"""

from __future__ import annotations

import struct

import numpy as np

# --- container identification -------------------------------------------------------------
MAGIC = b"CEAZ"
CHUNK_MAGIC = b"CZCH"
INDEX_MAGIC = b"CZIX"
TRAILER_MAGIC = b"CZND"
VERSION = 1

# --- value types ---------------------------------------------------------------------------
DTYPE_CODES = {np.dtype("<f4"): 1, np.dtype("<f8"): 2}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
#: Raw width of a verbatim value, per dtype, in bits.
VALUE_BITS = {np.dtype("<f4"): 32, np.dtype("<f8"): 64}

# --- error-bound modes ---------------------------------------------------------------------
EB_ABS = 0
EB_REL = 1
EB_MODES = {"abs": EB_ABS, "rel": EB_REL}

# --- prequantization -----------------------------------------------------------------------
#: |q| must stay below this; larger values go verbatim. Keeps every Lorenzo delta below 2**30.
Q_LIMIT = 1 << 27
#: S is shrunk by this fraction of the bound so that the float rounding of q*S fits in the bound.
STEP_MARGIN_LOG2 = 8
#: Bits in the integer mantissa of C = 1/S used by the float32 prequantizer.
RECIP_BITS = 32

# --- symbols -------------------------------------------------------------------------------
DEFAULT_RADIUS = 512
MIN_RADIUS = 2
MAX_RADIUS = 16384
#: Symbol 0: the delta is an outlier (|delta| >= radius); OUTLIER_BITS of delta follow.
SYM_OUTLIER = 0
#: Two's-complement width of an outlier's delta. |delta| < 2**30 always (see Q_LIMIT).
OUTLIER_BITS = 31


def sym_verbatim(radius: int) -> int:
    """Symbol for a value sent verbatim (its raw bits follow)."""
    return 2 * radius


def sym_fill(radius: int) -> int:
    """Symbol for the fill value (no payload)."""
    return 2 * radius + 1


def n_symbols(radius: int) -> int:
    """Alphabet size: outlier, 2R-1 in-band deltas, verbatim, fill."""
    return 2 * radius + 2


# --- entropy coder -------------------------------------------------------------------------
#: Longest Huffman code. 16 keeps a lane's code within one 16-bit half-word in the packer and
#: the decoder's lookup table at 2**16 entries; with 1026 symbols it costs < 0.1% vs unlimited.
MAX_CODE_LEN = 16
#: Width of a code length in a codebook entry (0 for an unused symbol, else 1..MAX_CODE_LEN).
#: An entry, as the hardware takes it, is the code in bits MAX_CODE_LEN-1:0 and the length
#: above it (`huffman.entry_words`).
CODE_LENGTH_BITS = 5
#: Codebook of chunk k is built from the histogram of chunk k - ADAPT_LAG (before: the offline
#: book picked from chunk 0's histogram, `huffman.pick_offline_book`).
DEFAULT_ADAPT_LAG = 1

# --- chunking ------------------------------------------------------------------------------
#: Sync point every K symbols: the bit offset of symbol j*K is stored for parallel decoding.
DEFAULT_SYNC_INTERVAL = 4096
#: Target values per chunk: small enough that the offline-coded first chunk is a small share of
#: a field and the on-chip buffers stay small, large enough that tables cost < 0.02 bits/value.
DEFAULT_CHUNK_VALUES = 1 << 18
#: Hard cap per chunk, so that every bit offset fits in uint32 (2**24 * 80 bits < 2**32).
MAX_CHUNK_VALUES = 1 << 24
#: Hardware line buffer: longest chunk row (x extent) in values.
DEFAULT_MAX_LINE = 4096
#: Hardware plane buffer: largest chunk plane (y*x extent) in values.
DEFAULT_MAX_PLANE = 1 << 16
#: Original arrays of up to this many dimensions fold into 3-D.
MAX_NDIM = 8

# --- byte layouts (all little-endian) ------------------------------------------------------
#: File header. Fields, in order: magic, version, header size, dtype code, original ndim,
#: eb mode, flags, original shape (8 x u64), user bound, bound in force (eb_f), step S,
#: radius, max code length, adapt lag, reserved, sync interval, chunk shape (z, y, x),
#: number of chunks, fill bits, finite min, finite max, then the CRC32 of all of the above.
HEADER = struct.Struct("<4sHHBBBB8QdddIBBHI3IIQdd")
HEADER_CRC = struct.Struct("<I")
HEADER_SIZE = HEADER.size + HEADER_CRC.size
FLAG_FILL = 0x01

#: Chunk record header: magic, chunk index, value count, box origin (z, y, x), box shape
#: (z, y, x), payload bit length, sync point count, outlier count, verbatim count, fill count,
#: flags.
CHUNK_HEADER = struct.Struct("<4sII3I3IQIIIII")
#: The payload holds the chunk's values as raw little-endian IEEE words, because coding them
#: would have taken more bits (bounds below the data's precision). The host decides this.
CHUNK_STORED = 0x01
CHUNK_CRC = struct.Struct("<I")
#: Index: magic, chunk count, then one u64 file offset per chunk, then CRC32 of the index.
INDEX_HEAD = struct.Struct("<4sI")
#: Trailer, the last bytes of a complete file: magic, index offset, CRC32 of the index.
TRAILER = struct.Struct("<4sQI")
