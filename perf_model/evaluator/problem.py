"""Per design-op arrays the tiling and schedule work on (internal).

A *problem* is a flat batch of ``(design, op)`` pairs, each a single ``m x k x n`` GEMM
instance of an op (the op's ``count * batch`` instances are identical and are multiplied in at
the end). Everything is expressed in the *mapped* coordinates of the array, indexed
``r = 0`` (dimension on the array rows), ``c = 1`` (on the columns), ``s = 2`` (streamed):

    WS: (r, c, s) = (k, n, m)    OS: (m, n, k)    IS: (k, m, n)

Each operand is named by the one mapped dimension it does *not* span (its "free" dimension):
the operand spanning ``(r, c)`` is the stationary one (free ``s``), ``(s, r)`` is streamed from
the left (free ``c``), ``(s, c)`` is the third (free ``r``). With this naming the buffer words of
:func:`perf_model.timing.run_words` are the same for all dataflows (``a = ceil(t_r / R)``,
``b = ceil(t_c / C)``)::

    operand free in s:  t_r * b      operand free in c:  t_s * a      operand free in r:  t_s * b

The output ``C`` is the operand free in the reduction dimension (``k``): ``r`` for WS/IS,
``s`` for OS.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from perf_model import timing

__all__ = [
    "Problem", "build_problem", "MAPPED_GEMM", "GEMM_MAPPED", "FREE_OPERAND", "OPERAND_FREE", "BUFFER_NAMES",
    "OPERAND_NAMES", "row_index", "take_rows", "put_columns",
]

#: GEMM dimension (m 0, k 1, n 2) of the mapped dimensions (r, c, s), per dataflow code.
MAPPED_GEMM = np.array([[1, 2, 0], [0, 2, 1], [1, 0, 2]], dtype=np.int64)
#: Operand (A 0, B 1, C 2) whose free dimension is r, c, s, per dataflow code.
FREE_OPERAND = np.array([[2, 0, 1], [1, 0, 2], [2, 1, 0]], dtype=np.int64)
#: Inverse tables: mapped dim of the GEMM dims (m, k, n); free dim of the operands (A, B, C).
GEMM_MAPPED = np.argsort(MAPPED_GEMM, axis=1)
OPERAND_FREE = np.argsort(FREE_OPERAND, axis=1)
#: Buffer of each operand (A -> ifmap, B -> weight, C -> ofmap), in operand order.
BUFFER_NAMES = ("ifmap", "weight", "ofmap")
OPERAND_NAMES = ("A", "B", "C")


def row_index(table: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Flat index into a C-contiguous ``(3, N)`` array picking row ``table[code[i], j]`` as row
    ``j`` of column ``i`` (``table``: a small ``(codes, 3)`` permutation table).

    ``take_rows(values, row_index(table, code))`` equals
    ``np.take_along_axis(values, table[code].T, axis=0)``, several times faster.
    """
    n = code.shape[0]
    out = np.take(table.T * n, code, axis=1)  # several times faster than ``[:, code]``
    out += _arange(n)  # in place: one (3, N) array, not two
    return out


def _arange(n: int) -> np.ndarray:
    """``np.arange(n)``, kept for the last few sizes (every block asks for the same one)."""
    cached = _ARANGE.get(n)
    if cached is None:
        if len(_ARANGE) > 8:
            _ARANGE.clear()
        cached = _ARANGE[n] = np.arange(n)
        cached.flags.writeable = False
    return cached


_ARANGE: dict[int, np.ndarray] = {}


