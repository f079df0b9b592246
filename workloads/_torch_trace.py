"""PyTorch models -> the op records a float JAX model of the same layers gives (``torch`` imported lazily).

Ways in:

* ``--workload file.py:fn`` or ``package.module:fn`` where ``fn()`` returns ``(module, example_args)``
  (an ``nn.Module`` and a tuple of example tensors);
* a ``.pt2`` file written by ``torch.export.save``;
* a Hugging Face ``config.json`` (:mod:`workloads._hf_torch`).

The module is put in eval mode and exported with ``torch.export.export`` (static shapes). Each node
of the exported graph is then run through :mod:`workloads._torch_ops` inside ``jax.make_jaxpr``: the
jaxpr tracer (:mod:`workloads._tracer`) and its float pattern matcher see the primitives a JAX user
writing the same model would give them, so convolutions, linear layers, attention
(``scaled_dot_product_attention`` included), norms, activations, pools and residual adds become the
same :class:`~workloads.ops.Gemm`, :class:`~workloads.ops.Conv2d` and
:class:`~workloads.vector_ops.VectorOp` records. Op names are the PyTorch module paths
(``layer1.0.conv1``).

Parameters are the JAX function's weight arguments (their values where the module has them, a
``jax.ShapeDtypeStruct`` for a tensor on the ``meta`` device: a model too big to hold is built
there and traced from its shapes alone). Buffers and constants with values (a RoPE frequency
table, position ids) are constants of the function. An eval-mode batch norm's statistics are
folded into a per-channel scale and shift before the trace (quantisation folds them so too).

Without ``torch`` installed, each way in is one line naming the extra that installs it.
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.text import shown

__all__ = ["TORCH_MISSING", "TorchModel", "import_torch", "lower", "lower_module", "torch_pair", "load_pt2",
           "trace_torch"]

TORCH_MISSING = ("PyTorch is not installed; install accel-dse's torch extra: "
                 "pip install -e '.[torch]' (scripts/setup.sh does)")
#: Tensors the ``meta`` device holds (no values): weights stay shapes, and quantisation is refused.
_META = "meta"
_BN = ("batch_norm", "_native_batch_norm_legit_no_training")


def import_torch() -> Any:
    """``torch``, or :class:`WorkloadError` with :data:`TORCH_MISSING`."""
    try:
        import torch
    except ImportError:
        raise WorkloadError(TORCH_MISSING) from None
    return torch


def _one_line(exc: BaseException) -> str:
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {shown(text, 300)}" if text else type(exc).__name__


@dataclass(frozen=True)
class TorchModel:
    """A PyTorch program as a JAX function: ``fn(weights, *inputs)``.

    Attributes:
        fn: The JAX function.
        weights: Parameter name -> its value (``numpy``) or ``jax.ShapeDtypeStruct`` (on ``meta``).
        inputs: The user inputs' ``jax.ShapeDtypeStruct``.
        on_meta: Whether any weight has no values.
    """

    fn: Callable[..., Any]
    weights: dict[str, Any]
    inputs: tuple[Any, ...]
    on_meta: bool
    #: The PyTorch source of each matrix op of the last trace, in order (filled by tracing ``fn``).
    origins: list[str] = field(default_factory=list)

    def shapes(self) -> tuple[Any, ...]:
        """Arguments for tracing: every weight and input as a ``jax.ShapeDtypeStruct``."""
        import jax

        structs = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in self.weights.items()}
        return (structs, *self.inputs)


def _struct(t: Any) -> Any:
    import jax

    from workloads._torch_ops import jax_dtype

    return jax.ShapeDtypeStruct(tuple(int(d) for d in t.shape), jax_dtype(t.dtype))


def _array(t: Any) -> Any:
    """A tensor's values as numpy (``float32`` for the float types numpy lacks), or its struct on ``meta``."""
    import numpy as np

    torch = import_torch()
    if t.device.type == _META:
        return _struct(t)
    t = t.detach().cpu()
    if t.is_floating_point():
        return t.to(torch.float32).numpy()
    if t.dtype == torch.int64:
        return t.to(torch.int32).numpy()
    return np.asarray(t.numpy())


def _module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    return path.replace("L['self'].", "").replace("L__self__.", "")


def _bind(node: Any, env: dict[Any, Any]) -> dict[str, Any]:
    """The node's arguments by the ATen schema's names (defaults filled in), nodes replaced by values."""
    torch = import_torch()

    def value(v: Any) -> Any:
        if isinstance(v, torch.fx.Node):
            return env[v]
        if isinstance(v, (list, tuple)):
            return type(v)(value(x) for x in v)
        return v

    out: dict[str, Any] = {}
    for i, arg in enumerate(node.target._schema.arguments):
        if i < len(node.args):
            out[arg.name] = value(node.args[i])
        elif arg.name in node.kwargs:
            out[arg.name] = value(node.kwargs[arg.name])
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


