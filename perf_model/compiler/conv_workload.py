"""A whole CNN workload as one conv network: its convs, the vector ops on their links, the residual
adds' operands and the downsamples' inputs, as ``compile_conv_network`` takes them.

A workload is one conv network when every matrix op is a requantised convolution (a requantised
one-instance GEMM that reads a global pooling's ``(m, 1, 1, k)`` output, a CNN's classifier, is
taken as the 1x1 conv over a 1x1 map it is: :func:`after_global_pool`), every vector op follows a
matrix op and runs once, each is a kind a conv link carries
(``perf_model.compiler.conv_network.CONV_LINK_KINDS``), and each conv reads the tensor before it:
the previous conv's output after its link's ops, or, for a ResNet downsample, its block's input.

Blocks: a block starts at the workload's first op and after every ``add`` or pooling; a residual
``add``'s second operand is the block's earliest tensor of the add's shape (the block's input; in
MobileNetV2, whose blocks without a residual do not end in an add, the input of the last block,
the first tensor of that shape since the previous add).
A downsample is a conv that does not read the previous output (``a_from_previous`` false), has an
``add`` on its link and reads the NHWC shape of its block's input: it reads that input (``inputs``),
and its add's operand is the block's last conv's output.
"""

from __future__ import annotations

from dataclasses import dataclass

from accel_spec.errors import ModelError
from accel_spec.vector_isa import POOL_KINDS
from perf_model.compiler.conv_network import CONV_LINK_KINDS, pooled_shape, tensor_shapes
from workloads.ops import Conv2d, Gemm, Workload
from workloads.vector_ops import VectorOp

__all__ = ["ConvNetworkSpec", "conv_network_spec", "after_global_pool"]


@dataclass(frozen=True)
class ConvNetworkSpec:
    """``compile_conv_network``'s arguments for a whole workload."""

    convs: tuple[Conv2d, ...]
    links: tuple[tuple[VectorOp, ...], ...]
    skips: tuple[int | None, ...]
    inputs: tuple[int, ...]


def after_global_pool(op: object, last: VectorOp | None) -> object:
    """``op`` as a 1x1 conv over a 1x1 map when it is a requantised one-instance GEMM reading the
    ``(m, 1, 1, k)`` output of pooling ``last``; any other op as it is."""
    if not isinstance(op, Gemm) or op.requant is None or op.batch != 1 or last is None or last.kind not in POOL_KINDS:
        return op
    try:
        shape = pooled_shape(last)
    except ModelError:
        return op
    if shape != (op.m, 1, 1, op.k):
        return op
    return Conv2d(n=op.m, h=1, w=1, c_in=op.k, c_out=op.n, kh=1, kw=1, name=op.name, requant=op.requant)


def _nhwc_in(op: Conv2d) -> tuple[int, int, int, int]:
    return (op.n, op.h, op.w, op.c_in)


def conv_network_spec(workload: Workload) -> ConvNetworkSpec | str:
    """The whole ``workload`` as one conv network (module docstring), or why it is not one (one line)."""
    ops, vector_ops = workload.ops, workload.vector_ops
    after = workload.vector_after or (len(ops),) * len(vector_ops)
    counts = workload.vector_counts or (1,) * len(vector_ops)
    if not ops:
        return "the workload has no matrix op"
    links: list[list[VectorOp]] = [[] for _ in ops]
    block = [0] * len(ops)  # per op, the first conv of the block of the add on its link
    start = 0
    for op, where, count in zip(vector_ops, after, counts, strict=True):
        label = op.name or op.kind
        if where < 1:
            return f"vector op {label} comes before the first matrix op"
        if count != 1:
            return f"vector op {label} runs {count} times"
        if op.kind not in CONV_LINK_KINDS or (op.kind == "silu" and op.param("gated", 0)):
            return f"vector op {label} ({op.kind}) is not an op a conv link carries"
        links[where - 1].append(op)
        if op.kind == "add":
            block[where - 1] = start
            start = where
        elif op.kind in POOL_KINDS:
            start = where
    convs: list[Conv2d] = []
    for i, matrix in enumerate(ops):
        conv = after_global_pool(matrix, links[i - 1][-1] if i and links[i - 1] else None)
        if not isinstance(conv, Conv2d) or conv.requant is None:
            return f"op {getattr(conv, 'name', '') or i} is not a requantised convolution"
        convs.append(conv)
    try:  # tensor t: the network's input, then conv t - 1's output after its link
        shapes = tensor_shapes(convs, links)
    except ModelError as exc:
        return str(exc)
    inputs: list[int] = []
    skips: list[int | None] = []
    for k, conv in enumerate(convs):
        b = block[k]
        has_add = any(o.kind == "add" for o in links[k])
        block_input = inputs[b] if b < k else k
        if has_add and k >= 2 and b < k - 1 and not conv.a_from_previous \
                and shapes[block_input] == _nhwc_in(conv):  # a downsample: the block's input, its add the last conv's
            inputs.append(block_input)
            skips.append(k)
            continue
        inputs.append(k)
        if not has_add:
            skips.append(None)
            continue
        # the add's operand: the block's earliest tensor of its shape (its input; in a block without a
        # residual before it, as MobileNetV2's, the input of the block that has one)
        out = (conv.n, conv.out_h, conv.out_w, conv.c_out)
        operand = next((inputs[j] for j in range(b, k + 1) if shapes[inputs[j]] == out), None)
        if operand is None:
            shape = "x".join(map(str, out))
            return f"the add after op {conv.name or k} has no operand of its {shape} shape in its block"
        skips.append(operand)
    return ConvNetworkSpec(tuple(convs), tuple(tuple(link) for link in links), tuple(skips), tuple(inputs))
