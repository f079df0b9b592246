"""Buffer word layouts: GEMM tiles -> buffer words, and ofmap words -> the output tile.

A buffer word holds ``lanes`` elements; lane ``i`` occupies bits ``[i*w, (i+1)*w)``
(two's complement), so a word as little-endian bytes is the lanes as little-endian ``w``-bit
integers. A matrix ``X`` (``P x Q``) is stored *blocked*: its columns are cut into blocks of
``lanes`` (the last one zero-padded), and word ``blk * P + p`` holds ``X[p, blk*lanes :
(blk+1)*lanes]``. Per dataflow (``R`` x ``C`` array, see ``perf_model.timing``)::

    buffer   WS              OS              IS
    ifmap    A   by R lanes  A^T by R lanes  A^T by C lanes
    weight   B   by C lanes  B   by C lanes  B^T by R lanes
    ofmap    C   by C lanes  C   by C lanes  C^T by C lanes

which gives the word counts of ``perf_model.timing.run_words`` (WS ifmap ``M*ceil(K/R)`` ...).

Requantised outputs are read through ``host_qdata`` in the same word order with ``input_bits``
lanes; the output stage's parameter words (:func:`pack_qparams`) follow ``rtl_gen``'s port map:
WS/OS one word per column fold of ``C`` channels, IS one single-lane word per channel, and
:func:`qsel_rule` gives the ``host_qsel`` of each ofmap word of a tile.
"""

from __future__ import annotations

import numpy as np

from accel_spec.config import ArrayConfig, Dataflow

__all__ = ["pack_inputs", "pack_ifmap", "unpack_output", "ofmap_words", "word_bytes", "blocked", "unblocked",
           "pack_qparams", "qsel_rule"]


def word_bytes(lanes: int, bits: int) -> int:
    """Bytes of one word of ``lanes`` elements of ``bits`` bits (rounded up)."""
    return (lanes * bits + 7) // 8


def _lanes(config: ArrayConfig) -> tuple[int, int, int]:
    r, c = config.rows, config.cols
    if config.dataflow is Dataflow.IS:
        return c, r, c
    return r, c, c


