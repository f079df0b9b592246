"""The jaxpr tracer: any JAX function -> a :class:`~workloads.ops.Workload` of GEMM/conv ops.

:func:`trace` runs ``jax.make_jaxpr`` on the function (no arithmetic runs when the example
arguments are ``jax.ShapeDtypeStruct``) and walks the jaxpr and every sub-jaxpr
(``jax.extend.core.jaxprs_in_params``): ``jit``, ``custom_jvp_call``/``custom_vjp_call``,
``remat`` and any other higher-order primitive are entered once; a ``scan`` body counts
``length`` times; of a ``cond``'s branches the one with the most MACs counts (one branch runs
per call: the worst case); a ``while`` body and condition count ``while_trips`` times (default
1: a while loop's trip count is not known when tracing). A ``call_exported`` (calling a
``jax.export.Exported``) is read through its StableHLO module (:mod:`workloads._stablehlo`).

Mapping of primitives to op records:

* ``dot_general`` with any dimension numbers -> :class:`~workloads.ops.Gemm`: ``batch`` is the
  product of the batch dimensions, ``k`` of the contracting dimensions, ``m`` of the lhs's other
  dimensions and ``n`` of the rhs's other dimensions (1 if there are none: a matrix-vector
  product). The lhs is ``A`` (input), the rhs ``B`` (weights).
* ``conv_general_dilated`` with any dimension layout and ``feature_group_count`` with two
  spatial dimensions -> :class:`~workloads.ops.Conv2d` (one spatial dimension: ``w = kw = 1``).
  An lhs (input) dilation counts as the zero-stuffed input it computes on; negative padding
  crops the input. Three or more spatial dimensions, or ``batch_group_count > 1`` (weight
  gradients of grouped convs), lower directly to the im2col :class:`~workloads.ops.Gemm`.

A ``jit`` equation running one of the integer vector ops of :mod:`workloads._int_ops` (named
``vector_op.<kind>.<i>``) becomes a :class:`~workloads.vector_ops.VectorOp` with that kind and
parameters, the shape of its first input and of its output (its reduction axis is the last).
The requantisation of :func:`workloads._requant.output_stage` (its arithmetic runs inside the
``output_stage`` named scope) is the output stage's work, charged with the matrix op it follows,
and is not counted. A float model's activations and normalisations (GELU, SiLU/SwiGLU, softmax,
LayerNorm, RMSNorm, residual adds), written with ``jax.nn`` or by hand, are recognised by their
pattern of primitives and become vector ops too, and a float matrix op's bias or scale is its
output stage's (:mod:`workloads._float_patterns`; ``jit`` and ``custom_jvp`` calls are inlined
for that matching). Every other primitive is counted (times its multiplier) in
``Workload.other_primitives``, and the elements it writes in ``Workload.other_elements``: that is
the work the array does not run.
Op names come from ``jax.named_scope`` (falling back to ``dot<i>`` / ``conv<i>``); each op's
``origin`` is the primitive and the user's source line that issued it (``"dot_general at
model.py:12 (forward)"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jex_core
from jax._src import source_info_util

from accel_spec.errors import WorkloadError
from workloads._eqn_origin import eqn_origin as _origin
from workloads._float_flat import flatten
from workloads._float_patterns import plan
from workloads._float_requant import FloatStages
from workloads._int_ops import marker
from workloads._lowering import Collected, conv_op, dot_op, to_workload
from workloads._requant import OUTPUT_STAGE_SCOPE
from workloads.ops import Gemm, Op, VectorOp, Workload

__all__ = ["trace", "trace_jaxpr"]

#: Higher-order primitives handled specially; every other one with sub-jaxprs is entered once.
_SCAN, _COND, _WHILE, _CALL_EXPORTED = "scan", "cond", "while", "call_exported"


def _label(eqn: Any, fallback: str) -> str:
    """The equation's ``jax.named_scope`` path, else ``fallback`` (kept inside transform names)."""
    stack = str(getattr(eqn.source_info, "name_stack", "") or "")
    if not stack:
        return fallback
    if "()" in stack:  # a transform around no scope, e.g. "transpose(jvp())"
        return stack.replace("()", f"({fallback})", 1)
    return stack


