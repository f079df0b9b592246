"""Test helpers: pack GEMM operands by the documented buffer layout (written here from the
table in the ``rtl_gen.core.accelerator`` docstring, independently of the library) and run the
accelerator in Amaranth's simulator through its host port."""

from __future__ import annotations

import dataclasses

import numpy as np
from amaranth.sim import Simulator

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.isa import WINDOW_FIELDS
from rtl_gen import HOST_SEL, Accelerator, Fault


def run_bench(dut: object, bench) -> None:  # type: ignore[no-untyped-def]
    """Run the async testbench ``bench`` on ``dut`` in Amaranth's simulator with a 100 MHz clock."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def word_of(lanes: np.ndarray, bits: int) -> int:
    value = 0
    for i, x in enumerate(lanes):
        value |= (int(x) & ((1 << bits) - 1)) << (i * bits)
    return value


def lanes_of(word: int, count: int, bits: int) -> list[int]:
    out = []
    for i in range(count):
        x = (word >> (i * bits)) & ((1 << bits) - 1)
        out.append(x - (1 << bits) if x >> (bits - 1) else x)
    return out


def _pad(block: np.ndarray, size: int, rng: np.random.Generator | None, bits: int) -> np.ndarray:
    """Extend a 1-D block to ``size`` lanes: garbage (random) when ``rng`` is given, else 0."""
    if len(block) == size:
        return block
    fill = np.zeros(size - len(block), dtype=np.int64)
    if rng is not None:
        fill = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size - len(block))
    return np.concatenate([block, fill])


def pack(config: ArrayConfig, a: np.ndarray, b: np.ndarray, rng: np.random.Generator | None = None
         ) -> tuple[list[int], list[int]]:
    """Words ``(ifmap, weight)`` for ``C = A @ B``; pad lanes random when ``rng`` is given."""
    r, c, bits = config.rows, config.cols, config.input_bits
    m, k = a.shape
    n = b.shape[1]
    ifmap: list[int] = []
    weight: list[int] = []
    if config.dataflow is Dataflow.WS:
        for kf in range(_ceil(k, r)):
            ifmap += [word_of(_pad(a[i, kf * r : kf * r + r], r, rng, bits), bits) for i in range(m)]
        for nf in range(_ceil(n, c)):
            weight += [word_of(_pad(b[j, nf * c : nf * c + c], c, rng, bits), bits) for j in range(k)]
    elif config.dataflow is Dataflow.OS:
        for mf in range(_ceil(m, r)):
            ifmap += [word_of(_pad(a[mf * r : mf * r + r, j], r, rng, bits), bits) for j in range(k)]
        for nf in range(_ceil(n, c)):
            weight += [word_of(_pad(b[j, nf * c : nf * c + c], c, rng, bits), bits) for j in range(k)]
    else:
        for mf in range(_ceil(m, c)):
            ifmap += [word_of(_pad(a[mf * c : mf * c + c, j], c, rng, bits), bits) for j in range(k)]
        for kf in range(_ceil(k, r)):
            weight += [word_of(_pad(b[kf * r : kf * r + r, j], r, rng, bits), bits) for j in range(n)]
    return ifmap, weight


def ofmap_words(config: ArrayConfig, m: int, n: int) -> int:
    """Number of ofmap words holding an ``m x n`` result."""
    c = config.cols
    return n * _ceil(m, c) if config.dataflow is Dataflow.IS else m * _ceil(n, c)


def unpack(config: ArrayConfig, words: list[int], m: int, n: int) -> np.ndarray:
    """The ``m x n`` result from ofmap words."""
    c, ab = config.cols, config.acc_bits
    out = np.zeros((m, n), dtype=np.int64)
    if config.dataflow is Dataflow.IS:
        for mf in range(_ceil(m, c)):
            for j in range(n):
                lanes = lanes_of(words[mf * n + j], c, ab)
                for lane in range(min(c, m - mf * c)):
                    out[mf * c + lane, j] = lanes[lane]
    else:
        for nf in range(_ceil(n, c)):
            for i in range(m):
                lanes = lanes_of(words[nf * m + i], c, ab)
                for lane in range(min(c, n - nf * c)):
                    out[i, nf * c + lane] = lanes[lane]
    return out


def wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 values to ``bits`` bits."""
    x = np.asarray(x, dtype=np.int64)
    if bits >= 64:
        return x
    mask = (1 << bits) - 1
    x = x & mask
    return np.where(x >> (bits - 1), x - (1 << bits), x)


@dataclasses.dataclass
class RunResult:
    """What one simulated run produced."""

    c: np.ndarray
    ticks: int  # clock edges from the start edge to the edge raising done
    cycles: int  # the accelerator's own cycle counter
    busy_seen: bool  # busy was high after the start edge
    done_before: bool  # done just before the start pulse (stays high after the previous run)
    done_after_start: bool  # done right after the start edge


