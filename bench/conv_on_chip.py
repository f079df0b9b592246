"""Convolutions on chip (windows built by the RTL) against the host's im2col: DRAM bytes, utilisation, area.

Model (default): each workload on each design, before (every conv replaced by the host's im2col
GEMM) and after (``perf_model.evaluate`` as it is: each conv the design runs on chip scored as its
``compile_conv`` programs, ``perf_model.evaluator.conv_ops``), both without on-chip reuse, and the
seconds ``evaluate`` took (its conv figures are cached: a first call). Utilisation: MACs over total
cycles times the array's PEs.

``--area``: the convolution address generator synthesised with Yosys (``rtl_gen.core.conv_addr``) and
the core's window range check, against ``edge``'s logic (``rtl_gen.synth_stats``, SRAM excluded).

``--sim``: simulator speed: one conv of ``resnet18:res=32`` from DRAM on ``tiny`` (``accel-dse
simulate``, Verilator): wall time and simulated cycles a second.

Usage: ``.venv/bin/python bench/conv_on_chip.py [--area] [--sim] [--workloads resnet18,...]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_model  # noqa: E402
import workloads  # noqa: E402
from accel_dse.design_files import load_design  # noqa: E402
from workloads.ops import Conv2d  # noqa: E402

CASES = (("edge", "resnet18"), ("tpu-v1", "resnet18:batch=8"), ("edge", "mobilenet_v2"), ("tpu-v1", "mobilenet_v2"),
         ("edge", "alexnet"), ("tpu-v1", "alexnet"))


def _im2col(wl: workloads.Workload) -> workloads.Workload:
    """``wl`` with every conv replaced by the host's im2col GEMM (the figures before on-chip convs)."""
    ops = tuple(op.to_gemm() if isinstance(op, Conv2d) else op for op in wl.ops)
    return dataclasses.replace(wl, ops=ops)


def model_table(cases: list[tuple[str, str]]) -> None:
    print(f"{'design':<7} {'workload':<18} {'convs':>5} {'chip':>4} {'read_MB':>8} {'->':>2} {'after':>7} "
          f"{'write_MB':>8} {'->':>2} {'after':>7} {'util':>6} {'->':>2} {'after':>6} {'Mcycles':>8} {'->':>2} "
          f"{'after':>7} {'s':>5}")
    for design, name in cases:
        config = load_design(design)
        wl = workloads.resolve(name)
        before = perf_model.evaluate(config, _im2col(wl), reuse=False).total
        start = time.perf_counter()
        result = perf_model.evaluate(config, wl, reuse=False)
        seconds = time.perf_counter() - start
        after = result.total
        convs = sum(isinstance(op, Conv2d) for op in wl.ops)
        chip = sum(op.conv_path == "chip" for op in result.ops)
        print(f"{design:<7} {name:<18} {convs:>5} {chip:>4} {before['dram_read_bytes'] / 1e6:>8.1f} {'':>2} "
              f"{after['dram_read_bytes'] / 1e6:>7.1f} {before['dram_write_bytes'] / 1e6:>8.1f} {'':>2} "
              f"{after['dram_write_bytes'] / 1e6:>7.1f} {before['utilization']:>6.1%} {'':>2} "
              f"{after['utilization']:>6.1%} {before['total_cycles'] / 1e6:>8.2f} {'':>2} "
              f"{after['total_cycles'] / 1e6:>7.2f} {seconds:>5.1f}")
        reasons: dict[str, int] = {}
        for op in result.ops:
            if op.conv_path == "host":
                key = ("the model scores the host's im2col faster" if "im2col GEMM takes" in op.conv_note
                       else op.conv_note[:70])
                reasons[key] = reasons.get(key, 0) + 1
        for why, count in reasons.items():
            print(f"{'':<7} {'':<18} {count:>5} conv(s) on the host: {why}")


def area() -> None:
    from amaranth import Module, Signal, signed
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    import rtl_gen
    from rtl_gen.core.conv_addr import ConvAddressGenerator
    from rtl_gen.tools.synth import synth_component

    class RangeCheck(wiring.Component):
        """The core's window check: base + word, outside [0, depth)."""

        def __init__(self, depth: int, bits: int) -> None:
            self.depth = depth
            super().__init__({"word": In(signed(41)), "base": In(bits), "outside": Out(1)})

        def elaborate(self, platform: object) -> Module:
            m = Module()
            full = Signal(signed(42))
            m.d.comb += [full.eq(self.word + self.base), self.outside.eq((full < 0) | (full >= self.depth))]
            return m

    config = load_design("edge")
    gen = synth_component(ConvAddressGenerator(), "conv_addr")
    lay = rtl_gen.buffer_layout(config) if hasattr(rtl_gen, "buffer_layout") else None
    depth = lay.ifmap.depth if lay is not None else 8192
    check = synth_component(RangeCheck(depth, 16), "window_check")
    edge = rtl_gen.synth_stats(config)
    added = gen["transistors"] + check["transistors"]
    total = edge["total"]["transistors"]
    print(f"address generator: {gen['cells']} cells, {gen['flops']} flops, {gen['transistors']:,} transistors; "
          f"range check {check['transistors']:,}")
    print(f"edge logic (SRAM excluded, synth_stats total, generator included in its controller): {total:,} "
          f"transistors; the window logic is {added / total:.2%} of it")


def sim_speed() -> None:
    cmd = [sys.executable, "-m", "accel_dse", "simulate", "--design", "tiny", "--workload", "resnet18:res=32",
           "--ops", "layer1.0.conv1", "--json"]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    report = json.loads(out.stdout)
    op = report["ops"][0]
    print(f"simulate tiny resnet18:res=32 layer1.0.conv1 (Verilator): {op['status']}, "
          f"{op['cycles_total_rtl']:,} cycles in {op['sim_seconds']:.2f} s simulated "
          f"({op['cycles_total_rtl'] / op['sim_seconds']:,.0f} cycles/s), {wall:.1f} s wall with build/cache")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--area", action="store_true")
    parser.add_argument("--sim", action="store_true")
    parser.add_argument("--cases", default="", help="design:workload,... (default: the six cases)")
    args = parser.parse_args()
    cases = [tuple(c.split(":", 1)) for c in args.cases.split(",")] if args.cases else list(CASES)
    model_table(cases)  # type: ignore[arg-type]
    if args.area:
        area()
    if args.sim:
        sim_speed()


if __name__ == "__main__":
    main()