def _out_elements(eqn: Any) -> int:
    """Elements the equation writes (the product of each output's shape, summed over outputs)."""
    total = 0
    for var in eqn.outvars:
        size = 1
        for dim in getattr(getattr(var, "aval", None), "shape", ()) or ():
            size *= int(dim) if isinstance(dim, int) else 1
        total += size
    return total


def _dot_to_gemm(eqn: Any, name: str, origin: str | None = None) -> Gemm | None:
    lhs, rhs = (v.aval.shape for v in eqn.invars[:2])
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    return dot_op(lhs, rhs, lc, rc, lb, rb, name=name, origin=_origin(eqn) if origin is None else origin)


def _conv_to_op(eqn: Any, name: str, origin: str | None = None) -> Op | None:
    p = eqn.params
    lhs_shape, rhs_shape = (v.aval.shape for v in eqn.invars[:2])
    dn = p["dimension_numbers"]
    lhs_spec, rhs_spec = dn.lhs_spec, dn.rhs_spec
    return conv_op(
        n=int(lhs_shape[lhs_spec[0]]), c_in=int(lhs_shape[lhs_spec[1]]), c_out=int(rhs_shape[rhs_spec[0]]),
        spatial=[int(lhs_shape[d]) for d in lhs_spec[2:]], kernel=[int(rhs_shape[d]) for d in rhs_spec[2:]],
        strides=p["window_strides"], padding=p["padding"], lhs_dilation=p["lhs_dilation"],
        rhs_dilation=p["rhs_dilation"], groups=int(p["feature_group_count"]),
        batch_groups=int(p["batch_group_count"]), name=name, origin=_origin(eqn) if origin is None else origin,
    )


#: Vector op kinds that reduce along their input's last axis.
_ROW_KINDS = frozenset({"layernorm", "rmsnorm", "softmax"})


#: Files whose frames are the vector ops' own plumbing, not where the model calls them.
_PLUMBING = ("_int_ops.py", "_layers.py")


def _vector_origin(eqn: Any, kind: str) -> str:
    """``"vector_op.<kind> at file:line (function)"``: the first caller outside the ops' plumbing."""
    try:
        frames = list(source_info_util.user_frames(eqn.source_info.traceback))
    except Exception:  # private helper, as in _origin
        frames = []
    for frame in frames:
        if not frame.file_name.endswith(_PLUMBING):
            return f"vector_op.{kind} at {frame.file_name}:{frame.start_line} ({frame.function_name})"
    return f"vector_op.{kind}"


def _vector_op(eqn: Any, kind: str, params: tuple[tuple[str, int], ...]) -> VectorOp:
    shape = tuple(int(d) for d in eqn.invars[0].aval.shape)
    out = tuple(int(d) for d in eqn.outvars[0].aval.shape)
    scope = _label(eqn, "")
    return VectorOp(kind=kind, shape=shape, out_shape=out, params=params, origin=_vector_origin(eqn, kind),
                    name=f"{scope}/{kind}" if scope else kind, axis=len(shape) - 1 if kind in _ROW_KINDS else None)


def _in_output_stage(eqn: Any) -> bool:
    """Whether the equation is the output stage's requantisation (inside its named scope)."""
    stack = str(getattr(eqn.source_info, "name_stack", "") or "")
    return OUTPUT_STAGE_SCOPE in stack.replace("(", "/").replace(")", "/").split("/")


def _opaque(eqn: Any) -> bool:
    """Whether the walker must see ``eqn`` whole (not inlined into its caller's graph)."""
    prim = eqn.primitive.name
    if prim in (_SCAN, _COND, _WHILE, _CALL_EXPORTED) or _in_output_stage(eqn):
        return True
    return prim in ("jit", "pjit") and marker(str(eqn.params.get("name", ""))) is not None


