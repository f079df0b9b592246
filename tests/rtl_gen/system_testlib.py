"""Run compiled programs on the SoC block + DRAM model (shared by tests): exported to Verilog in Icarus
(``soc_icarus``), or in Amaranth's simulator where a test needs what only it gives (:func:`simulator`).
One bench per kind of run drives either through the same board steps."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Coroutine
from fractions import Fraction
from typing import Any

import numpy as np
from amaranth.sim import Simulator
from axil_testlib import OKAY, AxilMaster

from accel_dse.simulate.dram.image import (
    pack_qparam_lanes,
    pack_tensor,
    program_image,
    qparam_fields,
    unpack_tensor,
)
from accel_spec.config import ArrayConfig
from accel_spec.isa import Command
from perf_model.compiler.program import GemmProgram, compile_gemm
from perf_model.program_timing import ProgramTiming, gemm_program_cycles, program_cycles
from rtl_gen.core.pe import Fault
from rtl_gen.soc.regmap import CONTROL_REGMAP
from rtl_gen.soc.sim_system import SimSystem
from workloads.ops import Gemm, Requant

REG = {reg.name: reg.offset for reg in CONTROL_REGMAP}
# A 32 x 32 array's wide words become expressions of thousands of terms in the Python simulator's
# generated code, which Python's compiler nests one level per term.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))


@dataclasses.dataclass
class SocRun:
    """What one program did on the RTL, and what the model says it does."""

    cycles: int  # from the START write's response to irq (of the last queue-load), counted by the testbench
    total: int  # the counters (summed over the queue-loads)
    compute: int
    stall: int
    error_code: int
    error_pc: int
    status: int
    dram: np.ndarray  # the DRAM image after the program
    program: GemmProgram
    model: ProgramTiming
    sdc_count: int = 0  # SDC_COUNT, SDC_PC and IRQ_STATUS after the (last) program
    sdc_pc: int = 0
    irq_status: int = 0


#: The simulator of the SoC tests (:func:`simulator`): ``icarus`` (the simulation top exported to
#: Verilog, ``soc_icarus``) or ``amaranth`` (Amaranth's Python simulator); ``$ACCEL_DSE_SOC_SIM``
#: overrides it for the whole run.
SIMULATORS = ("icarus", "amaranth")


#: Arrays of at least this many PEs run in Amaranth's simulator unless a test names Icarus: Icarus
#: takes ~60 ms a busy cycle on a 32 x 32 int16 array (~8 ms idle), no faster than Amaranth's simulator
#: there, and each design's Verilog converts in ~15 s (measured: /work/notes/socsim6.md).
ICARUS_MAX_PES = 256


#: Programs the walk times at fewer cycles run in Amaranth's simulator unless a test names Icarus: a
#: design's first Icarus run converts and builds it (~4 CPU-s on a 4 x 4 array), more than Amaranth's
#: simulator takes for a short program (~1.5 CPU-s); a warm Icarus run takes ~0.3.
ICARUS_MIN_CYCLES = 2000


def simulator(sim: str | None = None, *, config: ArrayConfig | None = None, cycles: int | None = None,
              python_only: bool = False) -> str:
    """The simulator a run takes: ``sim``, else ``$ACCEL_DSE_SOC_SIM``, else Icarus for arrays
    (``config``) below :data:`ICARUS_MAX_PES` PEs and programs the walk times (``cycles``) at
    :data:`ICARUS_MIN_CYCLES` or more (or cannot time); Amaranth's where the run needs what only its
    simulator gives (``python_only``: a register held stuck)."""
    big = config is not None and config.rows * config.cols >= ICARUS_MAX_PES
    short = cycles is not None and cycles < ICARUS_MIN_CYCLES
    chosen = sim or os.environ.get("ACCEL_DSE_SOC_SIM") or ("amaranth" if big or short else "icarus")
    if chosen not in SIMULATORS:
        raise ValueError(f"SoC simulator must be one of {SIMULATORS}, not {chosen!r}")
    return "amaranth" if python_only else chosen


class _AmaranthBoard:
    """The simulation top in Amaranth's simulator, as the benches below drive a board."""

    def __init__(self, ctx: Any, dut: SimSystem, data_bytes: int) -> None:
        self.ctx, self.dut, self.W = ctx, dut, data_bytes
        self.bus = AxilMaster(ctx, dut)

    async def reset(self) -> None:
        await self.bus.reset()

    async def write(self, name: str, value: int) -> None:
        await self.bus.write_ok(REG[name], value)

    async def read(self, name: str) -> int:
        return await self.bus.read_ok(REG[name])

    async def wait_irq(self, limit: int) -> int:
        cycles = 0
        while not self.ctx.get(self.dut.irq) and cycles <= limit:
            await self.ctx.tick()
            cycles += 1
        return cycles

    async def load(self, words: np.ndarray, zeros: bool = False) -> None:
        write_dram(self.ctx, self.dut, words, zeros=zeros)

    async def dump(self, count: int) -> np.ndarray:
        return read_dram(self.ctx, self.dut, count, self.W)


