"""A whole CNN workload, or one encoder layer, as one program on a design with the vector unit: its walk's figures.

When the workload is one conv network (``perf_model.compiler.conv_workload.conv_network_spec``:
every matrix op a conv, every vector op on a conv link), the design has the vector unit and the
compiler builds its one program (``compile_conv_network``: links on chip where the tensors fit,
else through DRAM inside the program), :func:`network_figures` walks that program
(``perf_model.program_timing``, the contract the RTL meets: ``simulate`` of the whole workload runs
this program and checks its total cycles against the same walk). ``perf_model`` registers it with
the evaluator (``perf_model.evaluator.one_design.register_network_scorer``), which sits below the
compiler and imports none of it: ``evaluate``'s ``network``. The per-op figures of ``evaluate``
stay as they are (each op on its fastest path, host reshapes uncounted); this is the
program a user deploys with no host step between ops.

A workload that is one transformer encoder layer (``perf_model.compiler.encoder.encoder_layer``)
is walked the same way, as ``compile_encoder``'s program; its figures name ``gemms`` (the GEMM
programs: three projections, each head's scores and context, the tail's three) instead of ``convs``.
"""

from __future__ import annotations

from typing import Any

from accel_dse.config import ArrayConfig
from accel_dse.errors import ModelError
from workloads.ops import Conv2d, Workload

__all__ = ["network_figures"]


def network_figures(config: ArrayConfig, workload: Workload) -> dict[str, Any] | None:
    """The one program's figures (``convs``, ``vector_ops``, ``queue_loads``, ``links_on_chip``,
    ``total_cycles``, ``compute_cycles``, ``vector_cycles``, ``stall_cycles``), ``{"reason": ...}``
    when the workload is one conv network the compiler cannot build as one program, or ``None``
    when it is not one (or the design has no vector unit or no convs)."""
    from perf_model import program_timing
    from perf_model.compiler.conv_network import compile_conv_network
    from perf_model.compiler.conv_workload import conv_network_spec

    if not config.vector_unit:
        return None
    if not any(isinstance(op, Conv2d) for op in workload.ops):
        return _encoder_figures(config, workload)
    spec = conv_network_spec(workload)
    if isinstance(spec, str):
        return None
    try:
        prog = compile_conv_network(config, spec.convs, spec.links, spec.skips, inputs=spec.inputs)
    except ModelError as exc:
        return {"reason": str(exc)}
    timing = program_timing.gemm_program_cycles(config, prog, rate=program_timing.dram_rate(config))
    return {"convs": len(spec.convs), "vector_ops": sum(len(link) for link in spec.links),
            "queue_loads": len(prog.chunks), "links_on_chip": prog.on_chip, "total_cycles": timing.total,
            "compute_cycles": timing.compute, "vector_cycles": timing.vector, "stall_cycles": timing.stall}


def _encoder_figures(config: ArrayConfig, workload: Workload) -> dict[str, Any] | None:
    """:func:`network_figures` of an encoder layer (``None``: the workload is not one)."""
    from accel_dse.commands import Opcode
    from perf_model import program_timing
    from perf_model.compiler.encoder import compile_encoder, encoder_layer

    try:
        layer = encoder_layer(workload)
    except ModelError:
        return None
    try:
        prog = compile_encoder(config, layer)
    except ModelError as exc:
        return {"reason": str(exc)}
    timing = program_timing.gemm_program_cycles(config, prog, rate=program_timing.dram_rate(config))
    return {"gemms": 6 + 2 * layer.seqs * layer.heads, "vector_ops": 1 + sum(len(link) for link in layer.links),
            "queue_loads": len(prog.chunks), "links_on_chip": any(c.opcode == Opcode.MOVE for c in prog.commands),
            "total_cycles": timing.total, "compute_cycles": timing.compute, "vector_cycles": timing.vector,
            "stall_cycles": timing.stall}