async def host_write(ctx, dut: Accelerator, buffers: dict[str, list[int]]) -> None:  # type: ignore[no-untyped-def]
    """Write each buffer's words at addresses 0, 1, ... through the host port (one per cycle)."""
    ctx.set(dut.host_we, 1)
    for name, words in buffers.items():
        ctx.set(dut.host_sel, HOST_SEL[name])
        for addr, word in enumerate(words):
            ctx.set(dut.host_addr, addr)
            ctx.set(dut.host_wdata, word)
            await ctx.tick()
    ctx.set(dut.host_we, 0)


def run_gemms(
    config: ArrayConfig,
    runs: list[tuple[np.ndarray, np.ndarray, bool]],
    *,
    fault: Fault | None = None,
    rng: np.random.Generator | None = None,
) -> list[RunResult]:
    """Simulate ``runs`` (``(A, B, accumulate)``) back to back on one accelerator instance.

    Each run loads its operands through the host port, pulses ``start``, counts clock edges
    until ``done`` and reads the ofmap words back.
    """
    dut = Accelerator(config, fault=fault)
    results: list[RunResult] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for a, b, acc in runs:
            m, k = a.shape
            n = b.shape[1]
            ifmap, weight = pack(config, a, b, rng)
            await host_write(ctx, dut, {"ifmap": ifmap, "weight": weight})
            ctx.set(dut.m, m)
            ctx.set(dut.k, k)
            ctx.set(dut.n, n)
            ctx.set(dut.accumulate, int(acc))
            done_before = bool(ctx.get(dut.done))
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            done_after_start = bool(ctx.get(dut.done))
            busy_seen = bool(ctx.get(dut.busy))
            ticks = 0
            while True:
                await ctx.tick()
                ticks += 1
                if ctx.get(dut.done):
                    break
                if ticks > 1_000_000:
                    raise RuntimeError("accelerator never raised done")
            cycles = ctx.get(dut.cycles)
            words = []
            count = ofmap_words(config, m, n)
            for addr in range(count):
                ctx.set(dut.host_addr, addr)
                await ctx.tick()
                words.append(ctx.get(dut.host_rdata))
            results.append(
                RunResult(unpack(config, words, m, n), ticks, cycles, busy_seen, done_before, done_after_start)
            )

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results


def iverilog_testbench(config: ArrayConfig, top: str, a: np.ndarray, b: np.ndarray) -> str:
    """A Verilog testbench running ``A @ B`` on the exported top through its host port.

    Prints ``CYCLES <ticks> <cycles port>`` and one ``WORD <hex>`` per ofmap word.
    """
    m, k = a.shape
    n = b.shape[1]
    ifmap, weight = pack(config, a, b)
    lines = [
        "`timescale 1ns/1ps",
        "module tb;",
        "  reg clk = 0, rst = 1, host_we = 0, start = 0, accumulate = 0;",
        "  reg [1:0] host_sel = 0;",
        f"  reg [{_port_width(config, 'addr') - 1}:0] host_addr = 0;",
        f"  reg [{_port_width(config, 'data') - 1}:0] host_wdata = 0;",
        "  reg [31:0] m = 0, k = 0, n = 0;",
        f"  wire [{config.cols * config.acc_bits - 1}:0] host_rdata;",
        "  wire busy, done;",
        "  wire [31:0] cycles;",
        "  integer ticks;",
        f"  {top} dut(.clk(clk), .rst(rst), .host_sel(host_sel), .host_addr(host_addr),",
        "    .host_wdata(host_wdata), .host_we(host_we), .host_rdata(host_rdata), .m(m), .k(k), .n(n),",
        "    .accumulate(accumulate), .start(start), .busy(busy), .done(done), .cycles(cycles),",
        "    .x_base(0), .y_base(0), .o_base(0), .host_overlap(1'b0), .host_qsel(0), .a_stride(0), .move_we(1'b0),",
        "    .move_addr(0), .window(1'b0), "
        + ", ".join(f".{name}(0)" for name in WINDOW_FIELDS) + ");",
        "  always #5 clk = ~clk;",
        "  initial begin",
        "    @(negedge clk); @(negedge clk); rst = 0;",
    ]
    for sel, words in ((0, ifmap), (1, weight)):
        for addr, word in enumerate(words):
            lines.append(
                f"    @(negedge clk) host_sel = {sel}; host_addr = {addr}; host_wdata = 'h{word:x}; host_we = 1;"
            )
    lines += [
        f"    @(negedge clk) host_we = 0; m = {m}; k = {k}; n = {n}; start = 1;",
        "    @(negedge clk) start = 0; ticks = 0;",
        "    while (!done) begin @(negedge clk) ticks = ticks + 1; end",
        '    $display("CYCLES %0d %0d", ticks, cycles);',
    ]
    for addr in range(ofmap_words(config, m, n)):
        lines.append(f"    host_addr = {addr}; @(negedge clk) $display(\"WORD %h\", host_rdata);")
    lines += ["    $finish;", "  end", "endmodule", ""]
    return "\n".join(lines)


def _port_width(config: ArrayConfig, which: str) -> int:
    from rtl_gen import buffer_layout

    lay = buffer_layout(config)
    return lay.host_addr_bits if which == "addr" else lay.host_data_bits
