"""Packed int4 words: DRAM's two-a-byte lanes <-> the buffers' 8-bit lanes (``pack_int4`` designs).

A packed word (``accel_spec.isa``, "Packed int4") holds lane ``2i`` in the low nibble of byte
``i`` and lane ``2i + 1`` in the high nibble. A load sign-extends each nibble into its 8-bit
buffer lane; a store keeps the low nibble of each 8-bit lane (the output stage has saturated the
value to [-8, 7], so the nibble is the value). Both are wiring (the sign bit repeated, bits
dropped): no gates, no latency, so the DMA's cycles are those of a word of ``lanes / 2`` bytes.
"""

from __future__ import annotations

from amaranth import Cat, Value

__all__ = ["unpack_int4", "pack_int4"]


def unpack_int4(word: Value, lanes: int) -> Value:
    """``lanes`` 8-bit lanes, each the sign-extended nibble ``i`` of ``word``'s low ``4 * lanes`` bits."""
    nibbles = [word[4 * i:4 * i + 4] for i in range(lanes)]
    return Cat(*(Cat(n, n[3].replicate(4)) for n in nibbles))


def pack_int4(word: Value, lanes: int) -> Value:
    """``4 * lanes`` bits: the low nibble of each of ``word``'s ``lanes`` 8-bit lanes, in order."""
    return Cat(*(word[8 * i:8 * i + 4] for i in range(lanes)))
