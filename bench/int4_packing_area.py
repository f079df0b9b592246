"""Yosys area of packed int4 (``pack_int4``): what the packing adds to the SoC, against byte lanes.

For the edge-sized W4A4 design (16x16 WS, 8-byte bus) with and without ``pack_int4``: the load and
store DMA engines, the sequencer (its narrow-transfer beats change with the packed words) and the
control registers (``rtl_gen.soc.system.memory_system_units``), and the word path between the DMA
and the buffers (``rtl_gen.core.int4_lanes``: a load word into 8-bit lanes, an output word packed
for the store, beside the byte-lane path), each priced with the NanGate45 cells of
``bench/area_calibration.py``; the model's ``perf_model.memory_system_logic_um2`` beside them.

Usage: ``python bench/int4_packing_area.py`` (a minute or two).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from amaranth import Module, Mux  # noqa: E402
from amaranth.back import verilog  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402
from area_calibration import yosys_gates  # noqa: E402

import perf_model  # noqa: E402
from accel_spec.config import ArrayConfig  # noqa: E402
from rtl_gen.core.int4_lanes import pack_int4, unpack_int4  # noqa: E402
from rtl_gen.soc.system import memory_system_units  # noqa: E402

DESIGN = ArrayConfig(rows=16, cols=16, dram_bytes_per_cycle=8.0, weight_format="int4", act_format="int4")


class WordPath(wiring.Component):
    """The DMA <-> buffer word path of one operand word of ``lanes`` 8-bit lanes: a load word in
    (packed: ``4 * lanes`` bits used) to the buffer's lanes, and the output stage's lanes to the
    store word, muxed with a raw word as the SoC does (``requanting``)."""

    def __init__(self, lanes: int, packed: bool) -> None:
        self.lanes, self.packed = lanes, packed
        super().__init__({"ld_word": In(8 * lanes), "buf_word": Out(8 * lanes), "qdata": In(8 * lanes),
                          "raw": In(32 * lanes), "requanting": In(1), "st_word": Out(32 * lanes)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = self.lanes
        load = unpack_int4(self.ld_word, n) if self.packed else self.ld_word
        out = pack_int4(self.qdata, n) if self.packed else self.qdata
        m.d.comb += [self.buf_word.eq(load), self.st_word.eq(Mux(self.requanting, out, self.raw))]
        return m


def area(config: ArrayConfig) -> dict[str, float]:
    out = {}
    for name, _, build in memory_system_units(config):
        out[name] = yosys_gates(name, verilog.convert(build(), name=name, emit_src=False,
                                                      strip_internal_attrs=True))["area_um2"]
    path = WordPath(config.rows, bool(config.packed_kinds))
    out["word_path"] = yosys_gates("word_path", verilog.convert(path, name="word_path", emit_src=False,
                                                                 strip_internal_attrs=True))["area_um2"]
    return out


def main() -> int:
    plain, packed = DESIGN, dataclasses.replace(DESIGN, pack_int4=True)
    a, b = area(plain), area(packed)
    print(f"{'unit (16x16 W4A4, 8 B bus)':28s} {'byte lanes um2':>15s} {'packed um2':>11s} {'change':>8s}")
    for name in a:
        change = f"{b[name] / a[name] - 1:+8.1%}" if a[name] else f"{b[name] - a[name]:+8.0f}"
        print(f"{name:28s} {a[name]:15.0f} {b[name]:11.0f} {change}")
    ta, tb = sum(a.values()), sum(b.values())
    print(f"{'total':28s} {ta:15.0f} {tb:11.0f} {tb / ta - 1:+8.1%}")
    for name, config in (("byte lanes", plain), ("packed", packed)):
        model = float(perf_model.memory_system_logic_um2(perf_model.dma_word_bits(config)))
        print(f"model memory_system_logic_um2 ({name}): {model:.0f} (DMA word {perf_model.dma_word_bits(config)} bits)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