#: ATen ops lowered to matrix ops, with how many each issues (attention: the scores and the context).
_MATRIX_OPS = {"linear": 1, "matmul": 1, "mm": 1, "bmm": 1, "addmm": 1, "baddbmm": 1, "conv1d": 1, "conv2d": 1,
               "conv3d": 1, "convolution": 1, "_convolution": 1, "scaled_dot_product_attention": 2}


def _source(node: Any) -> str:
    """``"aten.<op> at file:line (function)"``: the node's op and the innermost frame of its stack trace
    outside PyTorch's own modules (the model's line calling ``nn.Linear``, not ``linear.py``)."""
    lines = [ln.strip() for ln in str(node.meta.get("stack_trace") or "").splitlines()]
    frames = [ln for ln in lines if ln.startswith("File ")]
    frames = [ln for ln in frames if f"{os.sep}torch{os.sep}" not in ln] or frames
    if not frames:
        return str(node.target)
    parts = frames[-1].split('"')
    where = parts[1] if len(parts) > 2 else "?"
    rest = parts[-1].replace(",", " ").split()
    line = rest[rest.index("line") + 1] if "line" in rest else "?"
    fn = rest[rest.index("in") + 1] if "in" in rest else "?"
    return f"{node.target} at {where}:{line} ({fn})"


