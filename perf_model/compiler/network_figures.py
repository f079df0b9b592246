"""A whole CNN workload, or a transformer block, as one program on a design with the vector unit: its walk's figures.

When the workload is one conv network (``perf_model.compiler.conv_workload.conv_network_spec``:
every matrix op a conv, every vector op on a conv link), the design has the vector unit and the
compiler builds its one program (``compile_conv_network``: links on chip where the tensors fit,
else through DRAM inside the program), :func:`network_figures` walks that program
(``perf_model.program_timing``, the contract the RTL meets: ``simulate`` of the whole workload runs
this program and checks its total cycles against the same walk). ``perf_model.figures`` takes it
(``one_program``) as the design's figure, and ``evaluate`` shows it as ``network``. The per-op
figures of ``evaluate`` stay as they are (each op on its fastest path, host reshapes uncounted); this is the
program a user deploys with no host step between ops.

A workload that is a stack of transformer encoder layers (``perf_model.compiler.encoder.encoder_layer``)
or one LLaMA decoder block (``perf_model.compiler.decoder.decoder_block``) is walked the same way,
as ``compile_encoder``'s or ``compile_decoder``'s program; its figures name ``gemms`` (the GEMM
programs: the projections, each head's scores and context, the FFN's, a wide GEMM's column groups)
instead of ``convs``, and ``transposes`` (the vector unit's transposes of the keys).
"""

from __future__ import annotations

from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import FieldRangeError
from workloads.ops import Conv2d, Workload

__all__ = ["network_figures"]


def network_figures(config: ArrayConfig, workload: Workload) -> dict[str, Any] | None:
    """The one program's figures (``convs``, ``vector_ops``, ``queue_loads``, ``links_on_chip`` (every
    link), ``links`` (where they go, as words: ``ConvNetworkProgram.links``),
    ``total_cycles``, ``compute_cycles``, ``vector_cycles``, ``stall_cycles``, and its DRAM bytes
    ``dram_read_bytes``/``dram_write_bytes``: ``program_timing.program_dram_bytes``), ``{"reason": ...}``
    when the workload is one conv network the compiler cannot build as one program, or ``None``
    when it is not one (or the design has no vector unit or no convs)."""
    from perf_model import program_timing
    from perf_model.compiler.conv_network import compile_conv_network
    from perf_model.compiler.conv_workload import conv_network_spec
    from perf_model.compiler.dram_space import program_dram_reason

    if not config.vector_unit:
        return None
    if not any(isinstance(op, Conv2d) for op in workload.ops):
        return _block_figures(config, workload)
    spec = conv_network_spec(workload)
    if isinstance(spec, str):
        return None
    too_big = program_dram_reason(workload.ops, config.input_bits, "weights")  # before minutes of compiling
    if too_big:
        return {"reason": too_big}
    try:
        prog = compile_conv_network(config, spec.convs, spec.links, spec.skips, inputs=spec.inputs, input_form=True,
                                    timed=True)
    except (ModelError, FieldRangeError) as exc:  # a field past its bits: a DRAM address past 32
        return {"reason": str(exc)}
    timing = program_timing.gemm_program_cycles(config, prog, rate=program_timing.dram_rate(config))
    read, written = program_timing.program_dram_bytes(config, prog.commands)
    return {"convs": len(spec.convs), "vector_ops": sum(len(link) for link in spec.links),
            "queue_loads": len(prog.chunks), "links_on_chip": prog.on_chip, "links": prog.links,
            "total_cycles": timing.total,
            "compute_cycles": timing.compute, "vector_cycles": timing.vector, "stall_cycles": timing.stall,
            "dram_read_bytes": read, "dram_write_bytes": written}


def _block_figures(config: ArrayConfig, workload: Workload) -> dict[str, Any] | None:
    """:func:`network_figures` of encoder layers or a decoder block (``None``: the workload is neither)."""
    from accel_spec.isa import Opcode
    from accel_spec.vector_isa import VECTOR_CODES
    from perf_model import program_timing
    from perf_model.compiler.blocks import compile_block, transformer_block
    from perf_model.compiler.dram_space import program_dram_reason

    try:
        block = transformer_block(workload)
    except ModelError:
        return None
    too_big = program_dram_reason(workload.ops, config.input_bits, "outputs")  # before minutes of compiling
    if too_big:
        return {"reason": too_big}
    try:
        prog = compile_block(config, block)
    except (ModelError, FieldRangeError) as exc:  # a field past its bits: a DRAM address past 32
        return {"reason": str(exc)}
    timing = program_timing.gemm_program_cycles(config, prog, rate=program_timing.dram_rate(config))
    transposes = sum(1 for c in prog.commands if c.opcode == Opcode.VECTOR and c["vkind"] == VECTOR_CODES["transpose"])
    read, written = program_timing.program_dram_bytes(config, prog.commands)
    return {"gemms": block.gemm_programs, "vector_ops": block.vector_op_count, "transposes": transposes,
            "queue_loads": len(prog.chunks), "links_on_chip": any(c.opcode == Opcode.MOVE for c in prog.commands),
            "total_cycles": timing.total, "compute_cycles": timing.compute, "vector_cycles": timing.vector,
            "stall_cycles": timing.stall, "dram_read_bytes": read, "dram_write_bytes": written}
