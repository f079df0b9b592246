"""The SoC simulation top exported to Verilog, run in Icarus under a Python-driven testbench (tests only).

:func:`open_board` builds the simulation top of ``rtl_gen.system_verilog`` (the SoC block, the DRAM
model with its file backdoor) together with :data:`TESTBENCH`: once per design, in the product's build
cache directory under its key and lock (``accel_dse.simulate.runner.build``), shared by every test
process of the run, ``iverilog`` called directly as the product's runner calls it (without the
runner's Python child process). :data:`TESTBENCH` is a plain-Verilog testbench that takes one command
a line on its standard input and answers each with one line: an AXI4-Lite register write or read
(driven just after a falling edge, as the product's cocotb testbench does), a wait for
``irq`` with a cycle limit, a reset, a load of the DRAM model from ``dram_load.hex`` or a dump of words
to ``dram_dump.hex`` (the backdoor, one clock cycle). ``vvp`` runs the build directly: no Python runs
per clock cycle and no VPI is loaded, so the same program runs many times faster than in Amaranth's
simulator. :class:`IcarusBoard` is the Python side (``system_testlib``'s benches drive it as they drive
Amaranth's simulator).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import IO

import numpy as np

from accel_spec.config import ArrayConfig
from accel_spec.isa import QUEUE_DEPTH
from rtl_gen import system_verilog
from rtl_gen.core.pe import Fault
from rtl_gen.soc.sim_system import BACKDOOR, sim_name

#: The simulation work directory (``builds``/``verilog`` caches shared by the run's test processes);
#: the ``conftest`` sets it per session, else a directory of this process.
WORK_DIR: Path | None = None

#: Smallest DRAM model, bytes: images are rounded up to a power of two of at least this, so tests with
#: small images share one build of a design.
MIN_DRAM_BYTES = 1 << 14

_TB = "soc_icarus_tb"

#: The testbench (``{top}``: the simulation top). Commands on stdin, ``op a b`` (op decimal, a and b
#: hex): 0 reset, 1 write register a := b, 2 read register a, 3 wait for irq at most a cycles,
#: 4 load the DRAM model from its load file, 5 dump words a..b to its dump file. Every answer line
#: starts with ``@``.
TESTBENCH = """
`timescale 1ns/1ps
module {tb};
  reg clk = 0, rst = 1;
  reg [11:0] awaddr = 0, araddr = 0;
  reg [31:0] wdata = 0;
  reg [3:0] wstrb = 0;
  reg awvalid = 0, wvalid = 0, bready = 0, arvalid = 0, rready = 0, aw_r, w_r, ar_r;
  wire awready, wready, bvalid, arready, rvalid, irq;
  wire [1:0] bresp, rresp;
  wire [31:0] rdata;
  reg [1:0] resp;
  reg [31:0] data;
  reg [63:0] a, b;
  integer op, n, k;
  {top} dut(.clk(clk), .rst(rst), .irq(irq),
    .s_axil_awaddr(awaddr), .s_axil_awvalid(awvalid), .s_axil_awready(awready),
    .s_axil_wdata(wdata), .s_axil_wstrb(wstrb), .s_axil_wvalid(wvalid), .s_axil_wready(wready),
    .s_axil_bresp(bresp), .s_axil_bvalid(bvalid), .s_axil_bready(bready),
    .s_axil_araddr(araddr), .s_axil_arvalid(arvalid), .s_axil_arready(arready),
    .s_axil_rdata(rdata), .s_axil_rresp(rresp), .s_axil_rvalid(rvalid), .s_axil_rready(rready),
    .bd_addr({{{bd_addr}{{1'b0}}}}), .bd_wdata({{{bd_data}{{1'b0}}}}), .bd_we(1'b0));
  always #5 clk = ~clk;
  initial begin
    @(negedge clk);
    forever begin
      n = $fscanf(32'h8000_0000, "%d %h %h", op, a, b);
      if (n != 3) $finish;
      case (op)
        0: begin
          rst = 1; @(negedge clk); @(negedge clk); rst = 0; @(negedge clk);
          $display("@K");
        end
        1: begin
          awaddr = a; wdata = b; wstrb = 4'hf; awvalid = 1; wvalid = 1; k = 0;
          while ((awvalid || wvalid) && k < 64) begin
            aw_r = awready; w_r = wready;
            @(negedge clk);
            if (aw_r) awvalid = 0;
            if (w_r) wvalid = 0;
            k = k + 1;
          end
          bready = 1;
          while (!bvalid && k < 128) begin @(negedge clk); k = k + 1; end
          resp = bresp;
          @(negedge clk);
          bready = 0;
          if (k >= 128) $display("@X"); else $display("@B %h", resp);
        end
        2: begin
          araddr = a; arvalid = 1; k = 0;
          while (arvalid && k < 64) begin
            ar_r = arready;
            @(negedge clk);
            if (ar_r) arvalid = 0;
            k = k + 1;
          end
          rready = 1;
          while (!rvalid && k < 128) begin @(negedge clk); k = k + 1; end
          resp = rresp; data = rdata;
          @(negedge clk);
          rready = 0;
          if (k >= 128) $display("@X"); else $display("@R %h %h", resp, data);
        end
        3: begin
          k = 0;
          while (!irq && k <= a) begin @(negedge clk); k = k + 1; end
          $display("@I %0d", k);
        end
        4: begin
          dut.dram.{cmd} = {load}; @(negedge clk); dut.dram.{cmd} = 0;
          $display("@L");
        end
        5: begin
          dut.dram.{lo} = a; dut.dram.{hi} = b; dut.dram.{cmd} = {dump}; @(negedge clk); dut.dram.{cmd} = 0;
          $display("@D");
        end
        default: $finish;
      endcase
      $fflush;
    end
  end
endmodule
"""


def _work_dir() -> Path:
    global WORK_DIR
    if WORK_DIR is None:
        WORK_DIR = Path(tempfile.mkdtemp(prefix="soc-icarus-"))
    return WORK_DIR


def dram_words(image_words: int, data_bytes: int) -> int:
    """Words of the DRAM model for an image of ``image_words`` words: a power of two, at least
    :data:`MIN_DRAM_BYTES`."""
    need = max(image_words, -(-MIN_DRAM_BYTES // data_bytes), 2)
    return 1 << (need - 1).bit_length()


def _ports(verilog: str, top: str) -> dict[str, int]:
    """Widths of the simulation top's backdoor ports ``bd_addr`` and ``bd_wdata``."""
    body = verilog[verilog.index(f"module {top}("):]
    body = body[:body.index("endmodule")]
    out = {}
    for name in ("bd_addr", "bd_wdata"):
        found = re.search(rf"^\s*input (?:\[(\d+):0\] )?{name};", body, re.M)
        if found is None:
            raise RuntimeError(f"no input {name} in the simulation top {top}")
        out[name] = int(found.group(1) or 0) + 1
    return out


def build(config: ArrayConfig, *, latency: int, words: int, rate: tuple[int, int] | None = None,
          fault: Fault | None = None, queue_depth: int | None = None, stall_seed: int = 0) -> Path:
    """The ``vvp`` image of the simulation top of ``config`` (DRAM model of ``words`` words, ``latency``
    cycles, paced to ``rate``) with :data:`TESTBENCH`: built once per design, from the build cache
    (its memories started at zero, as the product's Icarus builds start them:
    ``accel_dse.simulate.runner.memory_zeroing``)."""
    work = _work_dir()
    top = sim_name(config, fault)
    depth = None if queue_depth == QUEUE_DEPTH else queue_depth  # the default: the product's cache key
    dut = system_verilog(config, fault=fault, dram=(latency, words), rate=rate, cache_dir=work / "verilog",
                         queue_depth=depth, stall_seed=stall_seed)
    ports = _ports(dut, top)
    b = BACKDOOR
    tb = TESTBENCH.format(tb=_TB, top=top, bd_addr=ports["bd_addr"], bd_data=ports["bd_wdata"], cmd=b["cmd"],
                          lo=b["lo"], hi=b["hi"], load=b["load"], dump=b["dump"])
    return _compiled(dut + tb, work)


def _compiled(verilog: str, work: Path) -> Path:
    """The ``vvp`` image of ``verilog`` (top :data:`_TB`): ``iverilog`` on the text the product's Icarus
    build compiles (its memories zeroed, ``runner.memory_zeroing``) with its build arguments and
    timescale (what ``build_design``'s runner child runs), once per text: kept in ``work``'s build
    cache under the product's cache key, built under its lock.

    Raises:
        RuntimeError: ``iverilog`` failed (its output in the message).
    """
    from accel_dse.simulate import find_simulator
    from accel_dse.simulate.runner.build import ICARUS_ARGS, _cache_key, _locked
    from accel_dse.simulate.runner.memory_zeroing import zero_memories

    simulator = find_simulator("icarus")
    builds = work / "builds"
    name = f"{_TB}-iverilog-{_cache_key(verilog, _TB, simulator)}"
    image = builds / name / "sim.vvp"
    with _locked(builds / f"{name}.lock"):
        if image.is_file():
            return image
        tmp = builds / f"{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        (tmp / f"{_TB}.v").write_text(zero_memories(verilog), "utf-8")
        (tmp / "cmds.f").write_text("+timescale+1ns/1ps\n", "utf-8")
        proc = subprocess.run([simulator.executable, "-o", "sim.vvp", "-s", _TB, "-g2012", *ICARUS_ARGS,
                               "-f", "cmds.f", f"{_TB}.v"], cwd=tmp, env=simulator.environ(),
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"iverilog failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
        tmp.rename(builds / name)
    return image


class IcarusBoard:
    """One ``vvp`` run of a build of :func:`build`: the testbench's commands, one at a time."""

    def __init__(self, image: Path, data_bytes: int) -> None:
        self.W = data_bytes
        self.dir = tempfile.TemporaryDirectory(prefix="soc-run-", dir=_work_dir())
        self.cwd = Path(self.dir.name)
        self.log: IO[str] = open(self.cwd / "vvp.log", "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(["vvp", "-n", str(image)], cwd=self.cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)

    def close(self) -> None:
        """End the simulator and remove the run's files."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()
        self.dir.cleanup()

    def __enter__(self) -> IcarusBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def command(self, op: int, a: int = 0, b: int = 0) -> list[str]:
        """Send one command; the words of its answer line (after ``@``)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{op} {a:x} {b:x}\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("@"):
                return line[1:].split()
        self.log.flush()
        raise RuntimeError(f"vvp ended before answering command {op}: "
                           f"{(self.cwd / 'vvp.log').read_text(errors='replace')[-2000:]}")

    def reset(self) -> None:
        self.command(0)

    def write(self, addr: int, value: int) -> int:
        """One register write; its BRESP."""
        got = self.command(1, addr, value & 0xFFFFFFFF)
        if got[0] != "B":
            raise AssertionError(f"write of 0x{addr:03X} was not answered")
        return int(got[1], 16)

    def read(self, addr: int) -> tuple[int, int]:
        """One register read; ``(RDATA, RRESP)``."""
        got = self.command(2, addr)
        if got[0] != "R":
            raise AssertionError(f"read of 0x{addr:03X} was not answered")
        return int(got[2], 16), int(got[1], 16)

    def wait_irq(self, limit: int) -> int:
        """Cycles until ``irq`` (``limit + 1`` if it did not rise within ``limit``)."""
        return int(self.command(3, limit)[1])

    def load(self, words: np.ndarray) -> None:
        """DRAM words ``0 ..`` := ``words`` (one row of bytes each, little-endian), in one clock cycle."""
        W = self.W
        digits = np.frombuffer(np.ascontiguousarray(words[:, ::-1]).tobytes().hex().encode(), np.uint8)
        lines = np.full((len(words), 2 * W + 1), ord("\n"), np.uint8)
        lines[:, :-1] = digits.reshape(len(words), 2 * W)
        (self.cwd / BACKDOOR["load_file"]).write_bytes(b"@0\n" + lines.tobytes())
        self.command(4)

    def dump(self, count: int) -> np.ndarray:
        """The first ``count`` words of DRAM as bytes (an unknown bit reads 0)."""
        self.command(5, 0, count - 1)
        text = (self.cwd / BACKDOOR["dump_file"]).read_text("ascii")
        words = [w for line in text.splitlines() for w in line.split("//", 1)[0].split() if not w.startswith("@")]
        if len(words) != count:
            raise RuntimeError(f"the DRAM backdoor dumped {len(words)} words, not {count}")
        digits = "".join(w.rjust(2 * self.W, "0") for w in words).lower().replace("x", "0").replace("z", "0")
        return np.frombuffer(bytes.fromhex(digits), np.uint8).reshape(-1, self.W)[:, ::-1].reshape(-1).copy()


def vvp_available() -> bool:
    """Whether Icarus's ``vvp`` and ``iverilog`` are on ``PATH``."""
    return bool(shutil.which("vvp") and shutil.which("iverilog")) and os.name == "posix"