class _Walker:
    def __init__(self, while_trips: int, origins: Sequence[str] = ()) -> None:
        self.while_trips = while_trips
        self.index = 0
        self.origins = tuple(origins)

    def _origins(self, flat: list[Any]) -> dict[int, str]:
        """Origin of each matrix equation of the top level by its program rank (the ``origins``
        given, one per matrix equation in program order; none when the counts differ)."""
        matrix = [i for i, fe in enumerate(flat) if fe.prim in ("dot_general", "conv_general_dilated")]
        self.origins, given = (), self.origins  # the top level only
        return dict(zip(matrix, given, strict=True)) if len(matrix) == len(given) else {}

    def walk(self, jaxpr: Any, mult: int, consts: Any = ()) -> Collected:
        out = Collected()
        flat = flatten(jaxpr, _opaque, consts)
        found = plan(flat, lambda e: not _in_output_stage(e), lambda e: _label(e, ""))
        stages = FloatStages(flat, found)
        origins = self._origins(flat)
        for index in stages.order():
            fe = flat[index]
            eqn, prim = fe.eqn, fe.prim
            if index in found.emit:
                out.add_vector(found.emit[index], mult)
            elif index in found.consumed:
                continue
            elif prim == "dot_general":
                self.index += 1
                op: Op | None = _dot_to_gemm(eqn, _label(eqn, f"dot{self.index}"), origins.get(index))
                out.add(stages.record(index, op), mult, prim)
            elif prim == "conv_general_dilated":
                self.index += 1
                op = _conv_to_op(eqn, _label(eqn, f"conv{self.index}"), origins.get(index))
                out.add(stages.record(index, op), mult, prim)
            elif prim in ("jit", "pjit") and (mark := marker(str(eqn.params.get("name", "")))):
                out.add_vector(_vector_op(eqn, *mark), mult)
            elif prim == _CALL_EXPORTED:
                stages.forget()
                from workloads._stablehlo import exported_ops

                out.extend(exported_ops(eqn.params["exported"], while_trips=self.while_trips), mult)
            elif prim == _SCAN:
                stages.forget()
                out.extend(self.walk(eqn.params["jaxpr"].jaxpr, mult * int(eqn.params["length"])))
            elif prim == _COND:
                stages.forget()
                branches = [self.walk(b.jaxpr, mult) for b in eqn.params["branches"]]
                out.extend(max(branches, key=lambda c: c.macs))
            elif prim == _WHILE:
                stages.forget()
                trips = mult * self.while_trips
                out.extend(self.walk(eqn.params["cond_jaxpr"].jaxpr, trips))
                out.extend(self.walk(eqn.params["body_jaxpr"].jaxpr, trips))
            else:
                subs = list(jex_core.jaxprs_in_params(eqn.params))
                if _in_output_stage(eqn):
                    continue  # the whole call, sub-jaxprs included (their name stacks start afresh)
                if subs:
                    stages.forget()
                    for sub in subs:
                        out.extend(self.walk(sub, mult))
                else:
                    name = f"{prim}[{found.reasons[index]}]" if index in found.reasons else prim
                    out.others[name] += mult
                    out.elements[name] += mult * _out_elements(eqn)
        return out


def trace_jaxpr(closed_jaxpr: Any, *, name: str, description: str = "", while_trips: int = 1,
                source: str = "jax", origins: Sequence[str] = ()) -> Workload:
    """Turn a (closed) jaxpr into a :class:`Workload`.

    Args:
        closed_jaxpr: What ``jax.make_jaxpr(fn)(*args)`` returns (or a bare ``Jaxpr``).
        name: The workload's name.
        description: One line for humans.
        while_trips: How many times each ``while`` loop's body is assumed to run.
        source: The workload's ``source`` (``"jax"``; the registry says ``"builtin"``).
        origins: Where each matrix equation of the jaxpr's top level comes from, in program order
            (a PyTorch program's ATen ops), replacing the equations' own source lines; ignored
            unless there is one per such equation.

    Raises:
        WorkloadError: if the jaxpr contains no ``dot_general`` or ``conv_general_dilated``.
    """
    jaxpr = getattr(closed_jaxpr, "jaxpr", closed_jaxpr)
    found = _Walker(while_trips, origins).walk(jaxpr, 1, getattr(closed_jaxpr, "consts", ()))
    return to_workload(found, name=name, description=description, source=source,
                       looked_for="dot_general, conv_general_dilated")


