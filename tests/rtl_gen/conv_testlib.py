"""Run a conv (its images) from NHWC activations in DRAM on the SoC (``system_testlib.run_image``), and its
JAX reference."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax
from system_testlib import SocRun, run_image

from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields, unpack_tensor
from accel_spec.config import ArrayConfig
from perf_model.compiler.conv import compile_conv, conv_weight_matrix
from workloads import output_stage
from workloads.ops import Conv2d, Requant


def conv_reference(conv: Conv2d, x: np.ndarray, w: np.ndarray, requant: Requant | None = None) -> np.ndarray:
    """``lax.conv_general_dilated`` on int8 NHWC ``x`` and HWIO ``w`` with int32 accumulation."""
    out = lax.conv_general_dilated(
        jnp.asarray(x, jnp.int8), jnp.asarray(w, jnp.int8), (conv.stride_h, conv.stride_w),
        ((conv.pad_h, conv.pad_h_hi), (conv.pad_w, conv.pad_w_hi)), rhs_dilation=(conv.dilation_h, conv.dilation_w),
        dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=conv.groups,
        preferred_element_type=jnp.int32)
    if requant is not None:
        out = output_stage(out, requant)
    return np.asarray(out).astype(np.int64)


def operands(conv: Conv2d, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (conv.n, conv.h, conv.w, conv.c_in))
    w = rng.integers(-128, 128, (conv.kh, conv.kw, conv.c_in // conv.groups, conv.c_out))
    return x, w


def run_conv(config: ArrayConfig, conv: Conv2d, *, seed: int = 0, requant: Requant | None = None,
             edit: Any = None, tiling: Any = None, queue_depth: int = 256, pack: bool = True,
             **kwargs: Any) -> tuple[SocRun, np.ndarray, np.ndarray]:
    """Compile ``conv`` (all its images) (with ``tiling``, else the search's), run it from DRAM; ``(run,
    output from DRAM, JAX reference)``. ``edit(program) -> program`` changes the program before it
    runs (malformed programs); ``pack=False`` compiles one tap a word where tap packing would apply."""
    prog = compile_conv(config, conv, requant=requant is not None, queue_depth=queue_depth, tiling=tiling,
                        pack=pack)
    x, w = operands(conv, seed)
    tensors = {"a": pack_tensor(prog.tensors["a"], x.reshape(conv.n * conv.h * conv.w, conv.c_in)),
               "b": pack_tensor(prog.tensors["b"], conv_weight_matrix(conv, prog, config.rows, w))}
    if requant is not None:
        tensors["q"] = pack_qparam_lanes(prog.tensors["q"], qparam_fields(requant, conv.c_out))
    if edit is not None:
        prog = edit(prog)
    image = program_image(prog, tensors)
    image = np.concatenate([image, np.zeros(-len(image) % prog.data_bytes, np.uint8)])
    run = run_image(config, prog, image, queue_depth=queue_depth, **kwargs)
    c = prog.tensors["c"]
    out = unpack_tensor(c, run.dram[c.base:]).reshape(conv.n, conv.out_h, conv.out_w, conv.c_out)
    return run, out, conv_reference(conv, x, w, requant)
