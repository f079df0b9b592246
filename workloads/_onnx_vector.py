"""ONNX nodes -> vector op records, and the nodes a matrix op's output stage absorbs.

The rule is the tracer's: work the accelerator's output stage does as a matrix op's result
leaves the array (the bias add, the requantisation's clamp, a ReLU or ReLU6) is that op's, and
the model charges it with the op. The builtins write such a ReLU as the requantisation's
``activation``, so it never becomes a record; an ONNX graph writes it as its own node. So a
node is *fused* into the output stage when it is:

* a ``Relu``, or a ``Clip`` whose bounds are constants (ReLU6 and any clamp);
* an ``Add`` of a constant (an initializer: the bias),

and its data input is the only use of a matrix op's output (``MatMul``, ``Gemm``, ``Conv``,
``ConvTranspose`` and their integer forms), or of a node fused into one (``Conv -> Add(bias) ->
Relu``). Fused nodes are neither records nor host work.

Every other ``Relu``, ``Add``, ``Gelu``, ``LayerNormalization``, ``Softmax``,
``MaxPool``, ``AveragePool``, ``GlobalMaxPool`` and ``GlobalAveragePool`` with known shapes
becomes a :class:`~workloads.vector_ops.VectorOp`. A 4-D activation of an ONNX graph is NCHW; the
accelerator holds activations NHWC (channels on the lanes, as the builtins' records have them),
so 4-D element-wise and pooling records carry NHWC shapes. A pool the integer reference does not
define (asymmetric padding, dilation, an average that leaves the padding out of its divisor)
stays counted by op type: host work, named.

A graph gives no quantisation, so the records take the integer parameters the builtins' int8 form
uses at the activation scale (:func:`workloads.vector_params.default_params`: a same-scale add,
a unit-scale softmax without a mask, the node's ``epsilon`` for LayerNorm). They set no cycle or
byte of the model; they fix what an RTL run of the op computes. So does a ``Clip`` no matrix op feeds (its bounds are
constants this import does not read, so it is not known to be a ReLU6).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

from accel_spec.errors import WorkloadError
from workloads.vector_ops import VectorOp
from workloads.vector_params import default_params

__all__ = ["FUSABLE", "fused_nodes", "vector_record"]

#: Matrix ops whose output stage can absorb a following bias add, clamp or ReLU.
MATRIX_OPS = frozenset({"MatMul", "MatMulInteger", "QLinearMatMul", "Gemm", "Conv", "ConvInteger", "QLinearConv",
                        "ConvTranspose"})
#: Node types an output stage can absorb.
FUSABLE = frozenset({"Relu", "Clip", "Add"})

_ELEMENTWISE = {"Add": "add", "Relu": "relu", "Gelu": "gelu"}
_ROWWISE = {"LayerNormalization": "layernorm", "Softmax": "softmax"}
_POOLS = {"MaxPool": "maxpool", "AveragePool": "avgpool", "GlobalMaxPool": "maxpool",
          "GlobalAveragePool": "avgpool"}


class NodeView(Protocol):
    """What this module reads of a decoded node (``workloads._onnx._Node``)."""

    node: Any
    op_type: str
    name: str
    origin: str
    attrs: dict[str, Any]
    shapes: Any


def fused_nodes(nodes: Iterable[Any], constants: Iterable[str]) -> set[int]:
    """Indices of the default-domain nodes a matrix op's output stage absorbs (the module's rule)."""
    nodes = list(nodes)
    constant = set(constants)
    uses: Counter[str] = Counter(name for node in nodes for name in node.input if name)
    fed_by_stage: set[str] = set()  # tensors a matrix op's output stage produces
    fused: set[int] = set()
    for index, node in enumerate(nodes):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type in MATRIX_OPS:
            fed_by_stage.update(node.output)
            continue
        if node.op_type not in FUSABLE or len(node.output) != 1:
            continue
        data = [name for name in node.input if name and name not in constant]
        if node.op_type == "Clip" and len(data) != 1:  # bounds given by a computed tensor
            continue
        if node.op_type == "Add" and len(node.input) != 2:
            continue
        if len(data) == 1 and data[0] in fed_by_stage and uses[data[0]] == 1:
            fused.add(index)
            fed_by_stage.update(node.output)
    return fused


def _known(dims: Any) -> list[int] | None:
    if not dims or not all(isinstance(d, int) and d > 0 for d in dims):
        return None
    return [int(d) for d in dims]


def _nhwc(dims: list[int]) -> list[int]:
    return [dims[0], *dims[2:], dims[1]] if len(dims) == 4 else dims


def _pool(nd: NodeView, kind: str, shape: list[int], out: list[int]) -> VectorOp | None:
    if len(shape) != 4 or len(out) != 4:
        return None
    if nd.op_type.startswith("Global"):
        window, strides, pads = shape[2:], [1, 1], [0, 0, 0, 0]
    else:
        window = list(nd.attrs.get("kernel_shape", ()))
        strides = list(nd.attrs.get("strides", [1, 1]))
        pads = list(nd.attrs.get("pads", [0, 0, 0, 0]))
        if (len(window) != 2 or len(strides) != 2 or len(pads) != 4 or nd.attrs.get("auto_pad", "NOTSET") != "NOTSET"
                or any(d != 1 for d in nd.attrs.get("dilations", [1, 1]))):
            return None
    if pads[0] != pads[2] or pads[1] != pads[3]:  # the reference pads both sides alike
        return None
    if kind == "avgpool" and any(pads) and not nd.attrs.get("count_include_pad", 0):
        return None  # the reference divides by the whole window
    params = (("window_h", window[0]), ("window_w", window[1]), ("stride_h", strides[0]), ("stride_w", strides[1]),
              ("pad_h", pads[0]), ("pad_w", pads[1]))
    return VectorOp(kind=kind, shape=tuple(_nhwc(shape)), out_shape=tuple(_nhwc(out)), params=params,
                    name=nd.name, origin=nd.origin)


def _params(kind: str, row: int, eps: float = 1e-5) -> tuple[tuple[str, int], ...]:
    try:
        return tuple(default_params(kind, row, eps).items())
    except WorkloadError:  # a row too long for the normaliser: no parameters, so evaluate names it host work
        return ()


def vector_record(nd: NodeView) -> VectorOp | None:
    """The :class:`VectorOp` of ``nd`` (``None``: not a vector kind, or its shapes are unknown, or a
    form the integer reference does not define; the node then stays counted by op type)."""
    op_type = nd.op_type
    if not nd.node.input or not nd.node.output:
        return None
    shape, out = _known(nd.shapes.get(nd.node.input[0])), _known(nd.shapes.get(nd.node.output[0]))
    if op_type in _POOLS:
        return _pool(nd, _POOLS[op_type], shape, out) if shape and out else None
    if op_type in _ELEMENTWISE:
        dims = out if op_type == "Add" else shape  # a broadcasting add: the output is the work
        if dims is None:
            return None
        kind = _ELEMENTWISE[op_type]
        return VectorOp(kind=kind, shape=tuple(_nhwc(dims)), params=_params(kind, dims[-1]), name=nd.name,
                        origin=nd.origin)
    if op_type in _ROWWISE and shape:
        kind = _ROWWISE[op_type]
        axis = int(nd.attrs.get("axis", -1)) % len(shape)
        if kind == "layernorm":  # LayerNormalization normalises axes axis..last: one row of their product
            shape = shape[:axis] + [math.prod(shape[axis:])]
        eps = float(nd.attrs.get("epsilon", 1e-5))
        return VectorOp(kind=kind, shape=tuple(shape), axis=axis, params=_params(kind, shape[axis], eps),
                        name=nd.name, origin=nd.origin)
    return None
