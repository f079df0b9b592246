"""Post-training quantisation of a float JAX model to the design's formats, and its SQNR.

A float model (a JAX function on float arrays) is quantised as the chip would run it, after a
calibration pass, and its output compared with the float model's (:func:`quantise_model`):

1. *Graph.* The function's jaxpr, with ``jit``/``custom_jvp`` calls inlined
   (:func:`workloads._float_flat.flatten`), and the float patterns found in it
   (:func:`workloads._float_patterns.plan`: GELU, SiLU, softmax, norms, residual adds, the matrix
   ops' bias/scale). ``scan``/``cond``/``while``, integer matrix ops (an already quantised model) and
   constants inside calls are refused (:class:`NotQuantisable`).
2. *Data.* Each array argument given as a concrete array is used as is (weights); each one given
   as ``jax.ShapeDtypeStruct`` is drawn: standard normal floats, zero integers, from
   ``numpy.random.default_rng`` seeded with ``(seed, 53, sample)``. Calibration runs samples
   ``1 .. samples``, the SQNR is measured on sample 0 (held out). A calibration file (``.npz``: one
   array per argument leaf, in ``jax.tree`` order, as ``numpy.savez(*leaves)`` writes them, each of the
   leaf's shape or with a leading axis of samples) replaces both: calibration and the SQNR then use
   the file's samples.
3. *Calibration.* The float model runs on the calibration samples; every value's largest magnitude
   is kept (a layout op's result -- reshape, transpose, slice... -- takes its input's, so it keeps
   its codes), and each matrix op's weight operand's per output channel (a ``dot_general``'s rhs
   free dimensions, a convolution's output features).
4. *Scales.* Integers: ``amax / max_finite`` (symmetric, zero point 0). fp8: the power of two at or
   above ``amax / max_finite`` (the fp8 output stage scales by shifts only). bf16: 1. Activations per
   tensor; weights per tensor or per output channel (``granularity``). A weight is a matrix op's
   second operand that is the same on every calibration sample; one that changes (attention's
   keys and values) is an activation, per tensor (a per-key scale from a few samples would clip
   new data).
5. *The quantised model.* A matrix op multiplies its operand codes exactly (the activation in the
   activation format, the weight operand in the weight format; an integer or fp8_e4m3 sum is
   exact; a bf16/fp8_e5m2 sum is taken exact, not in float32) and its output stage applies the
   scales, then the op's bias or scale (the equations the pattern matcher gives the output stage),
   then rounds to the activation format at the result's calibrated scale (the Q31 multiplier's
   rounding, below ``2**-31`` relative, is left out). A vector-unit op (each recognised region, each
   residual add) reads its inputs in the activation format, computes in float32 and writes its
   result in the activation format at its calibrated scale: the unit's input and output rounding
   are modelled, its integer algorithms' own error (i-exp, i-GELU, the norms' integer square root:
   ``bench/int_ops_accuracy.py``) is not. Host work computes in float32 on the values it reads (a
   matrix op's result as the codes its output stage wrote).
6. *SQNR.* ``10 log10(sum ref**2 / sum (ref - q)**2)`` over every float output of the evaluation
   samples, at most :data:`workloads.accuracy.SQNR_CAP_DB`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

from accel_spec.errors import WorkloadError
from accel_spec.number_formats import FORMATS, NumberFormat
from workloads._float_flat import FlatEqn, _inline, _Lit
from workloads._float_patterns import Plan, plan
from workloads.formats import quantise
from workloads.host_work import LAYOUT_PRIMITIVES

__all__ = ["quantise_model", "PtqResult", "NotQuantisable", "GRANULARITIES", "CALIBRATION_SAMPLES", "PTQ_MAX_MACS"]

#: Weight scale granularities.
GRANULARITIES = ("tensor", "channel")
#: Seeded calibration samples by default.
CALIBRATION_SAMPLES = 4
#: Largest model (multiply-accumulates of one run) quantised; a larger one keeps the estimate of
#: :mod:`workloads.accuracy` (a run is numpy/XLA on the host: 2**32 MACs take seconds).
PTQ_MAX_MACS = 2**32
_CAP_DB = 300.0
_MATRIX = ("dot_general", "conv_general_dilated")
_CONTROL = ("scan", "cond", "while", "call_exported")


class NotQuantisable(WorkloadError):
    """The model is not a float model this pass can quantise (the reason is the message)."""


@dataclass(frozen=True)
class PtqResult:
    """What :func:`quantise_model` measured.

    Attributes:
        weight_format, act_format: The formats' names.
        granularity: ``"tensor"`` or ``"channel"`` (the weights' scales).
        sqnr_db: SQNR (dB) of the quantised model's outputs against the float model's.
        calibration: Where the calibration data came from, for humans.
        matrix_ops, vector_ops: Matrix ops quantised; vector-unit records (regions, residual adds).
    """

    weight_format: str
    act_format: str
    granularity: str
    sqnr_db: float
    calibration: str
    matrix_ops: int
    vector_ops: int


def _fmt(name: str) -> NumberFormat:
    if name not in FORMATS:
        raise WorkloadError(f"format must be one of {', '.join(FORMATS)}, not {name!r}")
    return FORMATS[name]


def _scale(amax: np.ndarray | float, f: NumberFormat) -> np.ndarray:
    """Step of the format for values up to ``amax`` (module docstring, 4); 1 where ``amax`` is 0."""
    amax = np.asarray(amax, dtype=np.float64)
    if f.name == "bf16":
        return np.ones_like(amax)
    ratio = np.where(amax > 0, amax / f.max_finite, 1.0)
    if f.is_int:
        return ratio
    return np.exp2(np.ceil(np.log2(ratio)))


def _codes(x: np.ndarray, f: NumberFormat, scale: np.ndarray | float) -> np.ndarray:
    """``x / scale`` as values of ``f`` (float64), ``scale`` broadcasting against ``x``."""
    return quantise(np.asarray(x, np.float64) / scale, f)


def _floating(x: Any) -> bool:
    return getattr(getattr(x, "dtype", None), "kind", "") == "f"


def _opaque(eqn: Any) -> bool:
    return eqn.primitive.name in _CONTROL


@dataclass
class _Graph:
    flat: list[FlatEqn]
    invars: tuple[Any, ...]
    outs: tuple[Any, ...]
    found: Plan


def _graph(fn: Callable[..., Any], args: tuple[Any, ...]) -> _Graph:
    try:
        closed = jax.make_jaxpr(fn)(*args)
    except WorkloadError:
        raise
    except Exception as exc:  # the user's function may raise anything
        raise WorkloadError(f"tracing the model failed: {type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
    env: dict[Any, Any] = {v: _Lit(c) for v, c in zip(closed.jaxpr.constvars, closed.consts, strict=True)}
    flat: list[FlatEqn] = []
    _inline(closed.jaxpr, env, _opaque, flat)
    for fe in flat:
        if fe.prim in _CONTROL or list(jex_core.jaxprs_in_params(fe.eqn.params)):
            raise NotQuantisable(f"its {fe.prim} is not quantised (scan, cond, while and calls the matcher "
                                 "does not inline are left to the estimate)")
        if fe.prim in _MATRIX and not all(_floating(v.aval) for v in fe.eqn.invars):
            raise NotQuantisable("it has integer matrix ops (already quantised)")
    outs = tuple(_Lit(v.val) if isinstance(v, jex_core.Literal) else env.get(v, v) for v in closed.jaxpr.outvars)
    if not any(fe.prim in _MATRIX for fe in flat):
        raise NotQuantisable("it has no matrix op")
    return _Graph(flat, tuple(closed.jaxpr.invars), outs, plan(flat, lambda e: True, lambda e: ""))


def _bind(fe: FlatEqn, vals: Sequence[Any]) -> list[Any]:
    out = fe.eqn.primitive.bind(*vals, **fe.eqn.params)
    return list(out) if fe.eqn.primitive.multiple_results else [out]


def _value(env: dict[Any, Any], u: Any) -> Any:
    if isinstance(u, _Lit):
        if u.value is None:
            raise NotQuantisable("it has a constant inside a call (not reachable from here)")
        return u.value
    return env[u]


def _weight_axes(fe: FlatEqn, rank: int) -> tuple[tuple[int, ...], int | None]:
    """``(reduced axes of the weight operand for per-channel amax, output channel axis or None)``."""
    p = fe.eqn.params
    if fe.prim == "dot_general":
        (_, rc), (_, rb) = p["dimension_numbers"]
        return tuple(sorted({*rc, *rb})), None
    dn = p["dimension_numbers"]
    out_feature = int(dn.rhs_spec[0])
    return tuple(a for a in range(rank) if a != out_feature), int(dn.out_spec[1])


def _float_run(g: _Graph, leaves: Sequence[Any], amax: dict[Any, float] | None,
               chan: dict[int, np.ndarray] | None, seen: dict[int, Any] | None = None) -> list[np.ndarray]:
    """Run the float model; with ``amax``/``chan`` given, note every value's and weight channel's
    magnitude, and in ``seen`` each matrix op's first weight operand (``None`` once it changed: an
    activation, not a weight)."""
    env: dict[Any, Any] = dict(zip(g.invars, leaves, strict=True))

    def note(u: Any, v: Any) -> None:
        if amax is not None and _floating(v) and not isinstance(u, _Lit):
            m = float(np.max(np.abs(np.asarray(v)))) if np.size(v) else 0.0
            amax[u] = max(amax.get(u, 0.0), m)

    for u, v in env.items():
        note(u, v)
    for i, fe in enumerate(g.flat):
        vals = [_value(env, u) for u in fe.ins]
        if chan is not None and fe.prim in _MATRIX:
            w = np.abs(np.asarray(vals[1], np.float64))
            m = np.max(w, axis=_weight_axes(fe, w.ndim)[0], keepdims=True)
            chan[i] = m if i not in chan else np.maximum(chan[i], m)
            if seen is not None:
                seen[i] = vals[1] if i not in seen else (seen[i] if seen[i] is not None
                                                         and np.array_equal(seen[i], vals[1]) else None)
        for u, v in zip(fe.outs, _bind(fe, vals), strict=True):
            env[u] = v
            note(u, v)
    return [np.asarray(_value(env, u)) for u in g.outs]


def _propagate_layout(g: _Graph, amax: dict[Any, float]) -> None:
    """A layout op's result takes its input's magnitude (it keeps the codes; module docstring, 3)."""
    for fe in g.flat:
        if fe.prim in LAYOUT_PRIMITIVES and fe.prim != "convert_element_type":
            data = [amax[u] for u in fe.ins if u in amax]
            if data:
                for u in fe.outs:
                    if u in amax:
                        amax[u] = max(data)


class _Quantised:
    """One run of the quantised model (module docstring, 5)."""

    def __init__(self, g: _Graph, amax: dict[Any, float], chan: dict[int, np.ndarray], wf: NumberFormat,
                 af: NumberFormat, per_channel: set[int]) -> None:
        self.g, self.amax, self.chan, self.wf, self.af, self.per_channel = g, amax, chan, wf, af, per_channel

    def act(self, u: Any, v: Any) -> Any:
        """``v`` (the value ``u``) in the activation format at its calibrated scale, in real units."""
        if not _floating(v) or not np.all(np.isfinite(v)):
            return v
        m = self.amax.get(u)
        if m is None:
            m = float(np.max(np.abs(np.asarray(v)))) if np.size(v) else 0.0
        s = _scale(m, self.af)
        return (_codes(v, self.af, s) * s).astype(np.asarray(v).dtype)

    def matrix(self, i: int, fe: FlatEqn, a: Any, b: Any) -> np.ndarray:
        """The op's exact product of codes, scaled back (float32, as the float model's dtype)."""
        a = np.asarray(a, np.float64)
        b = np.asarray(b, np.float64)
        sa = float(_scale(self.amax.get(fe.ins[0], float(np.max(np.abs(a))) if a.size else 0.0), self.af))
        reduced, out_axis = _weight_axes(fe, b.ndim)
        if i in self.per_channel:
            sb = _scale(self.chan[i], self.wf)
        else:
            sb = _scale(np.max(self.chan[i]), self.wf)
        qa, qb = _codes(a, self.af, sa), _codes(b, self.wf, sb)
        params = dict(fe.eqn.params)
        params["preferred_element_type"] = np.dtype(np.float64)
        with jax.enable_x64(True):
            acc = np.asarray(fe.eqn.primitive.bind(jnp.asarray(qa), jnp.asarray(qb), **params))
        if np.ndim(sb) == 0 or sb.size == 1:
            scale_out: Any = float(np.max(sb))
        elif out_axis is None:  # dot_general: the rhs free dimensions are the output's last ones
            free = tuple(d for a_, d in enumerate(b.shape) if a_ not in reduced)
            scale_out = sb.reshape(free)
        else:
            shape = [1] * acc.ndim
            shape[out_axis] = sb.size
            scale_out = sb.reshape(shape)
        return (acc * sa * scale_out).astype(fe.eqn.outvars[0].aval.dtype)

    def run(self, leaves: Sequence[Any]) -> list[np.ndarray]:
        g, found = self.g, self.g.found
        env: dict[Any, Any] = dict(zip(g.invars, leaves, strict=True))
        stored: dict[Any, Any] = {}  # values in the activation format, by identity
        pending: set[Any] = set()  # matrix results (and their output stage's values) not yet rounded

        def read_act(u: Any) -> Any:
            if u not in stored:
                stored[u] = self.act(u, _value(env, u))
            return stored[u]

        for i, fe in enumerate(g.flat):
            if i in found.members:
                last = found.members[i]
                wanted = set(found.inputs.get(last, ())) | pending
                outs = _bind(fe, [read_act(u) if u in wanted else _value(env, u) for u in fe.ins])
                if i == last:
                    outs = [self.act(u, v) for u, v in zip(fe.outs, outs, strict=True)]
                    stored.update(zip(fe.outs, outs, strict=True))
            elif i in found.stage:
                outs = _bind(fe, [_value(env, u) for u in fe.ins])
                pending.update(fe.outs)
            elif fe.prim in _MATRIX:
                outs = [self.matrix(i, fe, read_act(fe.ins[0]), _value(env, fe.ins[1]))]
                pending.update(fe.outs)
            else:
                outs = _bind(fe, [read_act(u) if u in pending else _value(env, u) for u in fe.ins])
            env.update(zip(fe.outs, outs, strict=True))
        return [np.asarray(read_act(u) if u in pending else _value(env, u)) for u in g.outs]


def _leaf_samples(leaves: Sequence[Any], seed: int, samples: int) -> list[list[Any]]:
    """Sample ``s`` (0: evaluation, 1..: calibration) of every leaf (module docstring, 2)."""
    out = []
    for s in range(samples + 1):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 53, s]))
        row = []
        for leaf in leaves:
            if isinstance(leaf, jax.ShapeDtypeStruct):
                dtype = np.dtype(leaf.dtype)
                if dtype.kind == "f":
                    row.append(rng.standard_normal(leaf.shape).astype(dtype))
                elif dtype.kind in "iub":
                    row.append(np.zeros(leaf.shape, dtype))
                else:
                    raise NotQuantisable(f"an argument of dtype {dtype} cannot be drawn")
            else:
                row.append(np.asarray(leaf))
        out.append(row)
    return out


def _file_samples(path: str, leaves: Sequence[Any]) -> list[list[Any]]:
    """The calibration file's samples (module docstring, 2)."""
    p = Path(path)
    if p.suffix != ".npz" or not p.is_file():
        raise WorkloadError(f"calibration file must be an existing .npz file, not {path!r}")
    try:
        with np.load(p, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except Exception as exc:  # a corrupt or foreign file
        raise WorkloadError(f"calibration file {path!r} cannot be read as .npz: {type(exc).__name__}") from exc
    keys = [f"arr_{i}" for i in range(len(leaves))]
    if sorted(arrays) != sorted(keys):
        raise WorkloadError(f"calibration file {path!r} must hold arr_0 .. arr_{len(leaves) - 1} (one array per "
                            f"argument leaf, numpy.savez(*leaves)), not {', '.join(sorted(arrays)) or 'nothing'}")
    count = None
    per_leaf = []
    for key, leaf in zip(keys, leaves, strict=True):
        arr, shape = arrays[key], tuple(leaf.shape)
        if arr.shape == shape:
            n, arr = 1, arr[None]
        elif arr.shape[1:] == shape:
            n = arr.shape[0]
        else:
            raise WorkloadError(f"calibration file {path!r}: {key} must have shape {shape} or (samples, *{shape}), "
                                f"not {arr.shape}")
        if n != 1 and count not in (None, n):
            raise WorkloadError(f"calibration file {path!r}: arrays hold {count} and {n} samples (one count for all)")
        count = n if n != 1 else count
        per_leaf.append(arr.astype(np.dtype(leaf.dtype)))
    total = count or 1
    return [[a[s % a.shape[0]] for a in per_leaf] for s in range(total)]


def quantise_model(fn: Callable[..., Any], args: tuple[Any, ...], weight_format: str, act_format: str, *,
                   granularity: str = "channel", calibration: str | None = None,
                   samples: int = CALIBRATION_SAMPLES, seed: int = 0) -> PtqResult:
    """Quantise the float model ``fn(*args)`` after a calibration pass and measure its SQNR.

    Args:
        fn: A JAX function on float arrays.
        args: Its example arguments: arrays (used as given: weights) or ``jax.ShapeDtypeStruct``
            (drawn per sample).
        weight_format, act_format: Names of :data:`accel_spec.number_formats.FORMATS` (two float
            formats must be the same one).
        granularity: ``"tensor"`` or ``"channel"``: the weight operands' scales.
        calibration: An ``.npz`` file of calibration inputs, or ``None`` (seeded samples).
        samples: Seeded calibration samples (ignored with a file).
        seed: Seed of the drawn samples.

    Raises:
        NotQuantisable: the model is not a float model this pass takes (the reason is named).
        WorkloadError: a bad format, granularity, sample count or calibration file.
    """
    wf, af = _fmt(weight_format), _fmt(act_format)
    if not (wf.is_int and af.is_int) and wf != af:
        raise WorkloadError(f"weight {wf.name} with activation {af.name}: float operands take one format for both")
    if granularity not in GRANULARITIES:
        raise WorkloadError(f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= 64:
        raise WorkloadError(f"calibration samples must be an integer in [1, 64], not {samples!r}")
    leaves = jax.tree.leaves(args)
    g = _graph(fn, args)
    if calibration is None:
        data = _leaf_samples(leaves, seed, samples)
        evaluation, calib = data[:1], data[1:]
        where = f"{samples} seeded samples (seed {seed}), SQNR on a held-out one"
    else:
        calib = evaluation = _file_samples(calibration, leaves)
        where = f"{len(calib)} samples of {calibration}"
    amax: dict[Any, float] = {}
    chan: dict[int, np.ndarray] = {}
    seen: dict[int, Any] = {}
    for row in calib:
        _float_run(g, row, amax, chan, seen)
    _propagate_layout(g, amax)
    weights = {i for i, first in seen.items() if first is not None} if granularity == "channel" else set()
    quantised = _Quantised(g, amax, chan, wf, af, weights)
    signal = noise = 0.0
    for row in evaluation:
        ref = _float_run(g, row, None, None)
        got = quantised.run(row)
        for r, q in zip(ref, got, strict=True):
            if _floating(r):
                r64, q64 = np.asarray(r, np.float64), np.asarray(q, np.float64)
                signal += float(np.sum(r64 * r64))
                noise += float(np.sum((r64 - q64) ** 2))
    if signal == 0.0:
        raise NotQuantisable("its float outputs are all zero on the evaluation data (no signal)")
    db = _CAP_DB if noise == 0.0 else min(10.0 * math.log10(signal / noise), _CAP_DB)
    matrix = sum(fe.prim in _MATRIX for fe in g.flat)
    return PtqResult(wf.name, af.name, granularity, db, where, matrix, len(g.found.emit))
