"""A conv op from NHWC activations in DRAM (``simulate``'s DRAM path, weight-stationary designs).

The op's images are one program of ``perf_model.compiler.conv.compile_conv`` (as the model
scores it): its DRAM image holds the NHWC input of every image (not an im2col matrix) and the
weights in the runs' order; the RTL builds the windows. Expected output:
``workloads.conv_nhwc_reference`` (``lax.conv_general_dilated`` over every group at once), row
``(image, out_y, out_x)``, column the output channel. Expected cycles: the walk of that program.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields
from accel_dse.simulate.run_plan import operand_bits
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError, SimulationError

__all__ = ["on_chip_conv", "conv_instances"]


def on_chip_conv(design: ArrayConfig, name: str, op: Any, chained: bool, force: bool = False) -> str:
    """How ``simulate`` runs ``op``: ``""`` (not a conv, or in a chained network, whose links are
    GEMM-shaped: as today), ``"chip"`` (windows built on chip) or the reason the host builds the
    im2col ``A`` (``perf_model.compiler.scorers.conv_path``, the model's choice; with ``force``, only a
    design that builds no windows leaves it to the host).

    Raises:
        SimulationError: the conv does not fit on chip (the reason names the op and its words).
    """
    from perf_model.compiler.conv_geometry import conv_served
    from perf_model.compiler.scorers import conv_path
    from workloads.ops import Conv2d

    if not isinstance(op, Conv2d) or chained:
        return ""
    if force:
        return conv_served(design) or "chip"
    path, why = conv_path(design, op, requant=op.requant is not None)
    if path == "infeasible":
        raise SimulationError(f"op {name!r}: design {design.short_name()} cannot run the conv on chip: {why}")
    return "chip" if path == "chip" else why


def conv_instances(design: ArrayConfig, name: str, op: Any, seed: int, scale: float, latency: int
                   ) -> tuple[Any, Any, np.ndarray, list[np.ndarray], Any]:
    """``(program, walk timing, expected (1, images x pixels, c_out), [its DRAM image], the GEMM the
    report shows)`` of the first ``ceil(n * scale)`` images of conv ``op``, run as one program.

    Raises:
        SimulationError: the design cannot run the conv (the compiler's reason, naming the op).
    """
    import perf_model
    import workloads
    from perf_model.compiler.conv import compile_conv, conv_weight_matrix
    from perf_model.compiler.conv_forms import form_conv, reshape_input, reshape_weights
    from perf_model.compiler.conv_score import conv_steps

    images = max(1, math.ceil(op.n * scale))
    steps = conv_steps(design, op, op.requant is not None)  # the conv, or its reshaped form, as scored
    run = form_conv(op, steps)
    try:  # the images in one program, as the model scores the conv (whole images stacked in its runs)
        program = compile_conv(design, dataclasses.replace(run, n=images), requant=op.requant is not None)
    except ModelError as exc:
        raise SimulationError(f"op {name!r}: {exc}") from exc
    timing = perf_model.gemm_program_cycles(design, program, latency=latency, rate=perf_model.dram_rate(design))
    x, w, out = workloads.conv_nhwc_reference(op, seed, **operand_bits(design))
    x = np.asarray(x[:images])
    if steps:  # the host's reshape of the input, and the weights to match; the output is the conv's
        x, w = reshape_input(x, op, steps), reshape_weights(np.asarray(w), op, steps)
    pixels = images * op.out_h * op.out_w
    b = pack_tensor(program.tensors["b"], conv_weight_matrix(run, program, design.rows, w))
    extra = {}
    if op.requant is not None:
        extra["q"] = pack_qparam_lanes(program.tensors["q"], qparam_fields(op.requant, op.c_out))
    a = pack_tensor(program.tensors["a"], x.reshape(images * run.h * run.w, run.c_in))
    dram = [program_image(program, {"a": a, "b": b, **extra})]
    expected = np.asarray(out[:images]).astype(np.int64).reshape(1, pixels, op.c_out)
    gemm = workloads.Gemm(m=pixels, k=max(t[3] for t in program.runs), n=op.c_out, name=op.name)
    return program, timing, expected, dram, gemm
