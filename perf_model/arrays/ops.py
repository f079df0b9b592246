"""Workload op records as arrays (internal)."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accel_spec.errors import ModelError
from workloads.ops import Conv2d, Gemm, Op, Workload, chain_link, conv_chain_link

__all__ = ["OpArrays", "op_arrays"]


@dataclass(frozen=True)
class OpArrays:
    """The ops of a workload as arrays, one element per op.

    Attributes:
        names: op names (``op<i>`` for unnamed ops).
        ops: the op records.
        counts: how often each op runs.
        gemm: ``(3, n_ops)`` float dims ``m, k, n`` of one GEMM instance.
        instances: ``count * batch`` GEMM instances per op (float).
        macs: multiply-accumulates per op, all instances (int64).
        requant: bool per op, its outputs leave through the output stage (``op.requant``), at
            ``input_bits`` instead of ``acc_bits``.
        link: bool per op, its output is the next op's ``A`` as is (the next op's
            ``a_from_previous``, ``workloads.chain_link`` shapes, equal counts): a link on-chip
            reuse may keep in the ifmap (``perf_model.evaluator.reuse_links``); False for the last op.
        conv_link: bool per op, its output is the next op's NHWC input as is (a conv of any kernel
            reading a conv's output: the next op's ``a_from_previous``, ``workloads.conv_chain_link``,
            equal counts): a link a chain of convs on chip may keep (``perf_model.evaluator.conv_ops``).
    """

    names: tuple[str, ...]
    ops: tuple[Op, ...]
    counts: tuple[int, ...]
    gemm: np.ndarray
    instances: np.ndarray
    macs: np.ndarray
    requant: np.ndarray
    link: np.ndarray
    conv_link: np.ndarray

    def __len__(self) -> int:
        return len(self.names)


def op_arrays(ops: Workload | Sequence[tuple[Op, int]]) -> OpArrays:
    """Arrays of a :class:`Workload` or of ``(op, count)`` pairs.

    Raises:
        ModelError: an entry that is not an op record with a positive integer count, or no ops.
    """
    if isinstance(ops, Workload):
        pairs: list[tuple[Any, Any]] = list(zip(ops.ops, ops.counts, strict=True))
    else:
        if isinstance(ops, (Gemm, Conv2d)):
            raise ModelError("ops must be a Workload or a sequence of (op, count) pairs, not a single op")
        pairs = []
        for i, item in enumerate(ops):
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ModelError(f"ops[{i}] must be an (op, count) pair, not {item!r}")
            pairs.append(item)
    if not pairs:
        raise ModelError("ops must hold at least one op, not none")
    names, records, counts, dims, inst = [], [], [], [], []
    for i, (op, count) in enumerate(pairs):
        if not isinstance(op, (Gemm, Conv2d)):
            raise ModelError(f"ops[{i}] must be a Gemm or Conv2d record, not {op!r}")
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise ModelError(f"count of ops[{i}] must be a positive integer, not {count!r}")
        gemm = op.to_gemm()
        names.append(op.name or f"op{i}")
        records.append(op)
        counts.append(int(count))
        dims.append((gemm.m, gemm.k, gemm.n))
        inst.append(int(count) * gemm.batch)
    gemm_dims = np.array(dims, dtype=np.float64).T
    instances = np.array(inst, dtype=np.float64)
    macs = np.array([i * m * k * n for i, (m, k, n) in zip(inst, dims, strict=True)], dtype=np.int64)
    requant = np.array([op.requant is not None for op in records], dtype=bool)
    return OpArrays(names=tuple(names), ops=tuple(records), counts=tuple(counts), gemm=gemm_dims,
                    instances=instances, macs=macs, requant=requant, link=_links(records, counts, chain_link),
                    conv_link=_links(records, counts, conv_chain_link))


def _links(records: list[Op], counts: list[int], shapes: Callable[[Op, Op], bool]) -> np.ndarray:
    """Per op, whether its output flows into the next op as is (the next op's ``a_from_previous``,
    equal counts) with shapes that ``shapes`` accepts; False for the last op."""
    return np.array([i + 1 < len(records) and records[i + 1].a_from_previous and counts[i] == counts[i + 1]
                     and shapes(records[i], records[i + 1]) for i in range(len(records))], dtype=bool)
