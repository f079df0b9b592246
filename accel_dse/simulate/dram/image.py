"""DRAM images: a compiled program and its tensors as bytes, and results read back (numpy only).

The layout is :mod:`perf_model.compiler.program`'s (``TensorLayout``): rows of little-endian two's
complement lanes, padded with zeros to whole buffer words (a packed layout: int4 lanes two a byte,
element ``2i`` in the low nibble of byte ``i``); the program's commands at its
``queue_base``. Runs inside the simulator process too, so it imports numpy and the stdlib-only
command encoding, never JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from accel_spec.isa import encode

__all__ = ["pack_tensor", "unpack_tensor", "pack_nibbles", "unpack_nibbles", "qparam_fields", "pack_qparam_lanes",
           "program_image"]

_QPARAM_AT = {"bias": (0, 4), "multiplier": (4, 4), "shift": (8, 1), "zero_point": (10, 2), "act_min": (12, 2),
              "act_max": (14, 2)}


def _dtype(elem_bytes: int) -> np.dtype:
    return np.dtype(f"<i{elem_bytes}")


def pack_tensor(layout: Any, x: np.ndarray) -> np.ndarray:
    """The bytes (uint8, ``layout.nbytes``) of matrix ``x`` (``layout.shape``) in ``layout``."""
    x = np.asarray(x)
    if x.shape != tuple(layout.shape):
        raise ValueError(f"tensor {layout.name} must have shape {tuple(layout.shape)}, not {x.shape}")
    stored = x.T if layout.transposed else x
    rows = np.zeros((layout.rows, layout.row_elems), dtype=_dtype(layout.elem_bytes))
    rows[:stored.shape[0], :stored.shape[1]] = stored  # rows past the matrix: slack (zero)
    if getattr(layout, "packed", False):
        return pack_nibbles(rows.reshape(-1))
    return rows.reshape(-1).view(np.uint8)


def pack_nibbles(values: np.ndarray) -> np.ndarray:
    """Bytes of an even count of int4 ``values`` in [-8, 7], two a byte, element ``2i`` in the low
    nibble of byte ``i``.

    Raises:
        ValueError: a value outside [-8, 7], or an odd count.
    """
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    if v.size % 2 or ((v < -8) | (v > 7)).any():
        raise ValueError(f"packed int4 needs an even count of values in [-8, 7], not {v.size} values in "
                         f"[{v.min(initial=0)}, {v.max(initial=0)}]")
    nib = (v & 0xF).astype(np.uint8)
    return nib[0::2] | (nib[1::2] << 4)


def unpack_nibbles(raw: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_nibbles`: the int64 values, two a byte, each nibble sign-extended."""
    b = np.asarray(raw, dtype=np.uint8).reshape(-1).astype(np.int64)
    nib = np.stack([b & 0xF, b >> 4], axis=1).reshape(-1)
    return nib - ((nib & 0x8) << 1)


def unpack_tensor(layout: Any, raw: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_tensor`: the int64 matrix from ``raw`` (``layout.nbytes`` bytes)."""
    if getattr(layout, "packed", False):
        rows = unpack_nibbles(raw[:layout.nbytes]).reshape(layout.rows, layout.row_elems)
    else:
        rows = np.ascontiguousarray(raw[:layout.nbytes]).view(_dtype(layout.elem_bytes)).reshape(layout.rows,
                                                                                                layout.row_elems)
    p, q = layout.shape
    stored = rows[:, :(p if layout.transposed else q)].astype(np.int64)
    return stored.T if layout.transposed else stored


def qparam_fields(rq: Any, count: int, first: int = 0) -> list[tuple[int, ...]]:
    """``(bias, multiplier, shift, zero_point, act_min, act_max)`` of channels ``first ..
    first + count - 1`` of the ``workloads.Requant`` record ``rq`` (the output stage's order)."""
    lo, hi = rq.bounds
    per = [rq.channel_values(f, count, first) for f in ("bias", "multiplier", "shift")]
    return [(bias, mult, shift, rq.zero_point, lo, hi) for bias, mult, shift in zip(*per, strict=True)]


def pack_qparam_lanes(layout: Any, fields: Sequence[tuple[int, ...]]) -> np.ndarray:
    """The 16-byte lanes of the output stage's parameters, one ``(bias, multiplier, shift,
    zero_point, act_min, act_max)`` per channel (channels beyond ``len(fields)`` are zero)."""
    out = np.zeros((layout.row_elems, 16), dtype=np.uint8)
    for ch, values in enumerate(fields):
        for (name, (at, size)), value in zip(_QPARAM_AT.items(), values, strict=True):
            out[ch, at:at + size] = np.frombuffer(int(value).to_bytes(size, "little", signed=name != "shift"),
                                                  dtype=np.uint8)
    return out.reshape(-1)


def program_image(program: Any, tensors: dict[str, np.ndarray], size: int | None = None) -> np.ndarray:
    """The whole DRAM image (uint8) of ``program`` with the given tensor bytes placed.

    Args:
        program: a ``GemmProgram``.
        tensors: ``name -> bytes`` (from :func:`pack_tensor` / :func:`pack_qparam_lanes`).
        size: image bytes (default ``program.dram_bytes``).
    """
    image = np.zeros(size or program.dram_bytes, dtype=np.uint8)
    cmds = b"".join(encode(c) for c in program.commands)
    image[program.queue_base:program.queue_base + len(cmds)] = np.frombuffer(cmds, dtype=np.uint8)
    for name, raw in tensors.items():
        layout = program.tensors[name]
        image[layout.base:layout.base + len(raw)] = raw
    return image

