"""A builtin's options checked against its limits before anything is traced or allocated.

Each builtin lists the sizes its options decide, as arithmetic over the option names: its
largest tensors (elements), its output channels (the output stage's per-channel parameters are
host lists of that length), and its multiply-accumulates by part. Every size is checked
against its limit as soon as the options are known; the exact count of the traced workload is
still checked afterwards (:data:`workloads.ops.MAX_MACS`), these bounds only refuse early what
would otherwise take minutes and gigabytes to be refused.

Limits:

* a tensor at most :data:`MAX_ELEMENTS` = 2**32 elements (4 GiB of int8: the accelerator's
  DRAM address space is 32 bits);
* at most :data:`MAX_CHANNELS` = 2**20 output channels (a vocabulary-sized layer fits; 2**24 of them
  with the output stage take over 2 GB);
* at most :data:`workloads.ops.MAX_MACS` = 2**48 multiply-accumulates in any part.

Sizes of CNNs are upper bounds of their largest activation and their convolutions' work (per
pixel of the input); the transformer and MLP sizes are exact for the tensors named.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from accel_spec.errors import WorkloadError
from workloads.ops import MAX_MACS

__all__ = ["check_limits", "MAX_ELEMENTS", "MAX_CHANNELS", "SIZES"]

#: Most elements one tensor may have: 2**32 (4 GiB of int8, the 32-bit DRAM address space).
MAX_ELEMENTS = 2**32
#: Most output channels of one layer (its per-channel output-stage parameters are host lists).
MAX_CHANNELS = 2**20

_LIMITS = {
    "macs": (MAX_MACS, "(2**48) the model computes exactly", "multiply-accumulates"),
    "channels": (MAX_CHANNELS, "(2**20) a layer may have", "output channels"),
    "elements": (MAX_ELEMENTS, "(2**32) a tensor may have in the accelerator's 32-bit DRAM address space", "elements"),
}

_TRANSFORMER = (
    ("elements", "attention scores", "batch * heads * seq * (seq + kv)"),
    ("elements", "KV cache", "batch * (seq + kv) * d"),
    ("elements", "FFN activations", "batch * seq * ffn"),
    ("elements", "FFN weights", "layers * d * ffn"),
    ("channels", "FFN width", "ffn"),
    ("channels", "model width", "d"),
    ("macs", "projections", "layers * batch * seq * d * d * 4"),
    ("macs", "attention", "layers * batch * seq * (seq + kv) * d * 2"),
    ("macs", "FFN", "layers * batch * seq * d * ffn * 3"),
)

#: Builtin -> ``(limit kind, what, size over the options)``; constants stand for fixed shapes.
SIZES: Mapping[str, tuple[tuple[str, str, str], ...]] = {
    "gemm": (
        ("elements", "A", "batch * m * k"), ("elements", "B", "batch * k * n"), ("elements", "C", "batch * m * n"),
        ("channels", "output columns", "n"), ("macs", "the GEMM", "batch * m * k * n"),
    ),
    "mlp": (
        ("elements", "input", "batch * d_in"), ("elements", "first weights", "d_in * hidden"),
        ("elements", "hidden weights", "layers * hidden * hidden"), ("elements", "last weights", "hidden * d_out"),
        ("channels", "hidden width", "hidden"), ("channels", "output width", "d_out"),
        ("macs", "the layers", "batch * (d_in * hidden + layers * hidden * hidden + hidden * d_out)"),
    ),
    "resnet18": (
        ("elements", "first activation (64 channels at res/2)", "batch * 64 * res * res // 4"),
        ("elements", "classifier weights", "512 * classes"), ("channels", "classes", "classes"),
        ("macs", "the convolutions", "batch * res * res * 36000"), ("macs", "the classifier", "batch * 512 * classes"),
    ),
    "mobilenet_v2": (
        ("elements", "largest activation (96 channels at res/2)", "batch * 96 * res * res // 4"),
        ("elements", "classifier weights", "1280 * classes"), ("channels", "classes", "classes"),
        ("macs", "the convolutions", "batch * res * res * 6000"), ("macs", "the classifier", "batch * 1280 * classes"),
    ),
    "alexnet": (
        ("elements", "first activation (64 channels at res/4)", "batch * 64 * res * res // 16"),
        ("elements", "classifier weights", "4096 * classes"), ("channels", "classes", "classes"),
        ("macs", "the convolutions", "batch * res * res * 14200"), ("macs", "the classifier", "batch * 4096 * classes"),
    ),
    "bert_base": _TRANSFORMER,
    "llama_block": _TRANSFORMER,
    "llama_decode": _TRANSFORMER,
    "gpt2_decode": (
        ("elements", "KV cache", "layers * batch * (kv + 1) * 768 * 2"),
        ("elements", "attention scores", "batch * 12 * (kv + 1)"),
        ("macs", "attention", "layers * batch * (kv + 1) * 768 * 2"),
        ("macs", "the layers", "layers * batch * 768 * 768 * 12"),
    ),
    "dlrm_mlp": (
        ("elements", "dense input", "batch * dense"), ("elements", "first bottom weights", "dense * 512"),
        ("elements", "interaction", "batch * (tables + 1) * (tables + 1) * dim"),
        ("channels", "embedding width", "dim"),
        ("macs", "bottom MLP", "batch * dense * 512"),
        ("macs", "interaction", "batch * (tables + 1) * (tables + 1) * dim"),
    ),
}


def _value(node: ast.AST, settings: Mapping[str, int]) -> int:
    if isinstance(node, ast.Expression):
        return _value(node.body, settings)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return int(settings[node.id])
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, settings), _value(node.right, settings)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv):
            return left // right
    raise ValueError(f"size expression node {ast.dump(node)} is not supported")  # pragma: no cover - SIZES is ours


def _names(expression: str) -> list[str]:
    seen: list[str] = []
    for node in ast.walk(ast.parse(expression, mode="eval")):
        if isinstance(node, ast.Name) and node.id not in seen:
            seen.append(node.id)
    return seen


def check_limits(name: str, settings: Mapping[str, int]) -> None:
    """Refuse options of builtin ``name`` whose sizes pass a limit (module docstring), before any work.

    Raises:
        WorkloadError: one line naming the size, the options it comes from with their values, and the limit.
    """
    options = settings
    settings = {"layers": 1, "kv": 0, **settings}  # a builtin without these has one layer and no KV cache
    sizes = sorted(SIZES.get(name, ()), key=lambda item: list(_LIMITS).index(item[0]))  # MACs first
    for kind, what, expression in sizes:
        names = _names(expression)
        if any(n not in settings for n in names):
            continue
        size = _value(ast.parse(expression, mode="eval"), settings)
        limit, limit_text, unit = _LIMITS[kind]
        if size > limit:
            given = ", ".join(f"{n}={settings[n]:,}" for n in names if n in options)
            if "kv" not in options:  # bert_base: no KV cache
                expression = expression.replace("(seq + kv)", "seq")
            raise WorkloadError(
                f"{name} options {given}: {what} = {expression} = {size:,} {unit}, beyond the {limit:,} "
                f"{limit_text}; make them smaller"
            )
