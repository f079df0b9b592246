"""One program for a network: GEMMs and the element-wise vector ops between them, activations on chip.

A network here is a chain of requantised GEMMs (``perf_model.compiler.chain``: op ``i + 1``'s
``A`` is op ``i``'s output) with, on any link, one element-wise vector op of one operand
(``relu``, ``relu6``, ``gelu``, ungated ``silu``: each maps 0 to 0, so the zero padding lanes of
the ``A`` words stay zero) applied to the producer's requantised output. Every such link must
stay on chip (the chain's rule: the design can MOVE and the region fits); then the producer
MOVEs its output into the link's ifmap region, one ``VECTOR`` runs the op in place over the
region's words (``wait_dma``: after the MOVE), and the consumer's RUNs read the region once the
unit is done (``wait_vec``). All GEMMs' programs run back to back as ONE queue-load: their
tensors are placed one after another past the whole program, so there is no host step between
the ops. Total cycles: ``perf_model.program_timing.program_cycles`` of :attr:`GemmProgram.commands`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from accel_dse.commands import COMMAND_BYTES, QUEUE_DEPTH, Command, Opcode
from accel_dse.config import ArrayConfig
from accel_dse.errors import ModelError
from perf_model.compiler.chain import compile_chain, region_words
from perf_model.compiler.program import PAGE, GemmProgram, TensorLayout
from perf_model.compiler.vector import vector_commands, vector_registers
from workloads.ops import Gemm
from workloads.vector_ops import VectorOp

__all__ = ["compile_network", "LINK_KINDS"]

#: Vector ops a link may carry (one operand, element-wise, ``f(0) = 0``).
LINK_KINDS = ("relu", "relu6", "gelu", "silu")


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def _shifted(cmd: Command, shift: int, wait_vec: bool) -> Command:
    """``cmd`` with its DRAM address moved by ``shift`` bytes, and ``wait_vec`` on a RUN if asked."""
    if cmd.opcode in (Opcode.LOAD, Opcode.STORE):
        cmd = dataclasses.replace(cmd, fields=tuple((k, v + shift if k == "dram_addr" else v) for k, v in cmd.fields))
    if wait_vec and cmd.opcode == Opcode.RUN:
        cmd = dataclasses.replace(cmd, wait_vec=1)
    return cmd


def compile_network(config: ArrayConfig, gemms: Sequence[Gemm], links: Sequence[VectorOp | None]) -> GemmProgram:
    """The one program of ``gemms`` with ``links[i]`` (or ``None``) between GEMM ``i`` and ``i + 1``.

    Tensors: ``a0`` (the network's input), per GEMM ``i`` its weights ``b{i}`` and output-stage
    parameters ``q{i}``, and ``c{last}`` (the network's requantised output); an ``a``/``c`` of a
    link kept on chip has no DRAM tensor.

    Raises:
        ModelError: no vector unit, ``links`` not one per link, a link op the unit cannot run in
            place (not one of :data:`LINK_KINDS`, or gated), a link with an op that the chain keeps
            in DRAM, or a program longer than one queue-load.
    """
    lanes = config.vector_lanes
    if not lanes:
        raise ModelError(f"design {config.short_name()} has no vector unit (vector_unit = false)")
    if len(links) != max(0, len(gemms) - 1):
        raise ModelError(f"a network of {len(gemms)} GEMMs has {max(0, len(gemms) - 1)} links, not {len(links)}")
    plan, programs = compile_chain(config, gemms, [True] * len(gemms))
    vectors: list[list[Command]] = []
    for i, op in enumerate(links):
        if op is None:
            vectors.append([])
            continue
        if op.kind not in LINK_KINDS or (op.kind == "silu" and op.param("gated", 0)):
            raise ModelError(f"link {i}: a {op.kind} cannot run in place on a link (one of {', '.join(LINK_KINDS)}, "
                             "ungated)")
        region = plan.c_region(i)
        if region is None:
            raise ModelError(f"link {i}: GEMM {i}'s output goes through DRAM on {config.short_name()}, so its "
                             f"{op.kind} cannot run on chip")
        words = region_words(config, gemms[i])
        whole = dataclasses.replace(op, shape=(words * lanes,), out_shape=(words * lanes,), axis=None)
        regs = vector_registers(whole, lanes, src=region, src2=region, dst=region)
        vectors.append(vector_commands(regs, wait_dma=1))
    count = sum(len(p.commands) for p in programs) + sum(len(v) for v in vectors)
    if count > QUEUE_DEPTH:
        raise ModelError(f"the network's program has {count} commands, more than one queue-load of {QUEUE_DEPTH}")
    cursor = _align(count * COMMAND_BYTES, PAGE)
    commands: list[Command] = []
    tensors: dict[str, TensorLayout] = {}
    for i, program in enumerate(programs):
        first = min(t.base for t in program.tensors.values())
        shift = cursor - first
        after_vector = i > 0 and bool(vectors[i - 1])
        commands += [_shifted(c, shift, after_vector) for c in program.commands]
        for name, t in program.tensors.items():
            tensors[f"{name}{i}"] = dataclasses.replace(t, base=t.base + shift)
        cursor = _align(max(t.base + t.nbytes for t in program.tensors.values()) + shift, PAGE)
        if i < len(vectors):
            commands += vectors[i]
    return GemmProgram(tuple(commands), tensors, 0, cursor, programs[0].data_bytes, True,
                       tuple(r for p in programs for r in p.runs), ((0, len(commands)),))
