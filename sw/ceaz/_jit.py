"""Compiled (numba) kernels for one chunk: the fast path of `ceaz.chunk`, bit for bit.

The numpy reference (quantizer, predictor, symbols, huffman, packer) is the specification;
these kernels fuse its stages so that a chunk is read once and nothing chunk-sized is built
in between. They are hand-written rather than taken from a codec library because every bit
must equal what the RTL produces (docs/format.md): exact integer prequantization, the exact
bound check, canonical codes and MSB-first packing. tests/test_jit.py holds the paths equal.

Numba notes that shaped the code: int64 mixed with uint64 becomes float64, so unsigned
constants are typed; a signed index costs a wraparound test, so hot loops index with
unsigned or provably non-negative values; and a helper taking arrays is a real call (or,
inlined by numba, a reference-count pair), so per-value steps are written out in the loops.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from . import format as fmt
from . import huffman, symbols
from .chunk import ChunkPayload, Coding, EncodedChunk
from .errors import CorruptStreamError
from .tiling import Box

_U64 = np.uint64
_Q_LIMIT = fmt.Q_LIMIT
_OUT_BITS = fmt.OUTLIER_BITS
_LUT_BITS = fmt.MAX_CODE_LEN
# numba unifies int64 with uint64 to float64, so every unsigned constant is typed explicitly.
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U23 = np.uint64(23)
_U31 = np.uint64(31)
_U32 = np.uint64(32)
_UFF = np.uint64(0xFF)
_UFRAC = np.uint64(0x7FFFFF)
_UHIDDEN = np.uint64(0x800000)
_UMASK31 = np.uint64((1 << fmt.OUTLIER_BITS) - 1)
_UMASK32 = np.uint64(0xFFFFFFFF)
_U8 = np.uint64(8)
_ULEN = np.uint64(0x1F)
#: Flag in a code-table entry (code << 8 | flag | length): a raw field follows the code.
_UESC = np.uint64(0x80)

# Decoder status codes (0 = fine); the Python wrapper turns them into CorruptStreamError.
_ERR_SEGMENT = 1
_ERR_OVERRUN = 2
_ERR_QRANGE = 3
_ERR_FILL = 4


# --- scratch memory -------------------------------------------------------------------------
# Fresh pages cost a page fault each on first touch, which costs as much as coding them, so
# per-chunk working arrays come from buffers kept per thread and reused (up to a size).

_SCRATCH_MAX_BYTES = 1 << 26
_scratch_local = threading.local()


def _scratch(name: str, size: int, dtype: type) -> np.ndarray:
    """A reusable uninitialised 1-D array of size elements (fresh when too large to keep)."""
    nbytes = size * np.dtype(dtype).itemsize
    if nbytes > _SCRATCH_MAX_BYTES:
        return np.empty(size, dtype=dtype)
    pool = _scratch_local.__dict__.setdefault("pool", {})
    buf = pool.get(name)
    if buf is None or buf.size < size:
        buf = pool[name] = np.empty(size, dtype=dtype)
    return buf[:size]


_HUGE_PAGE = 1 << 21


def _output(n: int, dtype: np.dtype) -> np.ndarray:
    """A fresh output array. A big one starts on a 2 MiB boundary, so that numpy's huge-page
    advice (for allocations of 4 MiB and more) gives it whole huge pages: a page fault per
    2 MiB rather than per 4 KiB, which here saves about a tenth of the decoding time."""
    nbytes = n * dtype.itemsize
    if nbytes < 2 * _HUGE_PAGE:
        return np.empty(n, dtype=dtype)
    base = np.empty(nbytes + _HUGE_PAGE, dtype=np.uint8)
    start = -base.ctypes.data % _HUGE_PAGE
    return base[start : start + nbytes].view(dtype)


def _planes(nz: int, ny: int, nx: int) -> np.ndarray:
    """q of the current and previous plane with a zero column 0 (the kernels write the rest
    before reading it); one plane suffices for a 1-D or 2-D box."""
    shape = (1 if nz == 1 else 2, ny + 1, nx + 1)
    planes = _scratch("planes", int(np.prod(shape)), np.int32).reshape(shape)
    planes[:, :, 0] = 0
    return planes


# --- codebooks ------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _canonical_codes(lengths: np.ndarray) -> np.ndarray:
    """huffman.canonical_codes: codes in (length, symbol) order, by a counting sort."""
    n = lengths.shape[0]
    codes = np.zeros(n, dtype=np.uint32)
    lo = 255
    hi = 0
    for s in range(n):
        ln = int(lengths[s])
        lo = min(lo, ln)
        hi = max(hi, ln)
    code = 0
    prev = lo
    for ln in range(lo, hi + 1):
        for s in range(n):
            if int(lengths[s]) == ln:
                code <<= ln - prev
                codes[s] = np.uint32(code & 0xFFFFFFFF)
                code += 1
                prev = ln
    return codes


# --- encoder -------------------------------------------------------------------------------
# A chunk is encoded in blocks of at most _BLOCK values (a piece of a long row, or whole
# short rows). Per row of a block, two loops that LLVM vectorises gather the Lorenzo terms of
# the rows above and behind, then prequantize, predict and map to symbols; a sequential pass
# then counts and packs the block's symbols. q of the current and the previous plane stay in
# a plane buffer whose column 0 holds the zeros left of the box.

_BLOCK = 2048


@njit(cache=True, nogil=True, inline="always")
def _quantize_impl(
    x, xb, is32, step, eb, cm, ce, has_fill, fill_bits, radius, t, qprev, q, sym, raw
):  # fmt: skip
    """quantizer.prequantize, the residual and symbols.encode on one block, branch-free so
    that LLVM vectorises it (q[j-1] is a first-order recurrence; t holds the other rows)."""
    for j in range(x.shape[0]):
        b = np.uint64(xb[j])
        v = np.float64(x[j])
        if is32:
            e = np.int64((b >> _U23) & _UFF)
            frac = b & _UFRAC
            sub = e == 0
            mx = frac if sub else frac | _UHIDDEN
            ex = -149 if sub else e - 150
            sh = -(ex + ce)
            shc = np.uint64(min(max(sh, 1), 63))
            prod = mx * cm
            # RNE(prod / 2**shc) = floor, + 1 if rem > half or (rem == half and floor odd):
            # adding half - 1 + (floor & 1) before the shift does exactly that.
            bias = (_U1 << (shc - _U1)) - _U1 + ((prod >> shc) & _U1)
            mag = (prod + bias) >> shc
            too_large = (e == 255) | ((sh <= 0) & (mx != _U0)) | (mag >= np.uint64(_Q_LIMIT))
            qm = np.int64(mag)
            qv = -qm if (b >> _U31) != _U0 else qm
            qv = 0 if too_large else qv
            xr = np.float64(np.float32(np.float64(qv) * step))
        else:
            qf = np.rint(v / step)
            too_large = not abs(qf) < _Q_LIMIT
            qv = 0 if too_large else np.int64(qf)
            xr = np.float64(qv) * step
        # quantizer.within_bound: TwoSum of v - xr, a tie |d| == eb decided by the error sign
        nb = -xr
        s = v + nb
        bv = s - v
        err = (v - (s - bv)) + (nb - bv)
        mag_s = abs(s)
        # sign(s) * err <= 0; at s == 0 the sum is exact, err == 0 and the test holds
        tie_ok = np.copysign(1.0, s) * err <= 0.0
        ok = (not too_large) & ((mag_s < eb) | ((mag_s == eb) & tie_ok))
        fill = has_fill & (b == fill_bits)
        normal = ok & (not fill)
        qv = qv if normal else 0
        q[j] = qv
        d = qv - qprev - t[j]
        qprev = qv
        inband = -radius < d < radius
        sd = d + radius if inband else fmt.SYM_OUTLIER
        sym[j] = sd if normal else (2 * radius + 1 if fill else 2 * radius)
        # the raw field: delta's low 31 bits for an outlier, the value's bits if verbatim
        raw[j] = (np.uint64(d) & _UMASK31) if normal else b


@njit(cache=True, nogil=True, inline="always")
def _quantize_rows(
    x, xb, is32, step, eb, cm, ce, has_fill, fill_bits, radius, planes, c, o, has_back,
    y0, y1, x0, x1, t, sym, raw,
):  # fmt: skip
    """_context_block then _quantize_impl, row after row (a row's context needs the row
    above), on columns x0..x1-1 of rows y0..y1-1 of plane buffer c (the previous: o)."""
    w = x1 - x0
    for r in range(y1 - y0):
        y = y0 + r
        cur = planes[c, y + 1]
        a = r * w
        _context_block(
            planes[c, y], planes[o, y + 1], planes[o, y], y > 0, has_back, x0, x1, t[a : a + w]
        )
        _quantize_impl(
            x[a : a + w], xb[a : a + w], is32, step, eb, cm, ce, has_fill, fill_bits, radius,
            t[a : a + w], cur[x0], cur[x0 + 1 : x1 + 1], sym[a : a + w], raw[a : a + w],
        )  # fmt: skip


@njit(cache=True, nogil=True)
def _quantize_f32(
    x, xb, step, eb, cm, ce, has_fill, fill_bits, radius, planes, c, o, has_back,
    y0, y1, x0, x1, t, sym, raw,
):  # fmt: skip
    """_quantize_rows with the float32 prequantizer compiled in (is32 a constant)."""
    _quantize_rows(
        x, xb, True, step, eb, cm, ce, has_fill, fill_bits, radius, planes, c, o, has_back,
        y0, y1, x0, x1, t, sym, raw,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _quantize_f64(
    x, xb, step, eb, cm, ce, has_fill, fill_bits, radius, planes, c, o, has_back,
    y0, y1, x0, x1, t, sym, raw,
):  # fmt: skip
    """_quantize_rows with the float64 prequantizer compiled in."""
    _quantize_rows(
        x, xb, False, step, eb, cm, ce, has_fill, fill_bits, radius, planes, c, o, has_back,
        y0, y1, x0, x1, t, sym, raw,
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _context_block(up, back, bu, has_up, has_back, x0, x1, t):
    """The Lorenzo terms from the row above and the plane behind: delta = q - q[x-1] - t.

    Rows carry a zero first column; rows outside the box are not read, so that 1-D and 2-D
    chunks cost no extra memory traffic.
    """
    # Indices j, j + 1 from range(m) are provably >= 0, so numba emits no wraparound code.
    m = x1 - x0
    u = up[x0 : x1 + 1]
    k = back[x0 : x1 + 1]
    ku = bu[x0 : x1 + 1]
    if has_up and has_back:
        for j in range(m):
            t[j] = np.int64(u[j + 1]) - u[j] + k[j + 1] - k[j] - ku[j + 1] + ku[j]
    elif has_up:
        for j in range(m):
            t[j] = np.int64(u[j + 1]) - u[j]
    elif has_back:
        for j in range(m):
            t[j] = np.int64(k[j + 1]) - k[j]
    else:
        t[:m] = 0


@njit(cache=True, nogil=True)
def _put(out, widx, acc, nacc, val, width):
    """Append the low `width` (1..63) bits of val MSB-first; whole words go to out."""
    total = nacc + width
    if total < 64:
        return widx, (acc << np.uint64(width)) | val, total
    spill = total - 64
    out[widx] = (acc << np.uint64(64 - nacc)) | (val >> np.uint64(spill))
    return widx + 1, val & ((_U1 << np.uint64(spill)) - _U1), spill


@njit(cache=True, nogil=True)
def _put_symbol(out, widx, acc, nacc, ent, s, raw, vbits):
    """Pack one symbol's code and raw field on its own (the path for escapes)."""
    code = ent >> _U8
    ln = np.int64(ent & _ULEN)
    if (ent & _UESC) == _U0:
        return _put(out, widx, acc, nacc, code, ln)
    if s == fmt.SYM_OUTLIER:
        return _put(out, widx, acc, nacc, (code << _U31) | raw, ln + _OUT_BITS)
    if vbits == 32:
        return _put(out, widx, acc, nacc, (code << _U32) | raw, ln + 32)
    widx, acc, nacc = _put(out, widx, acc, nacc, (code << _U32) | (raw >> _U32), ln + 32)
    return _put(out, widx, acc, nacc, raw & _UMASK32, 32)


