"""Where the silent-data-corruption campaign injects faults, and which places the checksum sees.

Stdlib only: the campaign (``accel_dse.sdc.campaign``), its bench and the docs read the same
names. ``protected`` says whether ``checksum = "detect"`` is designed to see a fault there
(``rtl_gen.core.checksum`` explains why); a place that is not is an escape by design, and the
campaign reports what it measured there all the same.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from accel_spec.errors import ConfigError

__all__ = ["Place", "FaultSpec", "PLACES", "FAULT_KINDS", "MAX_FAULTS_PER_PLACE", "check_places", "check_faults"]


@dataclasses.dataclass(frozen=True)
class Place:
    """One kind of storage a fault can hit.

    Attributes:
        name: the name the campaign takes.
        what: what it is, in the RTL.
        protected: the checksum is designed to see a corrupting fault here.
    """

    name: str
    what: str
    protected: bool


#: The places, in report order.
PLACES: dict[str, Place] = {p.name: p for p in (
    Place("pe_operand", "a PE's left-operand register (a), which feeds the PEs to its right", True),
    Place("pe_weight", "a PE's stationary (weight) register, or its shadow", True),
    Place("pe_psum", "a PE's partial-sum register (v): the accumulation of WS/IS", True),
    Place("output_stage", "a pipeline register of the requantising output stage while the host reads", True),
    Place("operand_buffer", "a word of the ifmap or weight SRAM while the run reads it", False),
    Place("ofmap_buffer", "a word of the ofmap SRAM (accumulators between K-folds, results)", False),
    Place("dma", "a word on the DMA datapath into the operand buffers (the host write port)", False),
)}

#: Fault kinds: a single-bit transient flip at one cycle, or a bit stuck at 0/1 from that cycle
#: to the end of the run.
FAULT_KINDS = ("flip", "stuck0", "stuck1")

#: Upper bound on the faults of one place in one campaign (each is a simulated run).
MAX_FAULTS_PER_PLACE = 5000


def check_places(names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``names`` as a tuple; raise ``ConfigError`` naming the first unknown place."""
    for name in names:
        if name not in PLACES:
            raise ConfigError(f"fault place must be one of {', '.join(PLACES)}, not {name!r}")
    return tuple(names)


def check_faults(count: object) -> int:
    """``count`` as an int; raise ``ConfigError`` unless it is in [1, MAX_FAULTS_PER_PLACE]."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_FAULTS_PER_PLACE:
        raise ConfigError(f"faults per place must be an integer in [1, {MAX_FAULTS_PER_PLACE}], not {count!r}")
    return count


@dataclasses.dataclass(frozen=True)
class FaultSpec:
    """One fault of a trial.

    Attributes:
        place: a name of :data:`PLACES`.
        target: which register or word: ``(row, col, register)`` for the PE places,
            ``(buffer, bank, address)`` for the buffers, ``(buffer, word)`` for ``dma``,
            ``(register,)`` for ``output_stage`` (a name, or an index into its registers' sorted names).
        bit: the bit flipped or stuck.
        kind: one of :data:`FAULT_KINDS`.
        cycle: cycle of the run (after ``start``) at which it strikes (``dma``: during the load;
            ``output_stage``: a cycle of the read-back; ``ofmap_buffer``: after the run).
    """

    place: str
    target: tuple[Any, ...]
    bit: int
    kind: str
    cycle: int