class _Interpreter:
    def __init__(self, root: Any, folded: dict[Any, tuple[str, str]]) -> None:
        self.root = root  # the exported program's GraphModule (sub-graphs of higher-order ops hang off it)
        self.folded = folded  # batch-norm node -> (scale weight name, shift weight name)
        #: Each matrix op the last run issued, in order: ``"aten.linear.default at model.py:12 (forward)"``.
        self.origins: list[str] = []

    def run(self, graph: Any, env: dict[Any, Any], weights: dict[str, Any], only: set[Any] | None = None) -> list[Any]:
        """Run ``graph``'s nodes (those in ``only``, when given; a node already in ``env`` keeps its value)."""
        import jax

        from workloads._torch_ops import HANDLERS, UnsupportedTorchOp

        torch = import_torch()
        for node in graph.nodes:
            if node.op in ("placeholder",) or node in env or (only is not None and node not in only
                                                              and node.op != "output"):
                continue
            if node.op == "get_attr":
                env[node] = getattr(self.root, str(node.target))
                continue
            if node.op == "output":
                outs = node.args[0]
                return [env.get(o) if isinstance(o, torch.fx.Node) else o
                        for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
            target = node.target
            if target is operator.getitem:
                env[node] = env[node.args[0]][node.args[1]]
                continue
            path = _module_path(node)
            if isinstance(target, torch._ops.HigherOrderOperator):
                env[node] = self._higher(node, env, weights)
                continue
            if not isinstance(target, torch._ops.OpOverload):
                raise UnsupportedTorchOp(f"graph node {node.name} calls {shown(repr(target), 80)}, not an ATen op")
            name = target.overloadpacket.__name__
            handler = HANDLERS.get(name)
            if handler is None:
                raise UnsupportedTorchOp(f"ATen op {target} (node {node.name}{f' in {path}' if path else ''}) has no "
                                         "lowering; export the model to ONNX, or tell us which op")
            if node in self.folded:  # its statistics folded into a per-channel scale and shift
                scale, shift = self.folded[node]
                args = {"input": env[node.args[0]], "weight": weights[scale], "bias": weights[shift]}
            else:
                args = _bind(node, env)
            if name in _MATRIX_OPS:
                self.origins.extend([_source(node)] * _MATRIX_OPS[name])
            try:
                if path:
                    with jax.named_scope(path):
                        env[node] = handler(args)
                else:
                    env[node] = handler(args)
            except WorkloadError:
                raise
            except Exception as exc:  # a shape the handler does not take
                raise UnsupportedTorchOp(f"ATen op {target} (node {node.name}) failed to lower: "
                                         f"{_one_line(exc)}") from exc
        return []

    def _higher(self, node: Any, env: dict[Any, Any], weights: dict[str, Any]) -> Any:
        from workloads._torch_ops import UnsupportedTorchOp

        name = node.target.name()
        lead = {"wrap_with_set_grad_enabled": 1, "wrap_with_autocast": 4}.get(name)
        if lead is None:
            raise UnsupportedTorchOp(f"higher-order op {name} (node {node.name}) has no lowering")
        sub = getattr(self.root, str(node.args[lead].target))
        operands = [env[a] for a in node.args[lead + 1:]]
        inner = dict(zip([n for n in sub.graph.nodes if n.op == "placeholder"], operands, strict=True))
        return tuple(self.run(sub.graph, inner, weights))


def _fold_batch_norms(ep: Any, tensors: dict[Any, Any]) -> tuple[dict[Any, tuple[str, str]], dict[str, Any]]:
    """Eval-mode batch norms whose statistics are weights -> per-channel (scale, shift) weights."""
    import numpy as np

    folded: dict[Any, tuple[str, str]] = {}
    extra: dict[str, Any] = {}
    for node in ep.graph.nodes:
        if node.op != "call_function" or getattr(node.target, "overloadpacket", None) is None:
            continue
        if node.target.overloadpacket.__name__ not in _BN:
            continue
        w, b, mean, var = (node.args[i] if len(node.args) > i else None for i in (1, 2, 3, 4))
        eps = float(node.args[-1])
        if any(x is not None and x not in tensors for x in (w, b)) or mean not in tensors or var not in tensors:
            continue
        base = _module_path(node) or node.name
        vals: list[Any] = [tensors[x] if x is not None else None for x in (w, b, mean, var)]
        if any(v is not None and not isinstance(v, np.ndarray) for v in vals):  # on meta: shapes only
            channels = vals[2].shape
            scale, shift = _struct_like(channels), _struct_like(channels)
        else:
            wv, bv, mv, vv = vals
            scale = (wv if wv is not None else 1.0) / np.sqrt(vv + eps)
            shift = (bv if bv is not None else 0.0) - mv * scale
            scale, shift = scale.astype(np.float32), shift.astype(np.float32)
        extra[f"{base}.bn_scale"], extra[f"{base}.bn_shift"] = scale, shift
        folded[node] = (f"{base}.bn_scale", f"{base}.bn_shift")
    return folded, extra


def _struct_like(shape: tuple[int, ...]) -> Any:
    import jax
    import jax.numpy as jnp

    return jax.ShapeDtypeStruct(tuple(shape), jnp.float32)


def lower(ep: Any) -> TorchModel:
    """An ``ExportedProgram`` as a :class:`TorchModel` (see the module docstring).

    Raises:
        WorkloadError: an op, dtype or argument kind with no lowering (named).
    """
    import jax.numpy as jnp

    torch = import_torch()
    from torch.export.graph_signature import InputKind

    specs = ep.graph_signature.input_specs
    placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
    weights: dict[str, Any] = {}
    consts: dict[Any, Any] = {}
    params: dict[Any, str] = {}
    inputs: list[tuple[Any, Any]] = []  # (node, struct or constant value)
    tensors: dict[Any, Any] = {}
    for node, spec in zip(placeholders, specs, strict=True):
        if spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                inputs.append((node, _struct(val)))
            else:
                consts[node] = getattr(spec.arg, "value", val)
            continue
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            raise WorkloadError(f"exported program input {node.name} is a {spec.kind.name}, which is not lowered")
        t = ep.state_dict.get(spec.target) if spec.target in ep.state_dict else ep.constants.get(spec.target)
        if t is None:
            raise WorkloadError(f"exported program input {node.name} ({spec.target}) has no tensor")
        arr = _array(t)
        tensors[node] = arr
        if spec.kind == InputKind.PARAMETER or t.device.type == _META:
            weights[str(spec.target)] = arr
            params[node] = str(spec.target)
        else:
            consts[node] = arr
    folded, extra = _fold_batch_norms(ep, tensors)
    bn_inputs = {a for n in folded for a in n.args[1:5] if a is not None}
    for node in list(params):
        if node in bn_inputs and all(u in folded for u in node.users):
            weights.pop(params.pop(node))
    for node in list(consts):
        if node in bn_inputs and all(u in folded for u in node.users):
            consts.pop(node)
    weights.update(extra)
    interp = _Interpreter(ep.graph_module, folded)
    masks = _constant_masks(ep, interp, consts, weights)
    needed = _needed(ep.graph, set(masks))
    user_outputs = [i for i, s in enumerate(ep.graph_signature.output_specs) if s.kind.name == "USER_OUTPUT"]

    def fn(w: dict[str, Any], *args: Any) -> Any:
        env: dict[Any, Any] = {n: jnp.asarray(v) if hasattr(v, "shape") else v for n, v in consts.items()}
        env.update({n: w[name] for n, name in params.items()})
        env.update({n: a for (n, _), a in zip(inputs, args, strict=True)})
        env.update({n: jnp.asarray(v) for n, v in masks.items()})
        interp.origins.clear()
        outs = interp.run(ep.graph, env, w, needed)
        picked = [outs[i] for i in user_outputs if i < len(outs)]
        return picked[0] if len(picked) == 1 else tuple(picked)

    on_meta = any(not hasattr(v, "__array__") for v in weights.values())
    return TorchModel(fn, weights, tuple(s for _, s in inputs), on_meta, interp.origins)


def _args_of(node: Any) -> list[Any]:
    torch = import_torch()
    out: list[Any] = []
    todo = [*node.args, *node.kwargs.values()]
    while todo:
        a = todo.pop()
        if isinstance(a, torch.fx.Node):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            todo.extend(a)
    return out


def _constant_masks(ep: Any, interp: _Interpreter, consts: dict[Any, Any], weights: dict[str, Any]) -> dict[Any, Any]:
    """Boolean tensors the program computes from no input (an attention mask built from positions),
    evaluated now: the trace sees them as constants, as a JAX user's ``jnp.tril`` mask is, and the
    index arithmetic that built them is not the model's work."""
    import numpy as np

    torch = import_torch()
    const: set[Any] = set(consts)
    for node in ep.graph.nodes:
        if node.op != "call_function" or isinstance(node.target, torch._ops.HigherOrderOperator):
            continue
        if getattr(node.target, "overloadpacket", None) is None and node.target is not operator.getitem:
            continue
        if all(a in const for a in _args_of(node)):
            const.add(node)
    frontier = []
    for node in const:
        val = node.meta.get("val")
        if (node not in consts and isinstance(val, torch.Tensor) and val.dtype == torch.bool
                and any(u not in const for u in node.users)):
            frontier.append(node)
    if not frontier:
        return {}
    env: dict[Any, Any] = dict(consts)
    try:
        interp.run(ep.graph, env, weights, _needed(ep.graph, set(consts), frontier))
    except Exception:  # noqa: BLE001  # left to the trace, which names what fails
        return {}
    return {n: np.asarray(env[n]) for n in frontier if n in env}


def _needed(graph: Any, stops: set[Any], roots: list[Any] | None = None) -> set[Any]:
    """The nodes the outputs (or ``roots``) read, not looking past ``stops``."""
    todo = list(roots) if roots is not None else [n for n in graph.nodes if n.op == "output"]
    seen: set[Any] = set()
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if node not in stops:
            todo.extend(_args_of(node))
    return seen


def export(module: Any, args: tuple[Any, ...], label: str) -> Any:
    """``torch.export.export`` of ``module`` (put in eval mode) on ``args``.

    Raises:
        WorkloadError: the export failed (its first line).
    """
    torch = import_torch()
    module.eval()
    try:
        with torch.no_grad():
            return torch.export.export(module, tuple(args))
    except Exception as exc:  # torch.export raises many kinds
        raise WorkloadError(f"torch.export of {label} failed: {_one_line(exc)}") from exc


def lower_module(module: Any, args: tuple[Any, ...], label: str) -> TorchModel:
    """Export ``module`` on ``args`` and lower it (:func:`export`, :func:`lower`)."""
    return lower(export(module, args, label))


def torch_pair(fn: Any, args: tuple[Any, ...], spec: str) -> tuple[Any, tuple[Any, ...]] | None:
    """``(module, example_args)`` when ``fn`` is a PyTorch model factory, else ``None``.

    A factory takes no arguments and returns a PyTorch ``nn.Module`` with a tuple of example
    tensors (or a single tensor). It is only called when the user's module imported ``torch``.

    Raises:
        WorkloadError: the factory raised, or returned a module without example arguments.
    """
    if args or "torch" not in sys.modules:
        return None
    torch = sys.modules["torch"]
    try:
        out = fn()
    except Exception as exc:  # the user's code may raise anything
        raise WorkloadError(f"workload {spec!r}: calling it raised {_one_line(exc)}") from exc
    if isinstance(out, torch.nn.Module):
        raise WorkloadError(f"workload {spec!r} returned a PyTorch module without example inputs: return "
                            "(module, example_args)")
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.nn.Module)):
        return None
    example = out[1] if isinstance(out[1], tuple) else (tuple(out[1]) if isinstance(out[1], list) else (out[1],))
    return out[0], example


def load_pt2(path: str, what: str) -> TorchModel:
    """The program of a ``torch.export.save`` file, lowered.

    Raises:
        WorkloadError: torch missing, or the file is not an exported program.
    """
    torch = import_torch()
    try:
        ep = torch.export.load(path)
    except Exception as exc:  # a zip of something else, a pickle, ...
        raise WorkloadError(f"{what} is not a program saved by torch.export.save ({_one_line(exc)})") from exc
    return lower(ep)


def trace_torch(model: TorchModel, *, name: str, description: str = "", source: str = "torch") -> Any:
    """The :class:`~workloads.ops.Workload` of a lowered PyTorch program (traced from shapes only)."""
    from workloads._tracer import trace

    return trace(model.fn, *model.shapes(), name=name, description=description, source=source,
                 check_values=True, origins=model.origins)