@njit(cache=True, nogil=True)
def _pack_run(j0, j1, sym, raw, table, vbits, out, widx, acc, nacc, hist2, nsym):
    """Count and pack symbols j0..j1-1 two at a time; escapes take the slow path.

    table[s] = code << 8 | escape flag | length. Indices are unsigned so that numba emits no
    wraparound code; the two histograms keep runs of one symbol off a single counter.
    """
    for k in range((j1 - j0) >> 1):
        j = np.uint64(j0 + 2 * k)
        s0 = sym[j]
        s1 = sym[j + _U1]
        e0 = table[s0]
        e1 = table[s1]
        hist2[s0] += 1
        hist2[np.uint64(nsym) + s1] += 1
        if ((e0 | e1) & _UESC) == _U0:
            # _put, written out: a call per pair would cost as much as the work
            w1 = e1 & _ULEN
            val = ((e0 >> _U8) << w1) | (e1 >> _U8)
            total = nacc + np.int64((e0 & _ULEN) + w1)
            if total < 64:
                acc = (acc << np.uint64(total - nacc)) | val
            else:
                spill = np.uint64(total - 64)
                out[widx] = (acc << np.uint64(64 - nacc)) | (val >> spill)
                widx += 1
                acc = val & ((_U1 << spill) - _U1)
                total -= 64
            nacc = total
        else:
            widx, acc, nacc = _put_symbol(out, widx, acc, nacc, e0, s0, raw[j], vbits)
            widx, acc, nacc = _put_symbol(out, widx, acc, nacc, e1, s1, raw[j + _U1], vbits)
    if (j1 - j0) & 1:
        j = np.uint64(j1 - 1)
        s0 = sym[j]
        hist2[s0] += 1
        widx, acc, nacc = _put_symbol(out, widx, acc, nacc, table[s0], s0, raw[j], vbits)
    return widx, acc, nacc