def take_rows(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Gather ``(3, N)`` ``values`` with a :func:`row_index` (shape of ``index``)."""
    return np.ascontiguousarray(values).reshape(-1).take(index)


def put_columns(out: np.ndarray, index: np.ndarray | slice, values: np.ndarray) -> None:
    """``out[..., index] = values`` for ``(N,)`` or ``(3, N)`` arrays, row by row (on ``(3, N)``
    arrays several times faster than one fancy assignment)."""
    if out.ndim == 1:
        out[index] = values
        return
    for row in range(out.shape[0]):
        out[row][index] = values[row]


@dataclass
class Problem:
    """Flat arrays of one batch of design-op pairs (float64 unless noted).

    Attributes:
        df: dataflow codes (int64).
        R, C: array rows and columns.
        gemm: ``(3, N)`` GEMM dims ``m, k, n`` of one instance.
        D: ``(3, N)`` mapped dims ``r, c, s``.
        cap: ``(3, N)`` buffer words available to the operand free in ``r, c, s`` (halved
            when double buffered).
        buf_cap: ``(3, N)`` words available in the ifmap, weight, ofmap buffers (halved if DB).
        operand: ``(3, N)`` int64 operand index (A 0, B 1, C 2) free in ``r, c, s``.
        elem_bytes: ``(3, N)`` bytes per element of the operand free in ``r, c, s``.
        is_out: ``(3, N)`` bool, the operand free in ``r, c, s`` is the output ``C``.
        bytes: ``(3, N)`` bytes of one instance of the operand free in ``r, c, s``.
        out_bytes: bytes of one instance of ``C`` as it leaves (``acc_bits``, or ``input_bits``
            when requantised).
        dram_scale: ``(3, N)`` DRAM bytes per buffer byte of the operand free in ``r, c, s``:
            1 for A and B (a packed int4 operand is 4 bits in DRAM, on the bus and in the buffers
            alike), and for a requantised C with packed int4 activations 1/2 of the byte lane it
            is counted at; ``bytes`` and ``elem_bytes`` count the buffers'.
        s_floor: smallest streamed tile considered, ``min(Ds, max(R, C))``.
        shadow: bool, the PEs have shadow stationary registers (``timing.fold_terms``).
        mins: ``(3, N)`` smallest tile considered: one fold in ``r`` and ``c``, ``s_floor`` in ``s``.
    """

    df: np.ndarray
    R: np.ndarray
    C: np.ndarray
    gemm: np.ndarray
    D: np.ndarray
    cap: np.ndarray
    buf_cap: np.ndarray
    operand: np.ndarray
    elem_bytes: np.ndarray
    is_out: np.ndarray
    bytes: np.ndarray
    out_bytes: np.ndarray
    s_floor: np.ndarray
    shadow: np.ndarray
    mins: np.ndarray
    dram_scale: np.ndarray

    def __len__(self) -> int:
        return int(self.df.shape[0])

    def take(self, index: np.ndarray | slice) -> Problem:
        """The elements at ``index`` (a slice or integer indices, along the last axis of every array)."""
        if isinstance(index, slice):
            return Problem(**{f.name: getattr(self, f.name)[..., index] for f in fields(self)})
        # np.take along the last axis: several times faster than ``[..., index]`` on (3, N) arrays
        return Problem(**{f.name: getattr(self, f.name).take(index, axis=-1) for f in fields(self)})


def buffer_words(
    df: np.ndarray, rows: np.ndarray, cols: np.ndarray, input_bits: np.ndarray, acc_bits: np.ndarray,
    kib: tuple[np.ndarray, np.ndarray, np.ndarray], double_buffered: np.ndarray,
    operand_bits: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``(3, n)`` words of the ifmap, weight and ofmap buffers usable by one tile.

    A buffer of ``kib`` KiB holds :func:`timing.buffer_depth_words` words; a double-buffered
    (ping-pong) buffer gives each tile half of them. ``operand_bits``: bits of an element of A and
    B in the buffers (default ``input_bits``; 4 for packed int4, ``ArrayConfig.buffer_bits``).
    """
    elems = timing.word_elems(df, rows, cols)
    a_bits, b_bits = (input_bits, input_bits) if operand_bits is None else operand_bits
    bits = (a_bits, b_bits, acc_bits)
    words = np.stack([
        np.broadcast_to(timing.buffer_depth_words(kib[i], elems[i], bits[i]), df.shape) for i in range(3)
    ]).astype(np.int64)
    return np.where(double_buffered, words // 2, words)


def build_problem(
    df: np.ndarray, rows: np.ndarray, cols: np.ndarray, input_bits: np.ndarray, acc_bits: np.ndarray,
    buf_words: np.ndarray, gemm: np.ndarray, shadow: np.ndarray | bool = False,
    out_bits: np.ndarray | None = None, dram_bits: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    operand_bits: tuple[np.ndarray, np.ndarray] | None = None,
) -> Problem:
    """Assemble a :class:`Problem` from per-element design columns and GEMM dims.

    Args:
        df, rows, cols, input_bits, acc_bits: ``(N,)`` design columns, one per element.
        buf_words: ``(3, N)`` usable words of the ifmap, weight, ofmap buffers.
        gemm: ``(3, N)`` GEMM dims ``m, k, n`` of one instance.
        shadow: ``(N,)`` (or one) ``shadow_stationary`` flag per element.
        out_bits: ``(N,)`` bits of an output element as it leaves the accelerator (default: a raw
            accumulator lane of the DRAM layout, 32 bits up to ``acc_bits`` 32, else 64;
            ``input_bits`` for a requantised op). The ofmap buffer still holds ``acc_bits`` words
            (``buf_words``).
        dram_bits: ``(N,)`` bits of an element of A, B and C in DRAM (default ``input_bits``,
            ``input_bits`` and ``out_bits``; 4 for packed int4): sets ``dram_scale``.
        operand_bits: ``(N,)`` bits of an element of A and B in the buffers (default
            ``input_bits``; 4 for packed int4, which the buffers hold two a byte as DRAM does).
    """
    df = np.asarray(df, dtype=np.int64)
    R = np.asarray(rows, dtype=np.float64)
    C = np.asarray(cols, dtype=np.float64)
    gemm = np.asarray(gemm, dtype=np.float64)
    D = take_rows(gemm, row_index(MAPPED_GEMM, df))
    operand = FREE_OPERAND[df].T
    by_operand = row_index(FREE_OPERAND, df)
    cap = take_rows(np.asarray(buf_words, dtype=np.float64), by_operand)
    a_bits, b_bits = (input_bits, input_bits) if operand_bits is None else operand_bits
    ia, ib = (np.broadcast_to(np.asarray(b, dtype=np.float64) / 8.0, df.shape) for b in (a_bits, b_bits))
    raw = np.where(np.asarray(acc_bits) <= 32, 32.0, 64.0)
    ab = np.asarray(raw if out_bits is None else out_bits, dtype=np.float64) / 8.0
    m, k, n = gemm
    op_bytes = np.stack([m * k * ia, k * n * ib, m * n * ab])
    op_elem = np.stack([ia, ib, np.broadcast_to(ab, df.shape)])
    if dram_bits is None:
        scale = np.ones((3, len(df)))
    else:
        scale = np.stack([np.broadcast_to(np.asarray(b, dtype=np.float64) / 8.0, df.shape) for b in dram_bits])
        scale = scale / op_elem
    is_out = operand == 2
    s_floor = np.minimum(D[2], np.maximum(R, C))
    return Problem(
        df=df, R=R, C=C, gemm=gemm, D=D, cap=cap,
        buf_cap=np.asarray(buf_words, dtype=np.float64), operand=operand,
        elem_bytes=take_rows(op_elem, by_operand),
        is_out=is_out, bytes=take_rows(op_bytes, by_operand), out_bytes=op_bytes[2],
        s_floor=s_floor, shadow=np.broadcast_to(np.asarray(shadow, dtype=bool), df.shape).copy(),
        mins=np.stack([np.minimum(D[0], R), np.minimum(D[1], C), s_floor]),
        dram_scale=take_rows(scale, by_operand),
    )