class _VerilogBoard:
    """The simulation top in Icarus (``soc_icarus.IcarusBoard``), as the benches below drive a board."""

    def __init__(self, board: Any) -> None:
        self.board = board

    async def reset(self) -> None:
        self.board.reset()

    async def write(self, name: str, value: int) -> None:
        resp = self.board.write(REG[name], value)
        assert resp == OKAY, f"write of {name} answered {resp:#04b}"

    async def read(self, name: str) -> int:
        data, resp = self.board.read(REG[name])
        assert resp == OKAY, f"read of {name} answered {resp:#04b}"
        return data

    async def wait_irq(self, limit: int) -> int:
        return self.board.wait_irq(limit)

    async def load(self, words: np.ndarray, zeros: bool = False) -> None:
        self.board.load(words)  # every word, zero or not

    async def dump(self, count: int) -> np.ndarray:
        return self.board.dump(count)


def _drive(bench: Coroutine[Any, Any, None]) -> None:
    """Run a bench on a :class:`_VerilogBoard`, whose steps never suspend it."""
    try:
        bench.send(None)
    except StopIteration:
        return
    raise RuntimeError("a bench on the Verilog board waited")


def _run(sim: str, config: ArrayConfig, data_bytes: int, make_bench: Callable[[Any], Coroutine[Any, Any, None]], *,
         force: Callable[[Any], tuple[Any, int, int]] | None = None, soc: dict[str, Any] | None = None,
         **build: Any) -> None:
    """Run ``make_bench(board)`` on the simulation top of ``config`` (``build``: ``soc_icarus.build``'s
    arguments, the DRAM model's ``latency``, ``words`` and ``rate``, ``fault``, ``queue_depth``,
    ``stall_seed``): exported to Verilog in Icarus, or in Amaranth's simulator (``force``: a register
    held stuck, from the design; ``soc``: more arguments of ``AxiAccelerator``)."""
    if sim == "icarus":
        import soc_icarus

        with soc_icarus.IcarusBoard(soc_icarus.build(config, **build), data_bytes) as board:
            _drive(make_bench(_VerilogBoard(board)))
        return
    dut = SimSystem(config, latency=build["latency"], dram_words=build["words"], queue_depth=build["queue_depth"],
                    fault=build.get("fault"), stall_seed=build.get("stall_seed", 0), rate=build.get("rate"),
                    **(soc or {}))

    async def bench(ctx: Any) -> None:
        await make_bench(_AmaranthBoard(ctx, dut, data_bytes))

    sim_ = Simulator(dut)
    sim_.add_clock(1e-8)
    sim_.add_testbench(bench)
    if force is not None:
        register, bit, level = force(dut)

        async def stuck(ctx: Any) -> None:
            while True:
                value = ctx.get(register)
                ctx.set(register, value | (1 << bit) if level else value & ~(1 << bit))
                await ctx.tick()

        sim_.add_testbench(stuck, background=True)
    sim_.run()


async def _start(board: Any, base: int, length: int, limit: int, what: str) -> int:
    """Write QUEUE_BASE, QUEUE_LEN and CTRL.START; the cycles until ``irq`` (at most ``limit``)."""
    await board.write("QUEUE_BASE_LO", base & 0xFFFFFFFF)
    await board.write("QUEUE_BASE_HI", base >> 32)
    await board.write("QUEUE_LEN", length)
    await board.write("CTRL", 1)
    cycles = await board.wait_irq(limit)
    if cycles > limit:
        raise RuntimeError(f"{what} did not end within {limit} cycles")
    return cycles


def small(dataflow: str = "ws", double: bool = True, rows: int = 2, cols: int = 2, bw: float = 2.0,
          **kwargs: Any) -> ArrayConfig:
    """A design small enough for Amaranth's simulator, with buffers that force several tiles."""
    return ArrayConfig(rows=rows, cols=cols, dataflow=dataflow, ifmap_sram_kib=1, weight_sram_kib=1,
                       ofmap_sram_kib=1, dram_bytes_per_cycle=bw, double_buffered=double, **kwargs)


