"""Workloads: the op records (:mod:`workloads.ops`, :mod:`workloads.vector_ops`), the jaxpr tracer,
the builtin JAX models.

Importing this package (or ``workloads.ops``) does not import JAX: the op records are plain
dataclasses the performance model uses. The tracer, the builtins, :func:`resolve` and
:func:`reference` load JAX on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from workloads.ops import VECTOR_KINDS, Conv2d, Gemm, Op, Requant, VectorOp, Workload, op_kind

__all__ = [
    "Gemm",
    "Conv2d",
    "Op",
    "VectorOp",
    "VECTOR_KINDS",
    "Workload",
    "op_kind",
    "Requant",
    "output_stage",
    "derived_requant",
    "chained_references",
    "conv_nhwc_reference",
    "narrow_outputs",
    "float_outputs",
    "float_result",
    "trace",
    "resolve",
    "builtin_names",
    "builtin_descriptions",
    "builtin_options",
    "builtin_settings",
    "builtin_model",
    "Model",
    "with_example_args",
    "reference",
    "Reference",
    "chain_link",
    "channel_start",
    "int_vector_op",
    "rope_tables",
    "rope_op_tables",
    "rope_op_rows",
]

# Public names provided by modules that import JAX, loaded on first attribute access.
_LAZY = {
    "trace": "workloads._tracer",
    "resolve": "workloads._registry",
    "builtin_names": "workloads._registry",
    "builtin_descriptions": "workloads._registry",
    "builtin_options": "workloads._registry",
    "builtin_settings": "workloads._registry",
    "builtin_model": "workloads._registry",
    "Model": "workloads._model",
    "with_example_args": "workloads._user",
    "reference": "workloads._reference",
    "chained_references": "workloads._reference",
    "conv_nhwc_reference": "workloads._reference",
    "narrow_outputs": "workloads._reference",
    "float_outputs": "workloads._float_reference",
    "float_result": "workloads._float_reference",
    "output_stage": "workloads._requant",
    "derived_requant": "workloads._requant",
    "Reference": "workloads._reference",
    "chain_link": "workloads._reference",
    "channel_start": "workloads._reference",
    "int_vector_op": "workloads._int_ops:_run",  # one integer vector op by kind and parameters
    "rope_tables": "workloads._int_ops",
    "rope_op_tables": "workloads._int_ops",
    "rope_op_rows": "workloads._int_ops",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workloads' has no attribute {name!r}")
    module, _, attribute = module.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
