"""Whether one program's tensors can be addressed in DRAM, known before the program is compiled.

A command's ``dram_addr`` is 32 bits (``accel_spec.isa.FIELDS``), so a program addresses at most
:data:`DRAM_ADDRESS_BYTES`. The compilers (``encoder``, ``decoder``, ``conv_network``) place every
tensor of a program in that space and refuse one that does not fit, but only once they have laid
it out, which for a large workload is minutes of compiling. :func:`program_dram_reason` finds the
cases a lower bound already refuses from the ops' sizes alone: the evaluator's one-program figure
and ``simulate``'s block path ask it first.
"""

from __future__ import annotations

from collections.abc import Iterable

from accel_spec.isa import FIELDS
from workloads.ops import Op

__all__ = ["DRAM_ADDRESS_BYTES", "program_dram_floor", "program_dram_reason"]

#: Bytes a program addresses in DRAM: ``dram_addr``'s width (``accel_spec.isa``).
DRAM_ADDRESS_BYTES = 1 << FIELDS["dram_addr"][1]


def program_dram_floor(ops: Iterable[Op], bits: int, tensors: str) -> int:
    """A lower bound of the DRAM bytes one program of ``ops`` places, from their sizes alone.

    Each op counts once (whatever its run count), at ``bits`` an element (the narrowest lane a
    tensor has in DRAM), so the real footprint is at least this; known before anything is compiled.

    Args:
        ops: The workload's matrix ops.
        bits: Bits an element (the design's ``input_bits``).
        tensors: ``"outputs"``: every op's output is a tensor of its own in DRAM (a transformer
            block's program: ``perf_model.compiler.decoder``, ``encoder``); ``"weights"``: every
            op's weights are (a conv network's program, whose links may stay on chip).
    """
    if tensors == "outputs":
        return sum(op.output_bytes(bits) for op in ops)
    return sum(op.weight_bytes(bits) for op in ops)


def program_dram_reason(ops: Iterable[Op], bits: int, tensors: str) -> str:
    """Why one program of ``ops`` cannot be addressed in DRAM (``""``: the bound does not say it cannot)."""
    floor = program_dram_floor(ops, bits, tensors)
    if floor <= DRAM_ADDRESS_BYTES:
        return ""
    return (f"its {tensors} alone take {floor:,} bytes of DRAM at {bits} bits an element, beyond the "
            f"{DRAM_ADDRESS_BYTES:,} (2**32) a program addresses (dram_addr is 32 bits)")