def run_soc(config: ArrayConfig, a: np.ndarray, b: np.ndarray, *, latency: int = 7, requant: Requant | None = None,
            commands: list[Command] | None = None, dram_extra: int = 0, limit: int = 400_000,
            queue_len: int | None = None, queue_base: int = 0, stall_seed: int = 0,
            queue_depth: int = 256, rate: Fraction | None = None, fault: Fault | None = None,
            sdc_stop: bool = False, force: Callable[[Any], tuple[Any, int, int]] | None = None,
            sim: str | None = None) -> SocRun:
    """Compile ``a @ b`` for ``config``, run it from DRAM, return the counters and DRAM.

    ``commands`` replaces the compiled program (malformed programs); ``queue_len`` the length
    register; ``dram_extra`` adds bytes of DRAM beyond the image. A program longer than
    ``queue_depth`` runs as the compiler's queue-loads, one START after another's interrupt.
    ``rate``: the DRAM model paces its beats to that many bytes a cycle, and so does the walk.
    ``fault``: the test-only stuck PE product bit; ``sdc_stop``: the value of ``SDC_CTRL.STOP``;
    ``force``: given the design, ``(register, bit, level)`` held stuck from the start (a register fault);
    ``sim``: the simulator (:func:`simulator`).
    """
    prog, image = gemm_image(config, a, b, requant, queue_depth=queue_depth, commands=commands, dram_extra=dram_extra)
    return run_image(config, prog, image, latency=latency, limit=limit, queue_len=queue_len,
                     queue_base=queue_base, stall_seed=stall_seed, queue_depth=queue_depth, rate=rate,
                     fault=fault, sdc_stop=sdc_stop, force=force, sim=sim)


def gemm_image(config: ArrayConfig, a: np.ndarray, b: np.ndarray, requant: Requant | None, *, queue_depth: int = 256,
               commands: list[Command] | None = None, dram_extra: int = 0) -> tuple[GemmProgram, np.ndarray]:
    """The compiled program of ``a @ b`` (``requant``: its output stage) and its DRAM image, padded to whole
    beats (``commands`` and ``dram_extra``: as :func:`run_soc`)."""
    m, k = a.shape
    n = b.shape[1]
    prog = compile_gemm(config, Gemm(m=m, k=k, n=n), requant=requant is not None, queue_depth=queue_depth)
    if commands is not None:
        prog = dataclasses.replace(prog, commands=tuple(commands), chunks=((0, len(commands)),))
    tensors = {"a": pack_tensor(prog.tensors["a"], a), "b": pack_tensor(prog.tensors["b"], b)}
    if requant is not None:
        tensors["q"] = pack_qparam_lanes(prog.tensors["q"], qparam_fields(requant, n))
    W = prog.data_bytes
    image = program_image(prog, tensors)
    return prog, np.concatenate([image, np.zeros(dram_extra + (-(len(image) + dram_extra)) % W, np.uint8)])


def write_dram(ctx: Any, dut: Any, words: np.ndarray, *, zeros: bool = False) -> None:
    """Write ``words`` (one row of bytes each, little-endian) into the DRAM model from word 0, through
    its word array (no clock cycle); zero words only with ``zeros`` (the model starts zeroed)."""
    for i, word in enumerate(words):
        value = int.from_bytes(bytes(word), "little")
        if value or zeros:
            ctx.set(dut.dram.data[i], value)


def read_dram(ctx: Any, dut: Any, count: int, data_bytes: int) -> np.ndarray:
    """The first ``count`` words of the DRAM model, as bytes."""
    return np.frombuffer(b"".join(ctx.get(dut.dram.data[i]).to_bytes(data_bytes, "little") for i in range(count)),
                         np.uint8)


def run_image(config: ArrayConfig, prog: GemmProgram, image: np.ndarray, *, latency: int = 7, limit: int = 400_000,
              queue_len: int | None = None, queue_base: int = 0, stall_seed: int = 0, queue_depth: int = 256,
              rate: Fraction | None = None, fault: Any = None, sdc_stop: bool = False,
              force: Callable[[Any], tuple[Any, int, int]] | None = None, sim: str | None = None,
              **soc: Any) -> SocRun:
    """Run ``prog`` from the DRAM ``image`` (bytes, a whole number of beats) on the SoC; the counters,
    the DRAM after it and the walk's timing (:func:`run_soc`). ``fault``: a PE fault (``rtl_gen.Fault``);
    ``sdc_stop``: the value of ``SDC_CTRL.STOP``; ``sim``: the simulator (:func:`simulator`; a
    ``force`` or ``soc``, more arguments of ``AxiAccelerator``, runs in Amaranth's)."""
    (run,) = run_images(config, [(prog, image)], latency=latency, limit=limit, queue_len=queue_len,
                        queue_base=queue_base, stall_seed=stall_seed, queue_depth=queue_depth, rate=rate, fault=fault,
                        sdc_stop=sdc_stop, force=force, sim=sim, **soc)
    return run


