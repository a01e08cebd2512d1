"""Compiled (numba) kernels for one chunk: the fast path of `ceaz.chunk`, bit for bit.

The numpy reference (quantizer, predictor, symbols, huffman, packer) is the specification;
these kernels fuse its stages into one pass per chunk so that nothing chunk-sized is built
twice. They are hand-written rather than taken from a codec library because every bit must
equal what the RTL produces (docs/format.md): exact integer prequantization, the exact bound
check, canonical codes and MSB-first packing. tests/test_jit.py holds the two paths equal.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import format as fmt
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
_ERR_SYMBOL = 5


# --- codebooks ------------------------------------------------------------------------------


@njit(cache=True)
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


@njit(cache=True)
def _decode_table(lengths: np.ndarray) -> np.ndarray:
    """huffman.decode_table for a complete code: entry = symbol << 8 | length."""
    codes = _canonical_codes(lengths)
    table = np.empty(1 << _LUT_BITS, dtype=np.uint32)
    for s in range(lengths.shape[0]):
        ln = int(lengths[s])
        span = 1 << (_LUT_BITS - ln)
        start = int(codes[s]) << (_LUT_BITS - ln)
        entry = np.uint32((s << 8) | ln)
        for i in range(start, start + span):
            table[i] = entry
    return table


# --- encoder -------------------------------------------------------------------------------
# A chunk is encoded in blocks of at most _BLOCK values of one row: a vectorisable pass
# prequantizes the block, a second turns q into residuals and symbols, and a sequential pass
# counts and packs them. q of the current and the previous plane stay in a plane buffer.

_BLOCK = 2048
_KIND_NORMAL = 0
_KIND_VERBATIM = 1
_KIND_FILL = 2


@njit(cache=True, inline="always")
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


@njit(cache=True)
def _quantize_f32(x, xb, step, eb, cm, ce, has_fill, fill_bits, radius, t, qprev, q, sym, raw):
    _quantize_impl(
        x, xb, True, step, eb, cm, ce, has_fill, fill_bits, radius, t, qprev, q, sym, raw
    )  # fmt: skip


@njit(cache=True)
def _quantize_f64(x, xb, step, eb, cm, ce, has_fill, fill_bits, radius, t, qprev, q, sym, raw):
    _quantize_impl(
        x, xb, False, step, eb, cm, ce, has_fill, fill_bits, radius, t, qprev, q, sym, raw
    )  # fmt: skip


@njit(cache=True)
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


@njit(cache=True)
def _put(out, widx, acc, nacc, val, width):
    """Append the low `width` (1..63) bits of val MSB-first; whole words go to out."""
    total = nacc + width
    if total < 64:
        return widx, (acc << np.uint64(width)) | val, total
    spill = total - 64
    out[widx] = (acc << np.uint64(64 - nacc)) | (val >> np.uint64(spill))
    return widx + 1, val & ((_U1 << np.uint64(spill)) - _U1), spill


@njit(cache=True)
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


@njit(cache=True)
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
            w1 = e1 & _ULEN
            val = ((e0 >> _U8) << w1) | (e1 >> _U8)
            widx, acc, nacc = _put(out, widx, acc, nacc, val, np.int64((e0 & _ULEN) + w1))
        else:
            widx, acc, nacc = _put_symbol(out, widx, acc, nacc, e0, s0, raw[j], vbits)
            widx, acc, nacc = _put_symbol(out, widx, acc, nacc, e1, s1, raw[j + _U1], vbits)
    if (j1 - j0) & 1:
        j = np.uint64(j1 - 1)
        s0 = sym[j]
        hist2[s0] += 1
        widx, acc, nacc = _put_symbol(out, widx, acc, nacc, table[s0], s0, raw[j], vbits)
    return widx, acc, nacc


@njit(cache=True)
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


@njit(cache=True, inline="always")
def _encode_impl(
    x, xb, nz, ny, nx, is32, step, eb, cm, ce, has_fill, fill_bits,
    radius, table, sync_k, out, sync, hist,
):  # fmt: skip
    """Prequantize, predict, map, count and pack one chunk, block by block.

    Returns the payload length in bits; out receives native-endian 64-bit words.
    """
    nsym = 2 * radius + 2
    planes = np.zeros((2, ny + 1, nx + 1), dtype=np.int32)  # q, zero first row and column
    blk = min(nx, _BLOCK)
    t = np.empty(blk, dtype=np.int64)
    sym = np.empty(blk, dtype=np.uint16)
    raw = np.empty(blk, dtype=np.uint64)
    hist2 = np.zeros(2 * nsym, dtype=np.int64)
    acc = _U0
    nacc = 0
    widx = 0
    next_sync = sync_k
    nsync = 0
    i = 0
    for z in range(nz):
        c = z & 1
        for y in range(ny):
            cur = planes[c, y + 1]
            up = planes[c, y]
            back = planes[1 - c, y + 1]
            bu = planes[1 - c, y]
            for x0 in range(0, nx, blk):
                x1 = min(nx, x0 + blk)
                m = x1 - x0
                xbb = xb[i : i + m]
                _context_block(up, back, bu, y > 0, z > 0, x0, x1, t)
                qcur = cur[x0 + 1 : x1 + 1]
                if is32:
                    _quantize_f32(
                        x[i : i + m], xbb, step, eb, cm, ce, has_fill, fill_bits, radius, t,
                        cur[x0], qcur, sym, raw,
                    )  # fmt: skip
                else:
                    _quantize_f64(
                        x[i : i + m], xbb, step, eb, cm, ce, has_fill, fill_bits, radius, t,
                        cur[x0], qcur, sym, raw,
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


@njit(cache=True)
def _encode_f32(
    x, xb, nz, ny, nx, step, eb, cm, ce, has_fill, fill_bits,
    radius, table, sync_k, out, sync, hist,
):  # fmt: skip
    """_encode_impl with the float32 prequantizer compiled in."""
    return _encode_impl(
        x, xb, nz, ny, nx, True, step, eb, cm, ce, has_fill, fill_bits,
        radius, table, sync_k, out, sync, hist,
    )  # fmt: skip


@njit(cache=True)
def _encode_f64(
    x, xb, nz, ny, nx, step, eb, cm, ce, has_fill, fill_bits,
    radius, table, sync_k, out, sync, hist,
):  # fmt: skip
    """_encode_impl with the float64 prequantizer compiled in."""
    return _encode_impl(
        x, xb, nz, ny, nx, False, step, eb, cm, ce, has_fill, fill_bits,
        radius, table, sync_k, out, sync, hist,
    )  # fmt: skip


def encode_chunk(values: np.ndarray, box: Box, coding: Coding, lengths: np.ndarray) -> EncodedChunk:
    """chunk.encode_chunk(..., use_jit=False), compiled: the same EncodedChunk, byte for byte."""
    qp = coding.qp
    if values.dtype != qp.dtype:
        raise TypeError(f"expected {qp.dtype}, got {values.dtype!r}")
    r = int(coding.radius)
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
    out = np.empty(n * (fmt.MAX_CODE_LEN + vbits) // 64 + 2, dtype=np.uint64)
    sync = np.empty(max(0, (n - 1) // k), dtype=np.uint32)
    hist = np.zeros(fmt.n_symbols(r), dtype=np.int64)
    table = (_canonical_codes(lengths).astype(np.uint64) << _U8) | lengths
    table[[fmt.SYM_OUTLIER, fmt.sym_verbatim(r)]] |= _UESC
    kernel = _encode_f32 if is32 else _encode_f64
    bits = kernel(
        x, xb, nz, ny, nx, float(qp.step), float(qp.eb_f),
        _U64(qp.recip_mant), int(qp.recip_exp), qp.fill_bits is not None,
        _U64(qp.fill_bits or 0), r, table, k, out, sync, hist,
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
# a marker for an escape; verbatim bits go straight to the output. The second pass integrates
# the residuals row by row (predictor.reconstruct's recurrence) and reconstructs the values.

#: Bits of the first-level table that resolves short codes (8 KiB, stays in L1).
_SMALL_BITS = 11
_MARK_VERBATIM = 1 << 30  # residuals are in [-2**30, 2**30), markers above
_MARK_FILL = (1 << 30) + 1
# A decoding-table entry: residual << 8 | class << 5 | code length.
_CLS_OUTLIER = 1
_CLS_VERBATIM = 2
_CLS_FILL = 3
#: Steps between overrun checks: a step reads at most 80 bits, the words carry this margin.
_CHECK_EVERY = 8
_PAD_WORDS = _CHECK_EVERY * 2 + 4


@njit(cache=True)
def _decode_tables(lengths: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """huffman.decode_table (2**16 entries) with each symbol's residual and class folded in,
    plus a 2**_SMALL_BITS first-level table whose entries are 0 for longer codes."""
    codes = _canonical_codes(lengths)
    big = np.empty(1 << _LUT_BITS, dtype=np.int32)
    small = np.zeros(1 << _SMALL_BITS, dtype=np.int32)
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
    return big, small


@njit(cache=True)
def _peek(words, pos):
    """The 64 bits from bit pos on, MSB-first."""
    w = np.uint64(pos >> 6)
    off = np.uint64(pos & 63)
    return (words[w] << off) | ((words[w + _U1] >> _U1) >> (np.uint64(63) - off))


@njit(cache=True)
def _decode_step(words, big, small, pos, buf, avail, dq, i, outb, vbits):
    """Decode value i from the bit buffer (buf = the next bits at pos, avail >= 16 of them)."""
    e = small[buf >> np.uint64(64 - _SMALL_BITS)]
    if (e & 31) == 0:
        e = big[buf >> np.uint64(64 - _LUT_BITS)]
    ln = e & 31
    pos += ln
    buf <<= np.uint64(ln)
    avail -= ln
    if (e & 0x60) == 0:
        dq[i] = e >> 8
    else:
        cls = (e >> 5) & 3
        if cls == _CLS_OUTLIER:
            d = np.int64(_peek(words, pos) >> np.uint64(64 - _OUT_BITS))
            dq[i] = d - ((d >> (_OUT_BITS - 1)) << _OUT_BITS)
            pos += _OUT_BITS
        elif cls == _CLS_VERBATIM:
            outb[i] = _peek(words, pos) >> np.uint64(64 - vbits)
            dq[i] = _MARK_VERBATIM
            pos += vbits
        else:
            dq[i] = _MARK_FILL
        avail = 0
    if avail < _LUT_BITS:
        buf = _peek(words, pos)
        avail = 64
    return pos, buf, avail


@njit(cache=True)
def _decode_symbols(words, bits, starts, sync_k, n, big, small, dq, outb, vbits):
    """Entropy-decode a chunk into dq; returns (status, segment, bit position).

    starts[j] is where segment j begins, starts[-1] == bits; they increase strictly (checked
    by the caller), so every read stays within the padded words while positions are checked
    every _CHECK_EVERY steps.
    """
    nseg = starts.shape[0] - 1
    nfull = nseg - 1 if n % sync_k else nseg  # segments holding exactly sync_k values
    g = 0
    while g + 4 <= nfull:
        p0, p1, p2, p3 = starts[g], starts[g + 1], starts[g + 2], starts[g + 3]
        b0, b1, b2, b3 = _peek(words, p0), _peek(words, p1), _peek(words, p2), _peek(words, p3)
        a0 = a1 = a2 = a3 = 64
        i0 = g * sync_k
        for t in range(sync_k):
            p0, b0, a0 = _decode_step(words, big, small, p0, b0, a0, dq, i0 + t, outb, vbits)
            p1, b1, a1 = _decode_step(
                words, big, small, p1, b1, a1, dq, i0 + sync_k + t, outb, vbits
            )
            p2, b2, a2 = _decode_step(
                words, big, small, p2, b2, a2, dq, i0 + 2 * sync_k + t, outb, vbits
            )
            p3, b3, a3 = _decode_step(
                words, big, small, p3, b3, a3, dq, i0 + 3 * sync_k + t, outb, vbits
            )
            if t % _CHECK_EVERY == 0 and max(max(p0, p1), max(p2, p3)) > bits:
                return _ERR_OVERRUN, g, max(max(p0, p1), max(p2, p3))
        for lane, p in enumerate((p0, p1, p2, p3)):
            if p != starts[g + lane + 1]:
                return _ERR_SEGMENT, g + lane, p
        g += 4
    while g < nseg:
        p = starts[g]
        b = _peek(words, p)
        a = 64
        i0 = g * sync_k
        for t in range(min(sync_k, n - i0)):
            p, b, a = _decode_step(words, big, small, p, b, a, dq, i0 + t, outb, vbits)
            if t % _CHECK_EVERY == 0 and p > bits:
                return _ERR_OVERRUN, g, p
        if p != starts[g + 1]:
            return _ERR_SEGMENT, g, p
        g += 1
    return 0, 0, 0


@njit(cache=True)
def _reconstruct(dq, nz, ny, nx, step, has_fill, fill_bits, out, outb):
    """q = residual + Lorenzo prediction in box order (q = 0 at escapes), then x = q * S.

    Returns (status, value index): a fill marker without a fill value, or |q| >= Q_LIMIT.
    """
    planes = np.zeros((2, ny + 1, nx + 1), dtype=np.int32)
    t = np.empty(nx, dtype=np.int64)
    i = 0
    for z in range(nz):
        c = z & 1
        for y in range(ny):
            cur = planes[c, y + 1]
            _context_block(planes[c, y], planes[1 - c, y + 1], planes[1 - c, y], y > 0, z > 0,
                           0, nx, t)  # fmt: skip
            qprev = 0
            for xx in range(nx):
                d = np.int64(dq[i])
                if d < _MARK_VERBATIM:
                    q = d + t[xx] + qprev
                    if not -_Q_LIMIT < q < _Q_LIMIT:
                        return _ERR_QRANGE, i
                    out[i] = np.float64(q) * step
                else:
                    q = 0
                    if d == _MARK_FILL:
                        if not has_fill:
                            return _ERR_FILL, i
                        outb[i] = fill_bits
                cur[xx + 1] = q
                qprev = q
                i += 1
    return 0, 0


def decode_chunk(c: ChunkPayload, coding: Coding) -> np.ndarray:
    """chunk.decode_chunks([c], coding, use_jit=False)[0], compiled: same values, same errors."""
    box = c.box
    where = f"chunk {box.index}"
    qp = coding.qp
    r = int(coding.radius)
    n = box.size
    k = int(coding.sync_interval)
    lengths = np.asarray(c.lengths, dtype=np.uint8)
    if lengths.shape != (fmt.n_symbols(r),) or not _is_complete(lengths):
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
    out = np.empty(n, dtype=qp.dtype)
    outb = out.view(np.uint32 if qp.dtype.itemsize == 4 else np.uint64)
    big, small = _decode_tables(lengths, r)
    dq = np.empty(n, dtype=np.int32)
    status, at, pos = _decode_symbols(words, bits, starts, k, n, big, small, dq, outb, vbits)
    if status == 0:
        status, at = _reconstruct(
            dq, *box.shape, float(qp.step), qp.fill_bits is not None, _U64(qp.fill_bits or 0),
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
    if status != 0:
        raise CorruptStreamError(f"{where}: symbol outside the alphabet at value {at}")
    return out.reshape(box.shape)


def _is_complete(lengths: np.ndarray) -> bool:
    """huffman.is_complete: lengths in 1..16 with Kraft sum exactly 1."""
    ln = lengths.astype(np.int64)
    if len(ln) < 2 or ln.min() < 1 or ln.max() > fmt.MAX_CODE_LEN:
        return False
    return int(np.sum(np.left_shift(1, fmt.MAX_CODE_LEN - ln))) == 1 << fmt.MAX_CODE_LEN
