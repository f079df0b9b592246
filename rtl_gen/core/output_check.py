"""The output stage's check (``ArrayConfig.checksum = "detect"``): a second copy of the
requantising output stage on the same inputs, compared word by word with the first.

The checksum of a matrix run (``rtl_gen.core.checksum``) compares the accumulators as they
leave the array; the output stage (``rtl_gen.core.output_stage``) requantises them later, when
the host port or the SoC's DMA reads the ofmap, so a fault in its pipeline is past that check.
Requantisation (a saturating add, a 32 x 32 multiply, a rounding shift, a clamp) has no cheap
arithmetic invariant, so this check is dual modular redundancy: :class:`OutputCheck` holds its
own :class:`~rtl_gen.core.output_stage.OutputStage` fed with the same accumulator word and
parameter word as the stage it guards, and flags a word whose two results differ in any bit.

It wraps the guarded stage without touching it: the accelerator connects the stage's inputs
and its output ``q`` to this unit. Only words that are used are compared: ``check`` comes with
the read's address (``host_qcheck``: the DMA's requantising store or a MOVE reads this cycle)
and is delayed by ``latency`` (the read's latency up to ``q``), so a stuck bit in an idle cycle
counts nothing. Two equal copies on equal inputs never differ: no false alarm.

What it sees: a fault in any register or gate of either copy that changes a compared word
(a fault in the duplicate is flagged with a correct output). What escapes: faults on the
shared inputs before the copies split (the ofmap word read, the qparam SRAM word: SRAM
faults, which the campaign lists as escapes) and a word read but not checked.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl_gen.core.output_stage import OutputStage, param_bits

__all__ = ["OutputCheck"]


class OutputCheck(wiring.Component):
    """The duplicate output stage and its comparator (module docstring).

    Ports: ``acc`` and ``params`` (the guarded stage's inputs), ``q`` (its output), ``check``
    (the word read this cycle is used), ``event`` (the checked word leaving the stages now
    differs from the duplicate's).

    Args:
        lanes, acc_bits, out_bits: the guarded :class:`OutputStage`'s.
        latency: cycles from ``check`` to the word's ``q`` (>= 1).
    """

    def __init__(self, *, lanes: int, acc_bits: int, out_bits: int, latency: int) -> None:
        self.lanes = lanes
        self.acc_bits = acc_bits
        self.out_bits = out_bits
        self.latency = latency
        self.duplicate: OutputStage | None = None
        super().__init__({
            "acc": In(lanes * acc_bits),
            "params": In(lanes * param_bits(out_bits)),
            "q": In(lanes * out_bits),
            "check": In(1),
            "event": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.output_stage_dup = dup = OutputStage(lanes=self.lanes, acc_bits=self.acc_bits,
                                                          out_bits=self.out_bits)
        self.duplicate = dup
        m.d.comb += [dup.acc.eq(self.acc), dup.params.eq(self.params)]
        valid = Signal(self.latency, name="q_check_valid")  # bit i: the check of i + 1 cycles ago
        m.d.sync += valid.eq((valid << 1) | self.check)
        m.d.comb += self.event.eq(valid[-1] & (self.q != dup.q))
        return m

    def register_bits(self) -> int:
        """Flip-flop bits outside the duplicate stage: the check's delay line."""
        return self.latency