def _first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return f"{type(exc).__name__}: {line.strip()}"
    return type(exc).__name__


def _from_torch(obj: Any) -> bool:
    module = type(obj).__module__ or ""
    return module == "torch" or module.startswith("torch.")


def _torch_kind(fn: Any, args: tuple[Any, ...]) -> str:
    """What of ``fn(*args)`` is PyTorch's (``""``: nothing), judged by the objects' types' modules
    (no ``torch`` import): a module or other torch callable, or a tensor among the arguments."""
    if _from_torch(fn) or _from_torch(getattr(fn, "__self__", None)):
        return f"is a PyTorch object ({type(fn).__module__}.{type(fn).__name__})"
    stack = list(args)
    while stack:
        item = stack.pop()
        if _from_torch(item):
            return f"has a PyTorch example argument ({type(item).__module__}.{type(item).__name__})"
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return ""


def trace(fn: Callable[..., Any], *example_args: Any, name: str | None = None, description: str = "",
          while_trips: int = 1, source: str = "jax", check_values: bool = False,
          origins: Sequence[str] = ()) -> Workload:
    """Trace ``fn(*example_args)`` into a :class:`Workload` of GEMM and conv ops.

    Args:
        fn: Any JAX-traceable function (``jit``-, ``vmap``-, ``grad``-wrapped, with ``scan``,
            ``cond``, ``while_loop``, ...).
        *example_args: Arguments fixing the shapes and dtypes: arrays or, better (nothing is
            computed), pytrees of ``jax.ShapeDtypeStruct``.
        name: The workload's name (default: the function's ``__name__``).
        description: One line for humans.
        while_trips: Assumed trip count of every ``while`` loop (default 1).
        source: The workload's ``source``.
        check_values: Refuse a value of the traced function (an operand or result of any
            primitive, seen abstractly) beyond a tensor's limit, and too many matrix ops, before the
            walk (``workloads._op_limits.check_jaxpr_values``; a user's function: builtins check
            their options first).
        origins: As :func:`trace_jaxpr` takes them.

    Returns:
        The ops in program order with their run counts, plus the non-matmul primitive counts.

    Raises:
        WorkloadError: if ``fn`` or an example argument is PyTorch's (a module, a tensor: the
            message points to the PyTorch ways in, :mod:`workloads._torch_trace`), if tracing
            raises (the message's first line is shown), or if the function has no matmul or
            convolution (the primitives it has are listed).
    """
    if isinstance(while_trips, bool) or not isinstance(while_trips, int) or while_trips < 1:
        raise WorkloadError(f"while_trips must be a positive integer, not {while_trips!r}")
    label = name if name is not None else getattr(fn, "__name__", "function")
    torch_thing = _torch_kind(fn, example_args)
    if torch_thing:
        raise WorkloadError(f"{label} {torch_thing}: the tracer takes a JAX function of JAX arrays or "
                            "jax.ShapeDtypeStruct; give a PyTorch model as --workload file.py:fn with fn() returning "
                            "(module, example_args), as a torch.export.save .pt2, or as ONNX from torch.onnx.export "
                            "(docs/workloads.md, \"PyTorch\")")
    try:
        closed = jax.make_jaxpr(fn)(*example_args)
    except WorkloadError:
        raise
    except Exception as exc:  # a user's function may raise anything while tracing
        raise WorkloadError(f"tracing {label} failed: {_first_line(exc)}") from exc
    if check_values:
        from workloads._op_limits import check_jaxpr_values

        check_jaxpr_values(closed, f"workload {label!r}")
    return trace_jaxpr(closed, name=label, description=description, while_trips=while_trips, source=source,
                       origins=origins)
