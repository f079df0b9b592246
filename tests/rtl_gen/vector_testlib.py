"""Run one vector op on ``rtl_gen.core.vector_unit.VectorUnit`` (tests only), in Amaranth's
simulator or, exported to Verilog, in Icarus.

The unit sits in :class:`Harness` on a test memory of int8 words (two read ports of one cycle
latency and a write port, as an on-chip buffer gives it), initialised with the operands at
``src``/``src2`` (rows of ``n`` elements padded to whole words; a RoPE's ``y`` is its table,
``accel_spec.vector_isa.rope_table_row`` per position: :func:`rope_table`); the op runs from one ``start``
and the output rows are read back from ``dst`` through the harness's ``host_addr`` port while
the unit is idle (a pooling's rows are NHWC pixels, its output the pooled image). Returns the
output and the busy cycles the unit counted. A transpose, which is no workload op, runs from its
registers (:class:`TransposeRun`) and returns the whole memory after it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from amaranth import Module, Mux
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from accel_spec.vector_isa import NPARAMS, VECTOR_CODES
from perf_model.compiler.vector import VectorRegisters, vector_registers
from perf_model.vector_timing import vector_cycles
from rtl_gen.core.vector_unit import VectorUnit
from workloads.vector_ops import VectorOp

_REGS = (("kind", 4), ("src", None), ("src2", None), ("dst", None), ("rows", 24), ("words", 24), ("n", 24),
         ("qrows", 16), ("params", 32 * NPARAMS))


def rope_table(op: VectorOp, lanes: int) -> np.ndarray:
    """The table operand of RoPE ``op`` (shape ``(b, s, h, dh)``) as the host lays it out: one row of
    ``2 dh`` codes per (batch, position), ``workloads.rope_op_rows``."""
    from workloads import rope_op_rows

    b, s = op.shape[:2]
    return np.tile(np.array(rope_op_rows(op, s, lanes), np.int8), (b, 1))


def _words(rows: np.ndarray, words: int, lanes: int) -> list[int]:
    """Rows of int8 values as words of ``lanes`` lanes (lane ``i`` at bits ``[8i, 8i + 8)``)."""
    out = []
    for row in rows:
        padded = np.zeros(words * lanes, np.int64)
        padded[:row.size] = row
        for w in range(words):
            out.append(sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(padded[w * lanes:(w + 1) * lanes])))
    return out


class Harness(wiring.Component):
    """The unit on a memory of ``len(init)`` words; ``host_addr`` reads a word (one cycle) when idle."""

    def __init__(self, lanes: int, init: list[int]) -> None:
        self.lanes = lanes
        self.init = init
        self.addr_bits = max(1, (len(init) - 1).bit_length())
        a = self.addr_bits
        super().__init__({**{name: In(width or a) for name, width in _REGS}, "start": In(1), "busy": Out(1),
                          "done": Out(1), "cycles": Out(32), "host_addr": In(a), "host_rdata": Out(8 * lanes)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=8 * self.lanes, depth=len(self.init), init=self.init)
        m.submodules.unit = unit = VectorUnit(lanes=self.lanes, addr_bits=self.addr_bits)
        rd, rd2, wr = mem.read_port(), mem.read_port(), mem.write_port()
        m.d.comb += [*(getattr(unit, name).eq(getattr(self, name)) for name, _ in _REGS), unit.start.eq(self.start),
                     self.busy.eq(unit.busy), self.done.eq(unit.done), self.cycles.eq(unit.cycles),
                     rd.addr.eq(unit.rd_addr), rd2.addr.eq(Mux(unit.busy, unit.rd2_addr, self.host_addr)),
                     unit.rd_data.eq(rd.data), unit.rd2_data.eq(rd2.data), self.host_rdata.eq(rd2.data),
                     wr.addr.eq(unit.wr_addr), wr.data.eq(unit.wr_data), wr.en.eq(unit.wr_en)]
        return m


def _row_words(regs: VectorRegisters) -> int:
    """Words of one row of ``n`` elements in memory (a pooling's rows are pixels)."""
    return regs.plan.pool.words_c if regs.plan.pool is not None else regs.plan.words


def _setup(op: VectorOp, lanes: int, x: np.ndarray, y: np.ndarray | None,
           tamper: tuple[int, int] | None) -> tuple[VectorRegisters, list[int]]:
    plan = vector_registers(op, lanes).plan
    total, out = plan.rows * plan.words, plan.rows * plan.out_words
    second = plan.table_rows * plan.table_words if plan.table_words else total  # a RoPE's table
    regs = vector_registers(op, lanes, src=0, src2=total, dst=total + second)
    if tamper is not None:
        params = list(regs.params)
        params[tamper[0]] += tamper[1]
        regs = dataclasses.replace(regs, params=tuple(params))
    words = _row_words(regs)
    init = _words(x.reshape(-1, plan.n), words, lanes)
    init += _words(y.reshape(-1, plan.n), words, lanes) if y is not None else [0] * second
    return regs, init + [0] * out


def _values(regs: VectorRegisters) -> dict[str, int]:
    p = regs.plan
    return {"kind": regs.kind, "src": regs.src, "src2": regs.src2, "dst": regs.dst, "rows": p.rows, "words": p.words,
            "n": p.n, "qrows": p.qrows, "params": regs.packed_params()}


def _out_shape(regs: VectorRegisters, shape: tuple[int, ...]) -> tuple[int, ...]:
    g = regs.plan.pool
    return shape if g is None else (shape[0], g.out_h, g.out_w, shape[3])


def _unpack(regs: VectorRegisters, words: list[int], shape: tuple[int, ...]) -> np.ndarray:
    p = regs.plan
    out = np.array([[(word >> (8 * i)) & 0xFF for i in range(p.lanes)] for word in words], np.int64)
    out = out.reshape(-1, _row_words(regs) * p.lanes)
    return np.where(out >= 128, out - 256, out)[:, :p.n].reshape(_out_shape(regs, shape))


def _simulate(dut: Harness, values: dict[str, int], addrs: range, limit: int) -> tuple[list[int], int]:
    """One ``start`` of the harness's unit with registers ``values`` in Amaranth's simulator: the
    words at ``addrs`` afterwards and the busy cycles it counted (at most ``limit`` cycles)."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    result: dict[str, object] = {}

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for port, value in values.items():
            ctx.set(getattr(dut, port), value)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for _ in range(limit):
            await ctx.tick()
            if ctx.get(dut.done):
                break
        else:
            raise RuntimeError("vector unit never finished")
        result["cycles"] = ctx.get(dut.cycles)
        words = []
        for addr in addrs:
            ctx.set(dut.host_addr, addr)
            await ctx.tick()
            words.append(ctx.get(dut.host_rdata))
        result["words"] = words

    sim.add_testbench(bench)
    sim.run()
    return result["words"], int(result["cycles"])  # type: ignore[return-value, call-overload]


def run_vector(op: VectorOp, lanes: int, x: np.ndarray, y: np.ndarray | None = None,
               tamper: tuple[int, int] | None = None) -> tuple[np.ndarray, int]:
    """``op`` on int8 ``x`` (and ``y``) in Amaranth's simulator: ``(output like x, busy cycles)``.

    ``tamper``: ``(register, delta)`` added to one parameter register (a fault the comparison must see).
    """
    regs, init = _setup(op, lanes, x, y, tamper)
    count = regs.plan.rows * regs.plan.out_words
    limit = 10 * regs.plan.rows * (3 * regs.plan.words + 200) + 100 + 4 * vector_cycles(op, lanes)
    words, cycles = _simulate(Harness(lanes, init), _values(regs), range(regs.dst, regs.dst + count), limit)
    return _unpack(regs, words, x.shape), cycles


@dataclasses.dataclass(frozen=True)
class TransposeRun:
    """A transpose on the harness: its registers (``accel_spec.vector_isa``'s docstring) and the
    memory it starts from, input rows at word 0 (lanes past ``n``, padding, holding code ``junk``:
    no output may show it), the output region after them filled with ``fill``."""

    lanes: int
    x: np.ndarray  # (R, n) int8
    pitch: int  # output row pitch in words (parameter register 0)
    words: int  # words of an input row (at least ceil(n / lanes))
    fill: int  # the word every output-region word holds before the run
    spare: int = 1  # words after the output region (also ``fill``): nothing may be written there
    junk: int = -77

    @property
    def dst(self) -> int:
        return self.x.shape[0] * self.words

    def init(self) -> list[int]:
        """The memory before the run: input rows, then the output region and the spare words."""
        rows, n = self.x.shape
        padded = np.full((rows, self.words * self.lanes), self.junk, np.int64)
        padded[:, :n] = self.x
        return _words(padded, self.words, self.lanes) + [self.fill] * (n * self.pitch + self.spare)

    def values(self) -> dict[str, int]:
        rows, n = self.x.shape
        return {"kind": VECTOR_CODES["transpose"], "src": 0, "src2": 0, "dst": self.dst, "rows": rows,
                "words": self.words, "n": n, "qrows": 1, "params": self.pitch}


def run_transpose(run: TransposeRun) -> tuple[list[int], int]:
    """``run`` in Amaranth's simulator: ``(every word of the memory afterwards, busy cycles)``."""
    init = run.init()
    rows, n = run.x.shape
    limit = 4 * (rows + 2) * (run.words + 2) * (n + 2) + 100
    return _simulate(Harness(run.lanes, init), run.values(), range(len(init)), limit)


def run_vector_icarus(op: VectorOp, lanes: int, x: np.ndarray, y: np.ndarray | None, iverilog: str,
                      vvp: str) -> tuple[np.ndarray, int]:
    """``op`` on the harness exported to Verilog, in Icarus: ``(output like x, busy cycles)``."""
    regs, init = _setup(op, lanes, x, y, None)
    count = regs.plan.rows * regs.plan.out_words
    words, cycles = _icarus(Harness(lanes, init), _values(regs), range(regs.dst, regs.dst + count), iverilog, vvp)
    return _unpack(regs, words, x.shape), cycles


def run_transpose_icarus(run: TransposeRun, iverilog: str, vvp: str) -> tuple[list[int], int]:
    """``run`` on the harness exported to Verilog, in Icarus: :func:`run_transpose`'s figures."""
    init = run.init()
    return _icarus(Harness(run.lanes, init), run.values(), range(len(init)), iverilog, vvp)


def _icarus(dut: Harness, values: dict[str, int], addrs: range, iverilog: str, vvp: str) -> tuple[list[int], int]:
    """:func:`_simulate` on the harness exported to Verilog, in Icarus."""
    from amaranth.back import verilog

    lanes = dut.lanes
    text = verilog.convert(dut, name="vector_harness", emit_src=False, strip_internal_attrs=True)
    widths = {name: width or dut.addr_bits for name, width in _REGS}
    lines = ["`timescale 1ns/1ps", "module tb;", "  reg clk = 0, rst = 1, start = 0;",
             *(f"  reg [{widths[name] - 1}:0] {name} = 0;" for name, _ in _REGS),
             f"  reg [{dut.addr_bits - 1}:0] host_addr = 0;", f"  wire [{8 * lanes - 1}:0] host_rdata;",
             "  wire busy, done;", "  wire [31:0] cycles;",
             "  vector_harness dut(.clk(clk), .rst(rst), .start(start), .busy(busy), .done(done), .cycles(cycles),",
             "    .host_addr(host_addr), .host_rdata(host_rdata),",
             "    " + ", ".join(f".{name}({name})" for name, _ in _REGS) + ");",
             "  always #5 clk = ~clk;", "  initial begin", "    @(negedge clk); @(negedge clk); rst = 0;",
             "    @(negedge clk) " + " ".join(f"{k} = 'h{v:x};" for k, v in values.items()) + " start = 1;",
             "    @(negedge clk) start = 0;", "    while (!done) @(negedge clk);",
             '    $display("CYCLES %0d", cycles);']
    for addr in addrs:
        lines.append(f'    host_addr = {addr}; @(negedge clk) $display("WORD %h", host_rdata);')
    lines += ["    $finish;", "  end", "endmodule", ""]
    with tempfile.TemporaryDirectory(prefix="vector-icarus-") as tmp:
        (Path(tmp) / "dut.v").write_text(text, "utf-8")
        (Path(tmp) / "tb.v").write_text("\n".join(lines), "utf-8")
        subprocess.run([iverilog, "-g2012", "-o", "sim.vvp", "tb.v", "dut.v"], cwd=tmp, check=True,
                       capture_output=True, text=True)
        out = subprocess.run([vvp, "-n", "sim.vvp"], cwd=tmp, check=True, capture_output=True, text=True).stdout
    cycles = next(int(line.split()[1]) for line in out.splitlines() if line.startswith("CYCLES "))
    words = [int(line.split()[1], 16) for line in out.splitlines() if line.startswith("WORD ")]
    return words, cycles