def blocked(x: np.ndarray, lanes: int) -> np.ndarray:
    """``(ceil(Q/lanes) * P, lanes)`` words of the ``P x Q`` matrix ``x`` (module docstring)."""
    p, q = x.shape
    blocks = -(-q // lanes)
    padded = np.zeros((p, blocks * lanes), dtype=x.dtype)
    padded[:, :q] = x
    return padded.reshape(p, blocks, lanes).transpose(1, 0, 2).reshape(blocks * p, lanes)


def unblocked(words: np.ndarray, p: int, q: int) -> np.ndarray:
    """Inverse of :func:`blocked`: the ``P x Q`` matrix from ``(blocks * P, lanes)`` words."""
    lanes = words.shape[1]
    blocks = -(-q // lanes)
    return words.reshape(blocks, p, lanes).transpose(1, 0, 2).reshape(p, blocks * lanes)[:, :q]


def _encode(words: np.ndarray, bits: int) -> np.ndarray:
    """Signed element words -> uint8 rows of packed little-endian lanes."""
    if bits in (8, 16, 32, 64):
        dtype = np.dtype(f"<i{bits // 8}")
        return np.ascontiguousarray(words.astype(dtype)).view(np.uint8).reshape(len(words), -1)
    values = words.astype(np.int64) & ((1 << bits) - 1)
    bitplanes = ((values[..., None] >> np.arange(bits)) & 1).astype(np.uint8)
    flat = bitplanes.reshape(len(words), -1)
    return np.packbits(flat, axis=1, bitorder="little")


def _decode(raw: np.ndarray, lanes: int, bits: int) -> np.ndarray:
    """uint8 rows of packed little-endian lanes -> signed int64 ``(words, lanes)``."""
    if bits in (8, 16, 32, 64) and raw.shape[1] == lanes * bits // 8:
        return raw.view(np.dtype(f"<i{bits // 8}")).astype(np.int64).reshape(len(raw), lanes)
    flat = np.unpackbits(raw, axis=1, bitorder="little")[:, : lanes * bits].reshape(len(raw), lanes, bits)
    unsigned = (flat.astype(np.int64) << np.arange(bits, dtype=np.int64)).sum(axis=2)
    if bits == 64:
        return unsigned
    return np.where(unsigned >= 1 << (bits - 1), unsigned - (1 << bits), unsigned)


def pack_inputs(config: ArrayConfig, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ifmap and weight buffer words (uint8 rows) of one run computing ``a @ b``.

    Args:
        config: The design (array shape, dataflow, ``input_bits``).
        a: ``mt x kt`` input tile (signed integers).
        b: ``kt x nt`` weight tile.
    """
    _, w_lanes, _ = _lanes(config)
    weight = blocked(b.T, w_lanes) if config.dataflow is Dataflow.IS else blocked(b, w_lanes)
    return pack_ifmap(config, a), _encode(weight, config.input_bits)


def pack_ifmap(config: ArrayConfig, a: np.ndarray) -> np.ndarray:
    """Ifmap buffer words (uint8 rows) of the ``mt x kt`` input tile ``a``."""
    if_lanes, _, _ = _lanes(config)
    ifmap = blocked(a, if_lanes) if config.dataflow is Dataflow.WS else blocked(a.T, if_lanes)
    return _encode(ifmap, config.input_bits)


def ofmap_words(config: ArrayConfig, mt: int, nt: int) -> int:
    """Ofmap words holding an ``mt x nt`` output tile."""
    _, _, lanes = _lanes(config)
    p, q = (nt, mt) if config.dataflow is Dataflow.IS else (mt, nt)
    return p * -(-q // lanes)


def unpack_output(config: ArrayConfig, raw: np.ndarray, mt: int, nt: int, bits: int | None = None) -> np.ndarray:
    """The ``mt x nt`` output tile (int64) from its ofmap words (uint8 rows of ``bits``-bit lanes,
    default ``acc_bits``; ``input_bits`` for words read through the output stage)."""
    _, _, lanes = _lanes(config)
    values = _decode(raw, lanes, config.acc_bits if bits is None else bits)
    if config.dataflow is Dataflow.IS:
        return unblocked(values, nt, mt).T
    return unblocked(values, mt, nt)


def pack_qparams(config: ArrayConfig, fields: list[tuple[int, ...]], widths: tuple[int, ...]) -> np.ndarray:
    """qparam words (uint8 rows) of a tile's channels.

    Args:
        config: The design (dataflow, columns).
        fields: One tuple of field values per channel of the tile, in ``widths`` order.
        widths: Bits of each field (``rtl_gen.param_fields``), from bit 0 up.
    """
    lane_bits = sum(widths)
    lanes = 1 if config.dataflow is Dataflow.IS else config.cols
    words = -(-len(fields) // lanes)
    size = word_bytes(lanes, lane_bits)
    out = np.zeros((words, size), dtype=np.uint8)
    for w in range(words):
        value = 0
        for lane, values in enumerate(fields[w * lanes:(w + 1) * lanes]):
            at = lane * lane_bits
            for v, width in zip(values, widths, strict=True):
                value |= (int(v) & ((1 << width) - 1)) << at
                at += width
        out[w] = np.frombuffer(value.to_bytes(size, "little"), dtype=np.uint8)
    return out


def qsel_rule(config: ArrayConfig, mt: int, nt: int) -> tuple[int, int]:
    """``(div, mod)``: ofmap word ``i`` of an ``mt x nt`` tile takes qparam word ``(i // div) % mod``.

    WS/OS: word ``nf * mt + m`` belongs to column fold ``nf``; IS: word ``mf * nt + n`` to channel ``n``.
    """
    if config.dataflow is Dataflow.IS:
        return 1, nt
    return mt, -(-nt // config.cols)
