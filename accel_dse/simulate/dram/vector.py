"""The vector ops of a workload on chip (DRAM path of ``simulate``, designs with ``vector_unit``).

Each vector op the unit runs (``perf_model.vector_timing.vector_plan``) becomes a program of its
own (``perf_model.compiler.vector_chunks.vector_op_program``: LOAD its operands into the ifmap,
VECTOR, STORE its output from the ifmap, in chunks when they do not fit it together: the program
the model walks) on seeded random int8 operands (codes of the design's activation format when it
is fp8 or int4), checked against the op's JAX integer definition (``workloads._int_ops``; behind
the unit's door for another format: ``workloads.vector_door``) bit for bit, its total cycles
against the walk's (``perf_model.program_timing``). ``--scale`` below 1 keeps the op's first rows
(:func:`scaled_op`). A RoPE's second operand is its table, which the host lays out in DRAM as it
does weights (``workloads.rope_op_rows``).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from accel_dse.simulate.dram.image import pack_tensor, program_image
from accel_dse.simulate.dram.job_files import layout_dict
from accel_spec.config import ArrayConfig
from accel_spec.vector_door import door_format

__all__ = ["scaled_op", "vector_jobs", "operand_codes"]


def scaled_op(design: ArrayConfig, op: Any, scale: float) -> tuple[Any, str]:
    """``op`` with its rows cut to ``scale`` (``scale >= 1``: the whole op), or ``(None, reason)``
    when the unit cannot run it. Whatever its size, it runs as its own program
    (``perf_model.compiler.vector_chunks.vector_op_program``: in chunks when it does not fit the ifmap).

    Below scale 1: a RoPE keeps its first positions of its first batch (all their heads), a pooling
    its first images; any other op becomes ``(1, ..., 1, rows, n)``: the first ``rows`` rows of
    its last axis ``n`` (of the first head: a causal softmax keeps its query positions).
    """
    import dataclasses

    from perf_model.vector_timing import vector_plan

    plan = vector_plan(op, design.vector_lanes)
    if isinstance(plan, str):
        return None, plan
    if scale >= 1:
        return op, ""
    if plan.table_words:
        _, seq, heads, n = op.shape
        return dataclasses.replace(op, shape=(1, max(1, math.ceil(seq * scale)), heads, n), out_shape=None), ""
    if plan.pool is not None:
        keep = max(1, math.ceil(op.shape[0] * scale))
        return dataclasses.replace(op, shape=(keep, *op.shape[1:]), out_shape=None), ""
    n = op.shape[-1]
    rows = math.prod(op.shape[:-1]) if op.kind != "softmax" else (op.shape[-2] if len(op.shape) > 1 else 1)
    keep = max(1, math.ceil(rows * scale))
    shape = (*([1] * (len(op.shape) - 2)), keep, n) if len(op.shape) >= 2 else (n,)
    return dataclasses.replace(op, shape=shape, out_shape=None), ""


def operand_codes(rng: np.random.Generator, shape: tuple[int, ...], fmt: str | None) -> np.ndarray:
    """Seeded operand codes of ``shape`` in activation format ``fmt`` (``None``: int8): every finite
    fp8 code (NaN and infinity codes redrawn as 0), int4 values, or bf16 codes (int16) of normal values."""
    if fmt == "int4":
        return rng.integers(-8, 8, shape, dtype=np.int8)
    if fmt == "bf16":  # values of the unit's range and beyond (2 sigma 4: some saturate at the door)
        from workloads.format_codes import to_codes
        from workloads.formats import quantise

        return to_codes(quantise(4 * rng.standard_normal(shape), fmt), fmt)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    if fmt == "fp8_e4m3":
        x[(x & 0x7F) == 0x7F] = 0
    elif fmt == "fp8_e5m2":
        x[(x & 0x7C) == 0x7C] = 0
    return x


def _reference(op: Any, rng: np.random.Generator, lanes: int,
               fmt: str | None = None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Seeded operands of ``op`` (codes of the design's activation format ``fmt``, ``None``: int8;
    a RoPE's second: its table, one row a (batch, position) on ``lanes`` lanes) and its output: the
    JAX integer op, behind the vector unit's door for another format (``workloads.vector_door``)."""
    from perf_model.vector_timing import vector_plan
    from workloads import rope_op_rows
    from workloads.vector_door import door_vector_op

    two = vector_plan(op, 1)
    operands = 2 if not isinstance(two, str) and two.operands == 2 else 1
    x = operand_codes(rng, op.shape, fmt)
    y = operand_codes(rng, op.shape, fmt) if operands == 2 else None
    if op.kind == "rope":
        batch, seq = op.shape[:2]
        y = np.tile(np.array(rope_op_rows(op, seq, lanes), np.int8), (batch, 1))
    args = (x,) if y is None or op.kind == "rope" else (x, y)
    out = door_vector_op(op.kind, dict(op.params), fmt, *args)
    return x, y, out


def vector_jobs(design: ArrayConfig, vector_ops: list[tuple[str, Any]], scale: float, seed: int, first: int,
                latency: int, job_type: Any) -> tuple[list[Any], list[dict[str, Any]], dict[str, np.ndarray],
                                                       list[str]]:
    """Jobs (``job_type``: ``DramJob``), op entries of the program's meta, images and notes for
    ``vector_ops`` (``(name, VectorOp)``), numbered from ``first``."""
    import perf_model
    from accel_spec.errors import ModelError
    from perf_model.compiler.vector_chunks import vector_op_program

    jobs, metas, images, notes = [], [], {}, []
    index = first
    for name, op in vector_ops:
        small, reason = scaled_op(design, op, scale)
        if small is None:
            notes.append(f"vector op {name} ({op.kind}) not simulated: {reason}")
            continue
        try:
            prog = vector_op_program(design, small)
        except ModelError as exc:
            notes.append(f"vector op {name} ({op.kind}) not simulated: {exc}")
            continue
        rng = np.random.default_rng([seed, index])
        x, y, ref = _reference(small, rng, design.vector_lanes, door_format(design.act_fmt))
        t = prog.tensors
        tensors = {"x0": pack_tensor(t["x0"], x.astype(np.int64).reshape(t["x0"].shape))}
        if y is not None:
            tensors["y0"] = pack_tensor(t["y0"], y.astype(np.int64).reshape(t["y0"].shape))
        images[f"img_{index}_0"] = program_image(prog, tensors)
        timing = perf_model.gemm_program_cycles(design, prog, latency=latency, rate=perf_model.dram_rate(design))
        metas.append({"name": name, "a_src": -1, "on_chip": False, "vector": small.kind,
                      "instances": [{"chunks": [[prog.queue_base + a * 32, b - a] for a, b in prog.chunks],
                                     "limit": 4 * timing.total + 10_000, "a": layout_dict(t["x0"]),
                                     "c": layout_dict(t["z0"])}]})
        z = t["z0"]
        rows, n = z.shape
        scaled = {"m": math.prod(op.shape[:-1]), "batch": 1} if small.shape != op.shape else None
        jobs.append(job_type(index, name, SimpleNamespace(m=rows, k=0, n=n), scaled,
                             ref.reshape(1, rows, n), z, 0, timing.total, timing.stall, 0, design.input_bits))
        index += 1
    return jobs, metas, images, notes