def run_socs(config: ArrayConfig, gemms: list[tuple[np.ndarray, np.ndarray, Requant | None]], *, latency: int = 7,
             queue_depth: int = 256, sim: str | None = None) -> list[SocRun]:
    """:func:`run_soc` of each ``(a, b, requant)`` in ``gemms``, program after program in one simulation of
    the design (:func:`run_images`): a big design's simulator is built once for all of them."""
    images = [gemm_image(config, a, b, requant, queue_depth=queue_depth) for a, b, requant in gemms]
    return run_images(config, images, latency=latency, queue_depth=queue_depth, sim=sim)


def run_images(config: ArrayConfig, programs: list[tuple[GemmProgram, np.ndarray]], *, latency: int = 7,
               limit: int = 400_000, queue_len: int | None = None, queue_base: int = 0, stall_seed: int = 0,
               queue_depth: int = 256, rate: Fraction | None = None, fault: Any = None, sdc_stop: bool = False,
               force: Callable[[Any], tuple[Any, int, int]] | None = None, sim: str | None = None,
               **soc: Any) -> list[SocRun]:
    """:func:`run_image` of each ``(prog, image)`` in ``programs``, one after another in one simulation:
    each image is loaded over the whole DRAM the previous one used (zeros too, as a fresh DRAM), DONE
    cleared before each START, and the counters, registers and DRAM read after each program."""
    W = programs[0][0].data_bytes
    models: list[ProgramTiming | None] = []
    for prog, _ in programs:
        if prog.data_bytes != W:
            raise ValueError("the programs of one simulation share a bus width")
        try:
            if len(prog.chunks) > 1:
                models.append(gemm_program_cycles(config, prog, latency=latency, rate=rate))
            else:
                models.append(program_cycles(config, prog.commands, latency=latency, rate=rate))
        except ValueError:  # a malformed program the walk cannot time (a transfer's lanes): the RTL refuses it
            models.append(None)
    cycles = None if None in models else sum(m.total for m in models if m is not None)
    sim = simulator(sim, config=config, cycles=cycles, python_only=force is not None or bool(soc))
    pace = None if rate is None else (rate.numerator, rate.denominator)
    longest = max(len(image) for _, image in programs) // W
    if sim == "icarus":
        import soc_icarus

        dram_words = soc_icarus.dram_words(longest, W)
    else:
        dram_words = max(2, longest)
    seen: list[dict[str, Any]] = [{} for _ in programs]

    async def bench(board: Any) -> None:
        for j, (prog, image) in enumerate(programs):
            words = image.reshape(-1, W)
            if j:  # the previous program's words zeroed too
                await board.load(np.concatenate([words, np.zeros((longest - len(words), W), np.uint8)]), zeros=True)
            else:
                await board.load(words)
                await board.reset()
                await board.write("IRQ_ENABLE", 0b11)
                await board.write("SDC_CTRL", int(sdc_stop))
            counters = {"total": 0, "compute": 0, "stall": 0}
            got = seen[j]
            for i, (first, end) in enumerate(prog.chunks):
                if i or j:
                    await board.write("IRQ_STATUS", 0b11)
                got["cycles"] = await _start(board, queue_base + first * 32,
                                             end - first if queue_len is None else queue_len, limit,
                                             "the program" if len(programs) == 1 else f"program {j}")
                for name, reg in (("total", "CYCLES_TOTAL"), ("compute", "CYCLES_COMPUTE"),
                                  ("stall", "CYCLES_DMA_STALL")):
                    lo = await board.read(f"{reg}_LO")
                    counters[name] += lo | await board.read(f"{reg}_HI") << 32
                got["code"] = await board.read("ERROR_CODE")
                got["pc"] = await board.read("ERROR_PC")
                got["status"] = await board.read("STATUS")
                for name in ("SDC_COUNT", "SDC_PC", "IRQ_STATUS"):
                    got[name] = await board.read(name)
                if got["code"]:
                    break
            got.update(counters)
            got["dram"] = await board.dump(len(words))

    _run(sim, config, W, bench, force=force, soc=soc, latency=latency, words=dram_words, rate=pace, fault=fault,
         queue_depth=queue_depth, stall_seed=stall_seed)
    return [SocRun(got["cycles"], got["total"], got["compute"], got["stall"], got["code"], got["pc"], got["status"],
                   got["dram"], prog, model, got["SDC_COUNT"], got["SDC_PC"], got["IRQ_STATUS"])
            for got, (prog, _), model in zip(seen, programs, models, strict=True)]


