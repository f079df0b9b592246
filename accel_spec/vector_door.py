"""The vector unit's door: how a design whose activations are not int8 runs the int8 vector unit.

The vector unit (``rtl_gen.core.vector_unit``) computes on int8 codes of :data:`UNIT_FRAC_BITS`
fractional bits (value = code / 16, the builtins' scale: ``workloads.vector_ops.FRAC_BITS``). The
ifmap buffer of a design holds its activations in the array's own format (the output stage writes
them so, and the next matrix op reads them so). A design whose activations are fp8_e4m3,
fp8_e5m2, int4 (unpacked) or bf16 (16-bit lanes) converts at the unit's door (``rtl_gen.core.vector_door``), per lane,
combinationally (no cycle: the unit's timing, ``perf_model.vector_timing``, is unchanged):

* **in** (each operand word the unit reads): a float code ``x`` becomes
  ``clamp(round(x * 2**UNIT_FRAC_BITS), -128, 127)`` (nearest, ties to even; -0 gives 0); an int4
  value ``c`` (sign-extended in its 8-bit lane) becomes ``c * 2**INT4_SHIFT`` (exact);
* **out** (each word the unit writes): an int8 code ``q`` becomes the float nearest to
  ``q / 2**UNIT_FRAC_BITS`` (ties to the even code; +0 for 0; every such value is a normal number
  of fp8_e4m3, fp8_e5m2 and bf16, so neither saturation nor subnormals occur), or the int4
  ``clamp(round(q / 2**INT4_SHIFT), -8, 7)`` (nearest, ties to even), sign-extended in its lane.

Bytes that are not numbers in the activation format pass the door unchanged: a ``transpose`` moves
codes (both ways), and a ``rope``'s second operand is its cos/sin table of int16 halves
(``accel_spec.vector_isa``; in a bf16 design's 16-bit lanes the host writes each table byte
sign-extended and the door passes the low byte). An int8 design has no door. A bf16 design runs no
transpose on the unit (its tile holds bytes: :func:`moves_byte_lanes`), so a transformer block is
not one program there; int16 activations are refused (:func:`vector_unit_rule`). Standard library
only.
"""

from __future__ import annotations

from accel_spec.number_formats import NumberFormat

__all__ = ["UNIT_FRAC_BITS", "INT4_SHIFT", "RAW_KINDS", "RAW_SECOND_KINDS", "door_format", "vector_unit_rule",
           "moves_byte_lanes"]

#: Fractional bits of the unit's int8 codes (value = code / 16); ``workloads.vector_ops.FRAC_BITS`` is this.
UNIT_FRAC_BITS = 4

#: An int4 activation is the unit's int8 code shifted right by this (int4 value = int8 code / 16:
#: the int4 grid is whole units, the same range as the int8 codes').
INT4_SHIFT = 4

#: Vector kinds whose operand and result words pass the door unconverted (they move codes).
RAW_KINDS = ("transpose",)

#: Vector kinds whose second operand passes the door unconverted (a table, not activations).
RAW_SECOND_KINDS = ("transpose", "rope")


def door_format(act: NumberFormat) -> str | None:
    """The activation format the door converts (``None``: int8 activations, no door)."""
    if act.is_int and act.bits == 8:
        return None
    return act.name


def vector_unit_rule(act: NumberFormat, input_bits: int, packed_activations: bool) -> str | None:
    """Why a design with activations in ``act`` cannot have the vector unit (``None``: it can).

    Args:
        act: the design's activation format (``ArrayConfig.act_fmt``).
        input_bits: the design's lane width in the buffers (``ArrayConfig.input_bits``), bits.
        packed_activations: whether its activations are packed int4 in the buffers (``pack_int4``).
    """
    if input_bits != 8 and act.name != "bf16":
        return (f"it reads 8-bit lanes, or bf16 ones through its door, not input_bits = {input_bits} "
                f"({act.name} activations)")
    if packed_activations:
        return "it reads byte lanes: int4 activations packed two a byte (pack_int4 = true) are not"
    return None


def moves_byte_lanes(input_bits: int) -> bool:
    """Whether the unit's code-moving kinds (:data:`RAW_KINDS`: a transpose) can run on a design of
    ``input_bits`` lanes: its transpose tile holds bytes, so a design of 16-bit (bf16) lanes has none
    (the compiler never emits one there: ``perf_model.compiler.dram_graph.require_block_design``)."""
    return input_bits == 8