@njit(cache=True, nogil=True)
def _pack_block(
    m, i, sym, raw, table, vbits, out, widx, acc, nacc, sync, nsync, next_sync, sync_k, hist2,
):  # fmt: skip
    """Pack a block (values i..i+m-1 of the chunk), noting the bit offset of every K-th."""
    nsym = hist2.shape[0] // 2
    j = 0
    while j < m:
        j1 = min(m, next_sync - i)
        if j1 == j:
            sync[nsync] = widx * 64 + nacc
            nsync += 1
            next_sync += sync_k
            continue
        widx, acc, nacc = _pack_run(
            j, j1, sym, raw, table, vbits, out, widx, acc, nacc, hist2, nsym
        )
        j = j1
    return widx, acc, nacc, nsync, next_sync


@njit(cache=True, nogil=True, inline="always")
def _encode_impl(
    x, xb, nz, ny, nx, is32, step, eb, cm, ce, has_fill, fill_bits,
    radius, table, sync_k, planes, out, sync, hist,
):  # fmt: skip
    """Prequantize, predict, map, count and pack one chunk, block by block.

    A block is a piece of a row longer than _BLOCK, or as many whole rows as fit _BLOCK, so
    that short rows do not pay a call per row. Returns the payload length in bits; out
    receives native-endian 64-bit words. planes holds (1 if nz == 1 else 2, ny + 1, nx + 1)
    int32 with column 0 zero; the rest is scratch.
    """
    nsym = 2 * radius + 2
    npl = planes.shape[0]
    blk = min(nx, _BLOCK)
    rows = max(1, _BLOCK // nx)
    t = np.empty(_BLOCK, dtype=np.int64)
    sym = np.empty(_BLOCK, dtype=np.uint16)
    raw = np.empty(_BLOCK, dtype=np.uint64)
    hist2 = np.zeros(2 * nsym, dtype=np.int64)
    acc = _U0
    nacc = 0
    widx = 0
    next_sync = sync_k
    nsync = 0
    i = 0
    for z in range(nz):
        c = z % npl
        o = (z + 1) % npl  # the previous plane (not read while z == 0)
        for y0 in range(0, ny, rows):
            y1 = min(ny, y0 + rows)
            for x0 in range(0, nx, blk):
                x1 = min(nx, x0 + blk)
                m = (y1 - y0) * (x1 - x0)
                xbb = xb[i : i + m]
                if is32:
                    _quantize_f32(
                        x[i : i + m], xbb, step, eb, cm, ce, has_fill, fill_bits, radius,
                        planes, c, o, z > 0, y0, y1, x0, x1, t, sym, raw,
                    )  # fmt: skip
                else:
                    _quantize_f64(
                        x[i : i + m], xbb, step, eb, cm, ce, has_fill, fill_bits, radius,
                        planes, c, o, z > 0, y0, y1, x0, x1, t, sym, raw,
                    )  # fmt: skip
                widx, acc, nacc, nsync, next_sync = _pack_block(
                    m, i, sym, raw, table, 32 if is32 else 64, out, widx, acc, nacc,
                    sync, nsync, next_sync, sync_k, hist2,
                )  # fmt: skip
                i += m
    bits = widx * 64 + nacc
    if nacc > 0:
        out[widx] = acc << np.uint64(64 - nacc)
    for s in range(nsym):
        hist[s] = hist2[s] + hist2[nsym + s]
    return bits


@njit(cache=True, nogil=True)
def _encode_f32(
    x, xb, nz, ny, nx, step, eb, cm, ce, has_fill, fill_bits,
    radius, table, sync_k, planes, out, sync, hist,
):  # fmt: skip
    """_encode_impl with the float32 prequantizer compiled in."""
    return _encode_impl(
        x, xb, nz, ny, nx, True, step, eb, cm, ce, has_fill, fill_bits,
        radius, table, sync_k, planes, out, sync, hist,
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _encode_f64(
    x, xb, nz, ny, nx, step, eb, cm, ce, has_fill, fill_bits,
    radius, table, sync_k, planes, out, sync, hist,
):  # fmt: skip
    """_encode_impl with the float64 prequantizer compiled in."""
    return _encode_impl(
        x, xb, nz, ny, nx, False, step, eb, cm, ce, has_fill, fill_bits,
        radius, table, sync_k, planes, out, sync, hist,
    )  # fmt: skip


def encode_chunk(values: np.ndarray, box: Box, coding: Coding, lengths: np.ndarray) -> EncodedChunk:
    """chunk.encode_chunk(..., use_jit=False), compiled: the same EncodedChunk, byte for byte."""
    qp = coding.qp
    if values.dtype != qp.dtype:
        raise TypeError(f"expected {qp.dtype}, got {values.dtype!r}")
    if values.shape != box.shape:
        raise ValueError(f"chunk values have shape {values.shape!r}, box is {box.shape!r}")
    r = symbols.check_radius(coding.radius)
    lengths = np.asarray(lengths, dtype=np.uint8)
    if lengths.shape != (fmt.n_symbols(r),) or not (
        lengths.min() >= 1 and lengths.max() <= fmt.MAX_CODE_LEN
    ):
        raise ValueError(f"need {fmt.n_symbols(r)} code lengths in [1, {fmt.MAX_CODE_LEN}]")
    x = np.ascontiguousarray(values).reshape(-1)
    is32 = x.dtype.itemsize == 4
    xb = x.view(np.uint32 if is32 else np.uint64)
    n = x.size
    k = int(coding.sync_interval)
    nz, ny, nx = box.shape
    vbits = 32 if is32 else 64
    out = _scratch("enc_out", n * (fmt.MAX_CODE_LEN + vbits) // 64 + 2, np.uint64)
    planes = _planes(nz, ny, nx)
    sync = np.empty(max(0, (n - 1) // k), dtype=np.uint32)
    hist = np.zeros(fmt.n_symbols(r), dtype=np.int64)
    table = (_canonical_codes(lengths).astype(np.uint64) << _U8) | lengths
    table[[fmt.SYM_OUTLIER, fmt.sym_verbatim(r)]] |= _UESC
    kernel = _encode_f32 if is32 else _encode_f64
    bits = kernel(
        x, xb, nz, ny, nx, float(qp.step), float(qp.eb_f),
        _U64(qp.recip_mant), int(qp.recip_exp), qp.fill_bits is not None,
        _U64(qp.fill_bits or 0), r, table, k, planes, out, sync, hist,
    )  # fmt: skip
    payload = out[: (bits + 63) // 64].astype(">u8").tobytes()[: (bits + 7) // 8]
    return EncodedChunk(
        box=box,
        lengths=lengths,
        payload=payload,
        payload_bits=int(bits),
        sync=sync,
        hist=hist.astype(np.uint64),
        n_outlier=int(hist[fmt.SYM_OUTLIER]),
        n_verbatim=int(hist[fmt.sym_verbatim(r)]),
        n_fill=int(hist[fmt.sym_fill(r)]),
    )


# --- decoder -------------------------------------------------------------------------------
# Two passes per chunk. The entropy decoder walks four sync segments at once (four independent
# chains of table lookups keep the core busy) and leaves one int32 per value: its residual, or
# a marker for an escape, whose verbatim bits go to a side array. The second pass integrates
# the residuals row by row (predictor.reconstruct's recurrence) and reconstructs the values.

#: Bits of the first-level table that resolves short codes (8 KiB, stays in L1).
_SMALL_BITS = 11
_MARK_VERBATIM = 1 << 30  # residuals are in [-2**30, 2**30), markers above
_MARK_FILL = (1 << 30) + 1
# A decoding-table entry: residual << 8 | class << 5 | code length.
_CLS_OUTLIER = 1
_CLS_VERBATIM = 2
_CLS_FILL = 3
#: Zero words after the payload: between two position checks a lane reads at most
#: _STEPS * 80 + 128 bits past the end of a corrupt payload.
_PAD_WORDS = 8


@njit(cache=True, nogil=True)
def _decode_tables(lengths: np.ndarray, radius: int) -> np.ndarray:
    """A 2**_SMALL_BITS first-level table (entry 0: the code is longer) followed by
    huffman.decode_table's 2**16 entries, each with the symbol's residual and class folded in.
    """
    codes = _canonical_codes(lengths)
    tabs = np.zeros((1 << _SMALL_BITS) + (1 << _LUT_BITS), dtype=np.int32)
    small = tabs[: 1 << _SMALL_BITS]
    big = tabs[1 << _SMALL_BITS :]
    for s in range(lengths.shape[0]):
        ln = int(lengths[s])
        if s == fmt.SYM_OUTLIER:
            entry = (_CLS_OUTLIER << 5) | ln
        elif s < 2 * radius:
            entry = ((s - radius) << 8) | ln
        elif s == 2 * radius:
            entry = (_CLS_VERBATIM << 5) | ln
        else:
            entry = (_CLS_FILL << 5) | ln
        start = int(codes[s]) << (_LUT_BITS - ln)
        big[start : start + (1 << (_LUT_BITS - ln))] = entry
        if ln <= _SMALL_BITS:
            start = int(codes[s]) << (_SMALL_BITS - ln)
            small[start : start + (1 << (_SMALL_BITS - ln))] = entry
    return tabs


@njit(cache=True, nogil=True)
def _peek(words, pos):
    """The 64 bits from bit pos on, MSB-first."""
    w = np.uint64(pos >> 6)
    off = np.uint64(pos & 63)
    return (words[w] << off) | ((words[w + _U1] >> _U1) >> (np.uint64(63) - off))


# One step of a lane, written out in _decode_symbols for each lane (a call per value would
# cost more than the work), with p = bit position and b = the next 64 bits from p on:
#     e = tabs[b >> _SH_SMALL]                                 first level, short codes
#     if (e & 31) == 0: e = tabs[_BIG + (b >> _SH_BIG)]         the 2**16 table
#     ln = e & 31; p += ln; b <<= ln
#     if e & 0x60: p, v, b = _decode_escape(...)                escapes: raw field, refill
#     else: v = e >> 8                                          in-band: the residual
#     dq[i] = v
# A code has at most 16 bits, so a full b serves _STEPS steps (>= 16 bits left for the
# last lookup) before a refill b = peek(p).
_STEPS = 3
_SH_SMALL = np.uint64(64 - _SMALL_BITS)
_SH_BIG = np.uint64(64 - _LUT_BITS)
_BIG = np.uint64(1 << _SMALL_BITS)


@njit(cache=True, nogil=True)
def _decode_escape(words, pos, entry, vraw, i, vbits):
    """Read an escape's raw field: the new position, the value for dq and the refilled bits."""
    cls = (entry >> 5) & 3
    if cls == _CLS_OUTLIER:
        d = np.int64(_peek(words, pos) >> np.uint64(64 - _OUT_BITS))
        pos += _OUT_BITS
        v = d - ((d >> (_OUT_BITS - 1)) << _OUT_BITS)
    elif cls == _CLS_VERBATIM:
        vraw[i] = _peek(words, pos) >> np.uint64(64 - vbits)
        pos += vbits
        v = _MARK_VERBATIM
    else:
        v = _MARK_FILL
    return pos, v, _peek(words, pos)


@njit(cache=True, nogil=True)
def _decode_symbols(words, bits, starts, sync_k, n, tabs, dq, vraw, vbits):
    """Entropy-decode a chunk into dq; returns (status, segment, bit position).

    tabs is the first-level table followed by the 2**16 one. starts[j] is where segment j
    begins and starts[-1] == bits; they increase strictly (checked by the caller), so reads
    stay within the padded words while positions are checked every _STEPS steps.
    """
    nseg = starts.shape[0] - 1
    nfull = nseg - 1 if n % sync_k else nseg  # segments holding exactly sync_k values
    g = 0
    while g + 4 <= nfull:
        p0, p1, p2, p3 = starts[g], starts[g + 1], starts[g + 2], starts[g + 3]
        i0 = np.uint64(g * sync_k)
        i1 = i0 + np.uint64(sync_k)
        i2 = i1 + np.uint64(sync_k)
        i3 = i2 + np.uint64(sync_k)
        for t0 in range(0, sync_k, _STEPS):
            b0, b1, b2, b3 = _peek(words, p0), _peek(words, p1), _peek(words, p2), _peek(words, p3)
            for t in range(t0, min(t0 + _STEPS, sync_k)):
                ut = np.uint64(t)
                e0 = tabs[b0 >> _SH_SMALL]
                e1 = tabs[b1 >> _SH_SMALL]
                e2 = tabs[b2 >> _SH_SMALL]
                e3 = tabs[b3 >> _SH_SMALL]
                if (e0 & 31) == 0:
                    e0 = tabs[_BIG + (b0 >> _SH_BIG)]
                if (e1 & 31) == 0:
                    e1 = tabs[_BIG + (b1 >> _SH_BIG)]
                if (e2 & 31) == 0:
                    e2 = tabs[_BIG + (b2 >> _SH_BIG)]
                if (e3 & 31) == 0:
                    e3 = tabs[_BIG + (b3 >> _SH_BIG)]
                ln0, ln1, ln2, ln3 = e0 & 31, e1 & 31, e2 & 31, e3 & 31
                p0 += ln0
                p1 += ln1
                p2 += ln2
                p3 += ln3
                b0 <<= np.uint64(ln0)
                b1 <<= np.uint64(ln1)
                b2 <<= np.uint64(ln2)
                b3 <<= np.uint64(ln3)
                v0, v1, v2, v3 = e0 >> 8, e1 >> 8, e2 >> 8, e3 >> 8
                if (e0 | e1 | e2 | e3) & 0x60:
                    if e0 & 0x60:
                        p0, v0, b0 = _decode_escape(words, p0, e0, vraw, i0 + ut, vbits)
                    if e1 & 0x60:
                        p1, v1, b1 = _decode_escape(words, p1, e1, vraw, i1 + ut, vbits)
                    if e2 & 0x60:
                        p2, v2, b2 = _decode_escape(words, p2, e2, vraw, i2 + ut, vbits)
                    if e3 & 0x60:
                        p3, v3, b3 = _decode_escape(words, p3, e3, vraw, i3 + ut, vbits)
                dq[i0 + ut] = v0
                dq[i1 + ut] = v1
                dq[i2 + ut] = v2
                dq[i3 + ut] = v3
            if max(max(p0, p1), max(p2, p3)) > bits:
                return _ERR_OVERRUN, g, max(max(p0, p1), max(p2, p3))
        ends = (p0, p1, p2, p3)
        for lane in range(4):
            if ends[lane] != starts[g + lane + 1]:
                return _ERR_SEGMENT, g + lane, ends[lane]
        g += 4
    while g < nseg:
        p = starts[g]
        i0 = np.uint64(g * sync_k)
        count = min(sync_k, n - g * sync_k)
        for t0 in range(0, count, _STEPS):
            b = _peek(words, p)
            for t in range(t0, min(t0 + _STEPS, count)):
                i = i0 + np.uint64(t)
                e = tabs[b >> _SH_SMALL]
                if (e & 31) == 0:
                    e = tabs[_BIG + (b >> _SH_BIG)]
                ln = e & 31
                p += ln
                b <<= np.uint64(ln)
                v = e >> 8
                if e & 0x60:
                    p, v, b = _decode_escape(words, p, e, vraw, i, vbits)
                dq[i] = v
            if p > bits:
                return _ERR_OVERRUN, g, p
        if p != starts[g + 1]:
            return _ERR_SEGMENT, g, p
        g += 1
    return 0, 0, 0


@njit(cache=True, nogil=True)
def _reconstruct(dq, vraw, nz, ny, nx, step, has_fill, fill_bits, planes, t, out, outb):
    """q = residual + Lorenzo prediction in box order (q = 0 at escapes), then x = q * S;
    escapes get their verbatim bits (from vraw) or the fill value. planes as in _encode_impl,
    t scratch of nx int64. Returns (status, value index): a fill marker without a fill value,
    or |q| >= Q_LIMIT.

    Per row: the terms from the rows above and behind plus the residuals (vectorised), the
    prefix sum along the row (the one sequential step), the conversion (vectorised). The
    loops are written inline, as calls per row would dominate short rows.
    """
    npl = planes.shape[0]
    for z in range(nz):
        c = z % npl
        o = (z + 1) % npl
        for y in range(ny):
            i = (z * ny + y) * nx
            row = dq[i : i + nx]
            cur = planes[c, y + 1]
            u = planes[c, y]
            k = planes[o, y + 1]
            ku = planes[o, y]
            nesc = 0
            if y > 0 and z > 0:
                for j in range(nx):
                    d = np.int64(row[j])
                    t[j] = d + u[j + 1] - u[j] + k[j + 1] - k[j] - ku[j + 1] + ku[j]
                    nesc += d >= _MARK_VERBATIM
            elif y > 0:
                for j in range(nx):
                    d = np.int64(row[j])
                    t[j] = d + u[j + 1] - u[j]
                    nesc += d >= _MARK_VERBATIM
            elif z > 0:
                for j in range(nx):
                    d = np.int64(row[j])
                    t[j] = d + k[j + 1] - k[j]
                    nesc += d >= _MARK_VERBATIM
            else:
                for j in range(nx):
                    d = np.int64(row[j])
                    t[j] = d
                    nesc += d >= _MARK_VERBATIM
            q = 0
            lo = 0
            hi = 0
            if nesc == 0:
                for j in range(nx):
                    q += t[j]
                    cur[j + 1] = q
                    lo = min(lo, q)
                    hi = max(hi, q)
            else:
                for j in range(nx):
                    q = t[j] + q if row[j] < _MARK_VERBATIM else 0
                    cur[j + 1] = q
                    lo = min(lo, q)
                    hi = max(hi, q)
            if lo <= -_Q_LIMIT or hi >= _Q_LIMIT:
                for j in range(nx):
                    if not -_Q_LIMIT < cur[j + 1] < _Q_LIMIT:
                        return _ERR_QRANGE, i + j
                return _ERR_QRANGE, i  # q wrapped around in int32, still out of range
            orow = out[i : i + nx]
            for j in range(nx):
                orow[j] = np.float64(cur[j + 1]) * step
            if nesc:
                for j in range(nx):
                    d = row[j]
                    if d == _MARK_VERBATIM:
                        outb[i + j] = vraw[i + j]
                    elif d == _MARK_FILL:
                        if not has_fill:
                            return _ERR_FILL, i + j
                        outb[i + j] = fill_bits
    return 0, 0


def decode_chunk(c: ChunkPayload, coding: Coding) -> np.ndarray:
    """chunk.decode_chunks([c], coding, use_jit=False)[0], compiled: same values, same errors."""
    box = c.box
    where = f"chunk {box.index}"
    qp = coding.qp
    r = symbols.check_radius(coding.radius)
    n = box.size
    k = int(coding.sync_interval)
    lengths = np.asarray(c.lengths, dtype=np.uint8)
    if lengths.shape != (fmt.n_symbols(r),) or not huffman.is_complete(lengths):
        raise CorruptStreamError(f"{where}: code-length table is not a complete code")
    sync = np.asarray(c.sync).astype(np.int64)
    if sync.shape != (max(0, -(-n // k) - 1),):
        raise CorruptStreamError(f"{where}: {len(sync)} sync points for {n} values")
    bits = int(c.payload_bits)
    vbits = fmt.VALUE_BITS[qp.dtype]
    if not 0 <= bits <= n * (fmt.MAX_CODE_LEN + vbits):
        raise CorruptStreamError(f"{where}: payload of {bits} bits cannot hold {n} values")
    starts = np.concatenate(([0], sync, [bits]))
    if not np.all(np.diff(starts) > 0):
        raise CorruptStreamError(f"{where}: sync offsets are not increasing within the payload")
    # Bits the stream does not hold read as zeros, as in the reference (packer.as_words).
    nbytes = min(len(c.payload), (bits + 7) // 8)
    buf = np.zeros(((bits + 63) // 64 + _PAD_WORDS) * 8, dtype=np.uint8)
    buf[:nbytes] = np.frombuffer(c.payload, dtype=np.uint8, count=nbytes)
    words = buf.view(">u8").astype(np.uint64)
    out = _output(n, qp.dtype)
    outb = out.view(np.uint32 if qp.dtype.itemsize == 4 else np.uint64)
    tabs = _decode_tables(lengths, r)
    dq = _scratch("dec_dq", n, np.int32)
    vraw = _scratch("dec_vraw", n, np.uint64)  # written and read at verbatim values only
    status, at, pos = _decode_symbols(words, bits, starts, k, n, tabs, dq, vraw, vbits)
    if status == 0:
        status, at = _reconstruct(
            dq, vraw, *box.shape, float(qp.step), qp.fill_bits is not None,
            _U64(qp.fill_bits or 0), _planes(*box.shape), _scratch("dec_t", box.shape[2], np.int64),
            out, outb,
        )  # fmt: skip
    if status == _ERR_SEGMENT:
        expected = int(starts[at + 1])
        raise CorruptStreamError(
            f"{where}: sync segment {at} ends at bit {pos}, expected {expected}: "
            "the payload does not decode cleanly"
        )
    if status == _ERR_OVERRUN:
        raise CorruptStreamError(
            f"{where}: sync segment {at} reads past the end of the payload ({pos} > {bits} bits)"
        )
    if status == _ERR_QRANGE:
        raise CorruptStreamError(f"{where}: a prequantized value is out of range (value {at})")
    if status == _ERR_FILL:
        raise CorruptStreamError(f"{where}: fill symbol in a stream without fill value")
    return out.reshape(box.shape)


@njit(cache=True, nogil=True)
def _finite_range(x: np.ndarray, bits: np.ndarray, fill_bits: int, has_fill: bool):
    lo, hi, n = np.inf, -np.inf, 0
    for i in range(x.size):
        v = x[i]
        if np.isfinite(v) and not (has_fill and bits[i] == fill_bits):
            lo = min(lo, v)
            hi = max(hi, v)
            n += 1
    return lo, hi, n


def finite_range(slab: np.ndarray, fill_bits: int | None) -> tuple[float, float, int]:
    """(min, max, count) of the finite, non-fill values of a flat native slab, in one pass."""
    ut = np.uint32 if slab.dtype.itemsize == 4 else np.uint64
    lo, hi, n = _finite_range(slab, slab.view(ut), ut(fill_bits or 0), fill_bits is not None)
    return float(lo), float(hi), int(n)


@njit(cache=True, nogil=True)
def _code_lengths(weights: np.ndarray, max_len: int) -> np.ndarray:
    """huffman.code_lengths, compiled: the same steps, ties and limit (docs/format.md, 7)."""
    n = weights.size
    order = np.argsort(weights, kind="mergesort")  # stable: ties by symbol
    leaf_w = weights[order]
    node_w = np.empty(n - 1, dtype=np.int64)
    parent = np.zeros(2 * n - 1, dtype=np.int64)
    i = j = nodes = 0
    for _ in range(n - 1):
        picked = np.empty(2, dtype=np.int64)
        w = 0
        for t in range(2):
            if i < n and (j >= nodes or leaf_w[i] <= node_w[j]):
                picked[t] = i
                w += leaf_w[i]
                i += 1
            else:
                picked[t] = n + j
                w += node_w[j]
                j += 1
        parent[picked[0]] = parent[picked[1]] = n + nodes
        node_w[nodes] = w
        nodes += 1
    depth = np.zeros(2 * n - 1, dtype=np.int64)
    for k in range(2 * n - 3, -1, -1):
        depth[k] = depth[parent[k]] + 1
    deepest = max(depth[:n].max(), max_len)
    count = np.zeros(deepest + 1, dtype=np.int64)
    for k in range(n):
        count[depth[k]] += 1
    for d in range(deepest, max_len, -1):
        while count[d] > 0:
            e = d - 2
            while count[e] == 0:
                e -= 1
            count[d] -= 2
            count[d - 1] += 1
            count[e + 1] += 2
            count[e] -= 1
    ranked = np.argsort(-weights, kind="mergesort")
    lengths = np.zeros(n, dtype=np.uint8)
    k = 0
    for d in range(1, max_len + 1):
        for _ in range(count[d]):
            lengths[ranked[k]] = d
            k += 1
    return lengths


def code_lengths(weights: np.ndarray, max_len: int = fmt.MAX_CODE_LEN) -> np.ndarray:
    """Compiled huffman.code_lengths (about 50x faster); the same checks, the same lengths."""
    weights = np.asarray(weights, dtype=np.uint64)
    if weights.size < 2 or (1 << max_len) < weights.size:
        raise ValueError(f"cannot code {weights.size!r} symbols with codes of {max_len!r} bits")
    if (weights == 0).any() or int(weights.max()) >= 1 << 62:
        raise ValueError("weights must be in [1, 2**62) (apply weights_from_histogram)")
    return _code_lengths(weights.astype(np.int64), max_len)