def result(run: SocRun) -> np.ndarray:
    """The C matrix the program left in DRAM."""
    return unpack_tensor(run.program.tensors["c"], run.dram[run.program.tensors["c"].base:])


@dataclasses.dataclass
class ChainRun:
    """A chain of requantised GEMMs run program after program on one SoC (no reset between)."""

    out: np.ndarray  # the last op's output, from DRAM
    totals: list[int]  # each program's CYCLES_TOTAL
    models: list[int]  # each program's walk total
    regions: tuple[int | None, ...]
    programs: tuple[GemmProgram, ...]
    codes: list[int]


def run_soc_chain(config: ArrayConfig, a: np.ndarray, bs: list[np.ndarray], requants: list[Requant], *,
                  reuse: bool, latency: int = 7, limit: int = 400_000, rate: Fraction | None = None,
                  sim: str | None = None) -> ChainRun:
    """Run ``a @ bs[0]`` requantised, its output ``@ bs[1]``, ...: with ``reuse`` the chain's
    programs of ``perf_model.compiler.chain`` (outputs kept on chip where they fit), else every layer
    through DRAM (the testbench copies each output into the next op's A). ``rate``: a paced DRAM
    (as :func:`run_soc`)."""
    from perf_model.compiler.chain import compile_chain

    gemms = [Gemm(m=a.shape[0], k=b.shape[0], n=b.shape[1]) for b in bs]
    plan, programs = compile_chain(config, gemms, [True] * len(bs), reuse=reuse, queue_depth=256)
    W = programs[0].data_bytes
    images = []
    for i, (prog, b, rq) in enumerate(zip(programs, bs, requants, strict=True)):
        tensors = {"a": pack_tensor(prog.tensors["a"], a if i == 0 else np.zeros((a.shape[0], b.shape[0]), int)),
                   "b": pack_tensor(prog.tensors["b"], b),
                   "q": pack_qparam_lanes(prog.tensors["q"], qparam_fields(rq, b.shape[1]))}
        image = program_image(prog, tensors)
        images.append(np.concatenate([image, np.zeros(-len(image) % W, np.uint8)]))
    sim = simulator(sim, config=config)
    words = max(len(img) for img in images) // W
    pace = None if rate is None else (rate.numerator, rate.denominator)
    if sim == "icarus":
        import soc_icarus

        dram_words = soc_icarus.dram_words(words, W)
    else:
        dram_words = max(2, words)
    seen: dict[str, Any] = {"totals": [], "codes": []}

    async def bench(board: Any) -> None:
        await board.reset()
        previous: np.ndarray | None = None
        for i, (prog, image) in enumerate(zip(programs, images, strict=True)):
            image = image.copy()
            if previous is not None and plan.regions[i - 1] is None:  # the link goes through DRAM
                t = prog.tensors["a"]
                image[t.base:t.base + t.nbytes] = pack_tensor(t, previous)
            await board.load(image.reshape(-1, W), zeros=True)  # over the previous program's DRAM
            await board.write("IRQ_ENABLE", 0b11)
            await _start(board, 0, len(prog.commands), limit, f"program {i}")
            lo = await board.read("CYCLES_TOTAL_LO")
            seen["totals"].append(lo | await board.read("CYCLES_TOTAL_HI") << 32)
            seen["codes"].append(await board.read("ERROR_CODE"))
            await board.write("IRQ_STATUS", 0b11)  # clear DONE before the next program
            dram = await board.dump(len(image) // W)
            previous = unpack_tensor(prog.tensors["c"], dram[prog.tensors["c"].base:])
        seen["out"] = previous

    _run(sim, config, W, bench, latency=latency, words=dram_words, rate=pace, queue_depth=256)
    models = [program_cycles(config, p.commands, latency=latency, rate=rate).total for p in programs]
    return ChainRun(seen["out"], seen["totals"], models, plan.regions, programs, seen["codes"])


def jax_int8_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The int8 reference product, int32 accumulators (JAX)."""
    import jax.numpy as jnp

    return np.asarray(jnp.matmul(jnp.asarray(a, jnp.int8), jnp.asarray(b, jnp.int8),
                                 preferred_element_type=jnp.int32))


def int8_operands(m: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random int8 ``A`` (``m x k``) and ``B`` (``k x n``)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (k, n))
