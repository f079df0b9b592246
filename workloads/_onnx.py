"""ONNX graphs -> op records, with shapes from ``onnx.shape_inference`` (weights never read).

The model is loaded with ``load_external_data=False``, so a graph whose initializers live in
an absent external file (or were stripped) loads: only shapes are needed, and an initializer
carries its dims without its data. Before shape inference the graph inputs get concrete
sizes: ``batch=N`` sets dimension 0 of every graph input, ``NAME=N`` a symbolic dimension
``NAME`` (for example ``model.onnx:batch=8`` or ``model.onnx:seq_len=128``). A symbolic
dimension left without a value is an error that names it.

Lowering (default domain, opsets :data:`MIN_OPSET` to the installed onnx's newest):

* ``MatMul`` / ``MatMulInteger`` / ``QLinearMatMul``: numpy ``matmul`` semantics. A 2-D B (a
  weight) folds A's leading dims into ``m``; batch dims on B broadcast against A's and give
  ``batch``. A 1-D operand gets ``m = 1`` / ``n = 1``.
* ``Gemm``: ``transA`` / ``transB`` pick the layout of A (M x K) and B (K x N).
* ``Conv`` / ``ConvInteger`` / ``QLinearConv``: ``group``, ``strides``, ``dilations``, ``pads``
  and ``auto_pad`` (``SAME_UPPER``, ``SAME_LOWER``, ``VALID``); 1-D and 2-D give ``Conv2d``,
  3-D the im2col ``Gemm`` (as the jaxpr tracer does).
* ``ConvTranspose``: the equivalent direct convolution on the zero-stuffed input (input
  dilation = stride, padding ``dilation * (k - 1) - pad``, plus ``output_padding``), which is
  how JAX's ``conv_transpose`` lowers; ``output_shape`` and ``auto_pad`` fix the pads as the
  ONNX spec says.

Ops that do matrix work this cannot lower (``Einsum``, ``LSTM``, ``GRU``, ``RNN``,
``Attention``, custom-domain ops such as ``com.microsoft.FusedConv``, and control flow holding
any of the above) are errors naming the op and the node. A bias add, clamp or ReLU right after a
matrix op is that op's output stage's work; ``Add``, ``Relu``, ``Gelu``, ``LayerNormalization``,
``Softmax`` and the pools elsewhere become :class:`~workloads.vector_ops.VectorOp` records (kind,
shape, axis, window): :mod:`workloads._onnx_vector` states the rules. Every other node is
counted in ``other_primitives`` by op type. Op names
are the node names; ``origin`` is ``"node #i 'name' (OpType)"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from accel_spec.errors import WorkloadError
from accel_spec.text import shown
from workloads._lowering import Collected, conv_op, dot_op, to_workload
from workloads._onnx_vector import fused_nodes, vector_record
from workloads._op_limits import check_op_count
from workloads.ops import Gemm, Op, Workload

__all__ = ["load_onnx", "MIN_OPSET"]

#: Oldest default-domain opset read (opset 7 settled Gemm's and MatMul's broadcasting rules).
MIN_OPSET = 7

_MATMULS = {"MatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3)}  # op -> (A, B) input index
_CONVS = {"Conv": (0, 1), "ConvInteger": (0, 1), "QLinearConv": (0, 3)}  # op -> (X, W) input index
_UNSUPPORTED = ("Einsum", "LSTM", "GRU", "RNN", "Attention", "MultiHeadAttention", "DeformConv")
#: A custom-domain op (com.microsoft's FusedConv, ...) with one of these in its name does matrix work.
_MATRIX_WORDS = ("MatMul", "Conv", "Gemm", "Attention")
_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_SUBGRAPH_OPS = (*_MATMULS, *_CONVS, "Gemm", "ConvTranspose", *_UNSUPPORTED)


def _one_line(exc: BaseException) -> str:
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {shown(text)}" if text else type(exc).__name__


def _q(text: object) -> str:
    """A name from the file, quoted for a message (escaped and cut by :func:`accel_spec.text.shown`)."""
    return shown(repr(text), 80)


def _read(path: Path, what: str) -> Any:
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise WorkloadError(f"{what} is not an ONNX model ({_one_line(exc)})") from exc
    if not model.HasField("graph") or not model.graph.node:
        raise WorkloadError(f"{what} is not an ONNX model with a graph (it has no nodes)")
    return model


def _check_opset(model: Any, what: str) -> None:
    import onnx

    newest = onnx.defs.onnx_opset_version()
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx") and not MIN_OPSET <= entry.version <= newest:
            raise WorkloadError(f"{what} uses ONNX opset {entry.version}; supported opsets are "
                                f"{MIN_OPSET} to {newest} (convert it with onnx.version_converter)")


def _set_input_dims(model: Any, options: Mapping[str, int], what: str) -> None:
    """Give every graph input concrete dims from ``options`` (``batch`` and symbolic names)."""
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    symbols: set[str] = set()
    for value in graph.input:
        if value.name in weights or not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                symbols.add(dim.dim_param)
    unknown = sorted(set(options) - symbols - {"batch"})
    if unknown:
        named = shown(", ".join(sorted(symbols)), 200) or "none"
        raise WorkloadError(f"{what} has no symbolic dimension {_q(unknown[0])}; give batch=SIZE or one of its "
                            f"symbolic dimensions ({named})")
    for value in graph.input:
        if value.name in weights or not value.type.HasField("tensor_type"):
            continue
        for i, dim in enumerate(value.type.tensor_type.shape.dim):
            if i == 0 and "batch" in options:
                dim.dim_value = options["batch"]
            elif dim.HasField("dim_param"):
                if dim.dim_param not in options:
                    alt = " (or batch=SIZE)" if i == 0 else ""
                    raise WorkloadError(
                        f"{what}: input {_q(value.name)} dimension {i} is symbolic ({_q(dim.dim_param)}) and has "
                        f"no value; give its size: {what}:{shown(dim.dim_param, 40)}=SIZE{alt}")
                dim.dim_value = options[dim.dim_param]
            elif not dim.HasField("dim_value"):
                how = f"give it with {what}:batch=SIZE" if i == 0 else "and no name to set it by"
                raise WorkloadError(f"{what}: input {_q(value.name)} dimension {i} has no size; {how}")


def _shapes(model: Any) -> dict[str, list[int | str | None]]:
    """Tensor name -> dims (int, a symbolic name, or ``None`` unknown) after shape inference."""
    graph = model.graph
    shapes: dict[str, list[int | str | None]] = {t.name: [int(d) for d in t.dims] for t in graph.initializer}
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not tensor.HasField("shape"):
            continue
        shapes[value.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                              for d in tensor.shape.dim]
    for node in graph.node:  # Constant nodes: shapes of their value tensors
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and node.output:
                    shapes.setdefault(node.output[0], [int(d) for d in attr.t.dims])
    return shapes


class _Node:
    """One node with its attributes decoded and its input shapes checked."""

    def __init__(self, node: Any, index: int, shapes: Mapping[str, list[int | str | None]], what: str) -> None:
        import onnx

        self.node = node
        self.op_type = node.op_type
        self.name = node.name or f"{shown(node.op_type, 40).lower()}{index}"
        label = f" {_q(node.name)}" if node.name else ""
        self.origin = f"node #{index}{label} ({shown(node.op_type, 40)})"
        self.where = f"{what}: {self.origin}"
        self.shapes = shapes
        self.attrs: dict[str, Any] = {}
        for attr in node.attribute:
            value = onnx.helper.get_attribute_value(attr)
            self.attrs[attr.name] = value.decode() if isinstance(value, bytes) else value

    def shape(self, index: int) -> list[int]:
        if index >= len(self.node.input) or not self.node.input[index]:
            raise WorkloadError(f"{self.where} has no input {index}")
        tensor = self.node.input[index]
        dims = self.shapes.get(tensor)
        if dims is None:
            raise WorkloadError(f"{self.where}: the shape of input {_q(tensor)} is unknown after shape inference "
                                "(a Reshape or Expand whose target shape is stripped or external data leaves "
                                "it unknown: keep those small shape tensors in the file)")
        sizes = []
        for i, d in enumerate(dims):
            if not isinstance(d, int):
                hint = f"symbolic ({_q(d)}): give its size as :{shown(d, 40)}=SIZE" if isinstance(d, str) else "unknown"
                raise WorkloadError(f"{self.where}: input {_q(tensor)} dimension {i} is {hint}")
            sizes.append(d)
        return sizes

    def ints(self, key: str, default: Sequence[int], length: int | None = None) -> list[int]:
        """Attribute ``key``, a list of integers (``length`` of them if given; ``default`` when absent)."""
        value = self.attrs.get(key, default)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
            raise WorkloadError(f"{self.where}: attribute {key} must be a list of integers, not {_q(value)}")
        if length is not None and len(value) != length:
            raise WorkloadError(f"{self.where}: attribute {key} must hold {length} integers, not {len(value)}")
        return [int(v) for v in value]

    def pads(self, rank: int) -> list[tuple[int, int]]:
        """The explicit ``pads`` (begin values, then end values) as ``(begin, end)`` per spatial axis."""
        flat = self.ints("pads", [0] * (2 * rank), 2 * rank)
        return list(zip(flat[:rank], flat[rank:], strict=True))

    def integer(self, key: str, default: int) -> int:
        """Attribute ``key``, an integer (``default`` when absent)."""
        value = self.attrs.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise WorkloadError(f"{self.where}: attribute {key} must be an integer, not {_q(value)}")
        return value

    def output_spatial(self) -> list[int] | None:
        dims = self.shapes.get(self.node.output[0]) if self.node.output else None
        sizes = [d for d in dims or () if isinstance(d, int) and d > 0]
        if dims is None or len(sizes) != len(dims):
            return None
        return sizes[2:]


def _matmul(nd: _Node, a_index: int, b_index: int) -> Gemm | None:
    import numpy as np

    a, b = nd.shape(a_index), nd.shape(b_index)
    if not a or not b:
        raise WorkloadError(f"{nd.where}: MatMul operands must have at least one dimension, not {a} and {b}")
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise WorkloadError(f"{nd.where}: MatMul contraction sizes differ: A {a} and B {b}")
    if len(b2) == 2 or math.prod(b2[:-2]) == 1:  # shared weights: A's leading dims are rows
        return dot_op(a2, b2[-2:], [len(a2) - 1], [0], name=nd.name, origin=nd.origin)
    try:
        batch_shape = np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2]))
    except ValueError:
        raise WorkloadError(f"{nd.where}: MatMul batch dims of A {a} and B {b} do not broadcast") from None
    batch = math.prod(batch_shape)
    if 0 in (batch, a2[-2], a2[-1], b2[-1]):
        return None
    return Gemm(m=a2[-2], k=a2[-1], n=b2[-1], batch=batch, name=nd.name, origin=nd.origin)


def _gemm(nd: _Node) -> Gemm | None:
    a, b = nd.shape(0), nd.shape(1)
    if len(a) != 2 or len(b) != 2:
        raise WorkloadError(f"{nd.where}: Gemm operands must be 2-D, not {a} and {b}")
    a_contract = 0 if nd.integer("transA", 0) else 1
    b_contract = 1 if nd.integer("transB", 0) else 0
    if a[a_contract] != b[b_contract]:
        raise WorkloadError(f"{nd.where}: Gemm contraction sizes differ: A {a} (transA={1 - a_contract}) and "
                            f"B {b} (transB={b_contract})")
    return dot_op(a, b, [a_contract], [b_contract], name=nd.name, origin=nd.origin)


def _same_pads(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dil: Sequence[int],
               upper: bool) -> list[tuple[int, int]]:
    pads = []
    for size, k, s, d in zip(sizes, kernel, strides, dil, strict=True):
        total = max((math.ceil(size / s) - 1) * s + d * (k - 1) + 1 - size, 0)
        small = total // 2
        pads.append((small, total - small) if upper else (total - small, small))
    return pads


def _conv(nd: _Node, x_index: int, w_index: int) -> Op | None:
    x, w = nd.shape(x_index), nd.shape(w_index)
    rank = len(x) - 2
    if rank < 1 or len(w) != len(x):
        raise WorkloadError(f"{nd.where}: Conv input {x} and weight {w} must both be N x C x spatial...")
    kernel = nd.ints("kernel_shape", w[2:], rank)
    strides, dil = nd.ints("strides", [1] * rank, rank), nd.ints("dilations", [1] * rank, rank)
    auto = nd.attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(x[2:], kernel, strides, dil, auto == "SAME_UPPER")
    elif auto == "VALID":
        pads = [(0, 0)] * rank
    elif auto == "NOTSET":
        pads = nd.pads(rank)
    else:
        raise WorkloadError(f"{nd.where}: auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, not {_q(auto)}")
    groups = nd.integer("group", 1)
    return _checked(nd, conv_op(n=x[0], c_in=x[1], c_out=w[0], spatial=x[2:], kernel=kernel, strides=strides,
                                padding=pads, rhs_dilation=dil, groups=groups, name=nd.name, origin=nd.origin))


def _conv_transpose(nd: _Node) -> Op | None:
    x, w = nd.shape(0), nd.shape(1)
    rank = len(x) - 2
    if rank < 1 or len(w) != len(x):
        raise WorkloadError(f"{nd.where}: ConvTranspose input {x} and weight {w} must both be N x C x spatial...")
    groups = nd.integer("group", 1)
    kernel = nd.ints("kernel_shape", w[2:], rank)
    strides, dil = nd.ints("strides", [1] * rank, rank), nd.ints("dilations", [1] * rank, rank)
    out_pad = nd.ints("output_padding", [0] * rank, rank)
    auto = nd.attrs.get("auto_pad", "NOTSET")
    if auto not in _AUTO_PADS:
        raise WorkloadError(f"{nd.where}: auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, not {_q(auto)}")
    target = nd.ints("output_shape", [])[-rank:] if "output_shape" in nd.attrs else None
    if target is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [size * s for size, s in zip(x[2:], strides, strict=True)]
    if target is not None:
        pads = []
        for size, k, s, d, op, t in zip(x[2:], kernel, strides, dil, out_pad, target, strict=True):
            total = s * (size - 1) + op + d * (k - 1) + 1 - t
            half = total // 2
            pads.append((half, total - half) if auto == "SAME_UPPER" else (total - half, half))
    elif auto == "VALID":
        pads = [(0, 0)] * rank
    else:
        pads = nd.pads(rank)
    padding = [(d * (k - 1) - lo, d * (k - 1) - hi + op)
               for d, k, (lo, hi), op in zip(dil, kernel, pads, out_pad, strict=True)]
    return _checked(nd, conv_op(n=x[0], c_in=x[1], c_out=w[1] * groups, spatial=x[2:], kernel=kernel,
                                strides=[1] * rank, padding=padding, lhs_dilation=strides, rhs_dilation=dil,
                                groups=groups, name=nd.name, origin=nd.origin))


def _checked(nd: _Node, op: Op | None) -> Op | None:
    """``op``, after checking its output size against what shape inference found (when it found one)."""
    inferred = nd.output_spatial()
    if op is None or inferred is None or op.kind != "conv2d" or len(inferred) > 2:
        return op
    ours = [op.out_h, op.out_w][:len(inferred)]  # type: ignore[union-attr]
    if ours != inferred:
        raise WorkloadError(f"{nd.where}: output spatial size {inferred} (shape inference) differs from "
                            f"{ours} computed from its attributes")
    return op


def _subgraph_ops(node: Any) -> list[str]:
    """Matrix op types inside the subgraphs (If / Loop / Scan bodies) of ``node``."""
    found = []
    for attr in node.attribute:
        for graph in [attr.g] if attr.HasField("g") else list(attr.graphs):
            for inner in graph.node:
                if inner.op_type in _SUBGRAPH_OPS:
                    found.append(inner.op_type)
                found.extend(_subgraph_ops(inner))
    return found


def _lowering(op_type: str) -> Callable[[_Node], Op | None] | None:
    """How a default-domain node of ``op_type`` becomes an op record, or ``None`` (not a matrix op)."""
    if op_type in _MATMULS:
        return lambda nd: _matmul(nd, *_MATMULS[op_type])
    if op_type in _CONVS:
        return lambda nd: _conv(nd, *_CONVS[op_type])
    return {"Gemm": _gemm, "ConvTranspose": _conv_transpose}.get(op_type)


def _walk(model: Any, shapes: Mapping[str, list[int | str | None]], what: str) -> Collected:
    out = Collected()
    constants = [t.name for t in model.graph.initializer]
    constants += [name for node in model.graph.node if node.op_type == "Constant" for name in node.output]
    fused = fused_nodes(model.graph.node, constants)
    for index, node in enumerate(model.graph.node):
        op_type = node.op_type
        default_domain = node.domain in ("", "ai.onnx")
        if index in fused:  # a matrix op's output stage does it (workloads._onnx_vector)
            continue
        nd = _Node(node, index, shapes, what)
        lower = _lowering(op_type) if default_domain else None
        if lower is not None:
            try:
                op = lower(nd)
            except WorkloadError as exc:  # an op record's own rule: say which node broke it
                text = str(exc)
                raise WorkloadError(text if text.startswith(what) else f"{nd.where}: {text}") from None
            out.add(op, 1, op_type)
        elif op_type in _UNSUPPORTED or (not default_domain and any(w in op_type for w in _MATRIX_WORDS)):
            domain = "" if default_domain else f" of domain {shown(node.domain, 40)}"
            raise WorkloadError(f"{nd.where}: op {shown(op_type, 40)}{domain} is not supported (only MatMul, Gemm, "
                                "Conv and ConvTranspose lower to the array); rewrite it as MatMul/Conv before export")
        else:
            inner = _subgraph_ops(node)
            if inner:
                raise WorkloadError(f"{nd.where}: control flow holding {shown(inner[0], 40)} is not supported; "
                                    "export the model unrolled (static loops, no If)")
            vector = vector_record(nd) if default_domain else None
            if vector is not None:
                out.add_vector(vector, 1)
            else:
                out.others[op_type if default_domain else f"{node.domain}.{op_type}"] += 1
    return out


def load_onnx(path: Path, options: Mapping[str, int], *, name: str, what: str) -> Workload:
    """The :class:`Workload` of an ONNX file.

    Args:
        path: The ``.onnx`` file (external data, if any, is not read).
        options: ``batch`` (dimension 0 of every graph input) and values of symbolic dims.
        name: The workload's name (the spec).
        what: How errors name the input (the path as the user gave it).

    Raises:
        WorkloadError: not ONNX, an unsupported opset or op (named with its node), a symbolic
            dimension without a value, an option naming no symbolic dimension, failed shape
            inference, or no matmul or convolution.
    """
    import onnx

    model = _read(path, what)
    check_op_count(len(model.graph.node), what, "nodes")  # before shape inference and the walk
    _check_opset(model, what)
    _set_input_dims(model, options, what)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=True, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError, ValidationError, ...
        raise WorkloadError(f"{what}: ONNX shape inference failed: {_one_line(exc)}") from exc
    found = _walk(inferred, _shapes(inferred), what)
    producer = f" from {shown(model.producer_name, 60)}" if model.producer_name else ""
    return to_workload(found, name=name, description=f"ONNX graph {shown(model.graph.name or what)}{producer}",
                       source="onnx", looked_for="MatMul, Gemm, Conv, ConvTranspose")
