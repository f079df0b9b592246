"""Area of tap packing's logic (Yosys), against ``edge``'s logic.

Tap packing (``perf_model.compiler.conv_pack``) adds three pieces, each synthesised with and
without it on the design's parameters: the address generator's lane-group checks
(``ConvAddressGenerator(max_groups=...)`` against ``max_groups=1``), the DMA's sliding load
(``DmaLoad(slide_beats=...)`` against ``slide_beats=0``), and the core's per-lane keep (the
groups and ``pack`` riding the x lanes' delay line, and each lane's group select). Beside them
``edge``'s logic (``rtl_gen.synth_stats``, SRAM excluded).

Usage: ``python bench/tap_packing_area.py [--designs edge,tpu-v1]`` (minutes: Yosys).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amaranth import Module, Signal  # noqa: E402
from amaranth.lib import wiring  # noqa: E402
from amaranth.lib.wiring import In, Out  # noqa: E402

import rtl_gen  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from accel_spec.isa import FIELDS  # noqa: E402
from rtl_gen.core.accelerator import Accelerator  # noqa: E402
from rtl_gen.core.conv_addr import ConvAddressGenerator  # noqa: E402
from rtl_gen.core.skew import DelayLine  # noqa: E402
from rtl_gen.soc.dma import DmaLoad  # noqa: E402
from rtl_gen.soc.system import AxiAccelerator  # noqa: E402
from rtl_gen.tools.synth import synth_component  # noqa: E402


class LaneKeep(wiring.Component):
    """The core's added x-lane logic: groups and pack delayed per lane, each lane's keep bit."""

    def __init__(self, lanes: int, max_groups: int) -> None:
        self.lanes, self.max_groups = lanes, max_groups
        super().__init__({"groups": In(max_groups), "pack": In(FIELDS["pack"][1]), "keep": Out(lanes)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        width = self.max_groups + FIELDS["pack"][1]
        m.submodules.line = line = DelayLine(taps=self.lanes, width=width)
        m.d.comb += line.i_data.eq(self.groups | (self.pack << self.max_groups))
        keep = [Accelerator._lane_kept(self, line.o_taps[i * width:(i + 1) * width], i, self.lanes)  # type: ignore[arg-type]
                for i in range(self.lanes)]
        out = Signal(self.lanes)
        for i, k in enumerate(keep):
            m.d.comb += out[i].eq(k)
        m.d.comb += self.keep.eq(out)
        return m


def measure(name: str) -> None:
    config = load_design(name)
    core = Accelerator(config)
    groups = core.max_groups
    soc = AxiAccelerator(config, core=core)
    common = {"data_bytes": soc.data_bytes, "max_beats": soc.max_beats, "outstanding": soc.outstanding,
              "buf_addr_bits": core.layout.ifmap.addr_bits}
    added = 0
    print(f"{name}: {config.rows}x{config.cols}, {groups} lane groups a word at most, sliding load of "
          f"{soc.slide_beats} beats")
    for what, plain, packed in (
        ("address generator", lambda: ConvAddressGenerator(), lambda: ConvAddressGenerator(max_groups=groups)),
        ("DMA load", lambda: DmaLoad(**common), lambda: DmaLoad(**common, slide_beats=soc.slide_beats)),
    ):
        a = synth_component(plain(), "plain")["transistors"]
        b = synth_component(packed(), "packed")["transistors"]
        added += b - a
        print(f"  {what:<18} {a:>10,} -> {b:>10,} transistors ({b - a:+,})")
    if groups > 1:
        keep = synth_component(LaneKeep(config.rows, groups), "lane_keep")["transistors"]
        added += keep
        print(f"  {'core lane keep':<18} {'':>10}    {keep:>10,} transistors")
    total = rtl_gen.synth_stats(config)["total"]["transistors"]
    print(f"  added {added:,} transistors; {name}'s logic (SRAM excluded) {total:,}: {added / total:.2%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", default="edge")
    for name in parser.parse_args().designs.split(","):
        measure(name)


if __name__ == "__main__":
    main()
