"""The output stage in JAX: integer-only requantisation, bit-exact with ``rtl_gen.OutputStage``.

:func:`output_stage` is the arithmetic of :class:`workloads.ops.Requant` on exact integers (64-bit
inside, under a local ``jax.enable_x64``), so it can run eagerly, under ``jit`` and inside a
traced model. :func:`derived_requant` derives the parameters the builtin int8 models use from a
layer's value ranges (see ``docs/workloads.md``), and :func:`recording` lets the registry collect
every ``output_stage`` call while it traces a workload (a builtin or a user's function), so each
op record carries its layer's parameters.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from workloads.ops import Requant, Workload

__all__ = ["with_requant", "with_flow", "output_stage", "derived_requant", "recording", "record", "note_input",
           "ACTIVATION_RMS", "ACTIVATIONS", "OUTPUT_STAGE_SCOPE"]

#: Assumed RMS of every int8 layer input and target RMS of every layer output (after its
#: activation), in codes: a quarter of the range, so +-4 sigma spans the int8 codes.
ACTIVATION_RMS = 32.0
#: The ``jax.named_scope`` around the output stage's arithmetic: the tracer leaves it to the matrix
#: op whose result it requantises (the model charges the output stage with that op).
OUTPUT_STAGE_SCOPE = "output_stage"
#: Activations the output stage fuses, as clamp bounds relative to the zero point (``None``: no bound).
ACTIVATIONS: dict[str | None, tuple[int | None, int | None]] = {None: (None, None), "relu": (0, None),
                                                                 "relu6": (0, 96)}

_LOG: contextvars.ContextVar[list[Requant] | None] = contextvars.ContextVar("requant_log", default=None)
# Inside a recording: every matmul's "A is the last output stage's result" flag, and that result.
_FLOW: contextvars.ContextVar[tuple[list[bool], list[Any]] | None] = contextvars.ContextVar("flow_log", default=None)


def output_stage(acc: Any, rq: Requant, *, start: int = 0) -> jax.Array:
    """Requantise accumulators ``acc`` (channels on the last axis) as :class:`Requant` defines.

    Args:
        acc: Integer accumulators, any shape ``(..., n)``; channel ``j`` of the last axis is the
            requant channel ``start + j`` (any channel when the fields hold one value).
        rq: The parameters.
        start: First channel of ``acc``'s last axis.

    Returns:
        int8 (``rq.bits <= 8``) or int16 codes of ``acc``'s shape.

    Inside a :func:`recording` (the registry tracing a workload) ``rq`` is noted, so the op
    whose result this is carries it.
    """
    record(rq)
    n = acc.shape[-1]
    out_dtype = jnp.int8 if rq.bits <= 8 else jnp.int16
    with jax.enable_x64(True), jax.named_scope(OUTPUT_STAGE_SCOPE):
        mult = jnp.asarray(rq.channel_values("multiplier", n, start), jnp.int64)
        shift = jnp.asarray(rq.channel_values("shift", n, start), jnp.int64) + 31
        bias = jnp.asarray(rq.channel_values("bias", n, start), jnp.int64)
        x = jnp.clip(jnp.asarray(acc).astype(jnp.int64) + bias, -(1 << 31), (1 << 31) - 1)
        half = jnp.left_shift(jnp.int64(1), shift - 1)
        y = jnp.right_shift(x * mult + half, shift)  # arithmetic: floor division by 2**(31 + s)
        lo, hi = rq.bounds
        q = jnp.minimum(jnp.maximum(y + rq.zero_point, lo), hi)
        out = q.astype(out_dtype)
    flow = _FLOW.get()
    if flow is not None:
        flow[1][:] = [out]
    return out


def derived_requant(k: int, activation: str | None = None, *, bits: int = 8,
                    input_rms: float = ACTIVATION_RMS, output_rms: float = ACTIVATION_RMS) -> Requant:
    """Per-tensor parameters of a layer with reduction length ``k`` (bias 0, zero point 0).

    The accumulator of ``k`` products of an input with RMS ``input_rms`` and uniform ``bits``-bit
    weights (RMS ``sqrt((4**bits - 1) / 12)``, 73.9 for int8) has RMS
    ``sqrt(k) * input_rms * weight_rms``; the real scale maps it to ``output_rms`` after the
    activation (a ReLU halves the second moment, so its layer aims at ``sqrt(2) * output_rms``
    before it). The scale is stored as ``multiplier * 2**-(31 + shift)`` with ``multiplier`` in
    ``[2**30, 2**31)`` (clamped to shift 0..31 at the extremes).

    Args:
        k: Reduction length.
        activation: ``None``, ``"relu"`` or ``"relu6"`` (clamp at 0 and 96 = 6.0 in the int8
            form's 4-fractional-bit codes).
        bits: Operand and output width.
        input_rms, output_rms: Assumed input and target output RMS, in codes.
    """
    weight_rms = math.sqrt(((1 << (2 * bits)) - 1) / 12.0)
    target = output_rms * (math.sqrt(2.0) if activation is not None else 1.0)
    real = target / (math.sqrt(max(k, 1)) * input_rms * weight_rms)
    frac, exp = math.frexp(real)
    mult, shift = round(frac * (1 << 31)), -exp
    if mult == 1 << 31:
        mult, shift = 1 << 30, shift - 1
    if shift < 0:
        mult, shift = (1 << 31) - 1, 0
    elif shift > 31:
        mult, shift = max(1, round(real * 2.0 ** 62)), 31
    lo, hi = ACTIVATIONS[activation]
    return Requant(multiplier=(mult,), shift=(shift,), act_min=lo, act_max=hi, bits=bits)


@contextlib.contextmanager
def recording(flow: list[bool] | None = None) -> Iterator[list[Requant]]:
    """Collect the :class:`Requant` of every :func:`record` call made inside, in call order, and
    into ``flow`` the flag of every :func:`note_input` call."""
    log: list[Requant] = []
    token = _LOG.set(log)
    flow_token = _FLOW.set((flow, []) if flow is not None else None)
    try:
        yield log
    finally:
        _LOG.reset(token)
        _FLOW.reset(flow_token)


def note_input(a: Any) -> None:
    """Note (in the active :func:`recording`) whether ``a``, the ``A`` of the matmul about to be
    issued, is the very array the last :func:`output_stage` returned: the previous op's output
    with nothing in between (an activation other than the stage's clamp, a residual add, a
    reshape all make a new array)."""
    flow = _FLOW.get()
    if flow is not None:
        flow[0].append(bool(flow[1]) and a is flow[1][0])


def record(rq: Requant) -> Requant:
    """Note ``rq`` in the active :func:`recording` (if any); returns it."""
    log = _LOG.get()
    if log is not None:
        log.append(rq)
    return rq


def with_requant(workload: Workload, params: Sequence[Requant]) -> Workload:
    """``workload`` with ``params[i]`` attached to op ``i`` (what the int8 form's output stage used).

    Every ``workloads.output_stage`` call while tracing notes its :class:`Requant`, in trace
    order (the builtin int8 models requantise every matmul and conv); when there is one per op
    they pair up one to one. Otherwise (a raw ``gemm``, a function that requantises only some
    of its ops) the ops stay raw.
    """
    if len(params) != len(workload.ops):
        return workload
    ops = tuple(dataclasses.replace(op, requant=rq) for op, rq in zip(workload.ops, params, strict=True))
    return dataclasses.replace(workload, ops=ops)


def with_flow(workload: Workload, flow: Sequence[bool]) -> Workload:
    """``workload`` with ``a_from_previous`` set on op ``i`` where ``flow[i]`` (the tracing's
    :func:`workloads._requant.note_input` flags, one per matmul in trace order) says its ``A`` is
    the previous op's requantised output; unchanged unless there is one flag per op and both
    ops are requantised."""
    if len(flow) != len(workload.ops):
        return workload
    ops = list(workload.ops)
    for i in range(1, len(ops)):
        if flow[i] and ops[i].requant is not None and ops[i - 1].requant is not None:
            ops[i] = dataclasses.replace(ops[i], a_from_previous=True)
    return dataclasses.replace(workload, ops=tuple(ops))
