"""Run compiled programs on the SoC block + DRAM model in Amaranth's simulator (shared by tests)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from amaranth.sim import Simulator
from axil_testlib import AxilMaster

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


async def _start(ctx: Any, bus: AxilMaster, dut: SimSystem, base: int, length: int, limit: int, what: str) -> int:
    """Write QUEUE_BASE, QUEUE_LEN and CTRL.START; the cycles until ``irq`` (at most ``limit``)."""
    await bus.write_ok(REG["QUEUE_BASE_LO"], base & 0xFFFFFFFF)
    await bus.write_ok(REG["QUEUE_BASE_HI"], base >> 32)
    await bus.write_ok(REG["QUEUE_LEN"], length)
    await bus.write_ok(REG["CTRL"], 1)
    cycles = 0
    while not ctx.get(dut.irq):
        await ctx.tick()
        cycles += 1
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
            sdc_stop: bool = False, force: Callable[[Any], tuple[Any, int, int]] | None = None) -> SocRun:
    """Compile ``a @ b`` for ``config``, run it from DRAM, return the counters and DRAM.

    ``commands`` replaces the compiled program (malformed programs); ``queue_len`` the length
    register; ``dram_extra`` adds bytes of DRAM beyond the image. A program longer than
    ``queue_depth`` runs as the compiler's queue-loads, one START after another's interrupt.
    ``rate``: the DRAM model paces its beats to that many bytes a cycle, and so does the walk.
    ``fault``: the test-only stuck PE product bit; ``sdc_stop``: the value of ``SDC_CTRL.STOP``;
    ``force``: given the design, ``(register, bit, level)`` held stuck from the start (a register fault).
    """
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
    image = np.concatenate([image, np.zeros(dram_extra + (-(len(image) + dram_extra)) % W, np.uint8)])
    return run_image(config, prog, image, latency=latency, limit=limit, queue_len=queue_len,
                     queue_base=queue_base, stall_seed=stall_seed, queue_depth=queue_depth, rate=rate,
                     fault=fault, sdc_stop=sdc_stop, force=force)


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
              force: Callable[[Any], tuple[Any, int, int]] | None = None, **soc: Any) -> SocRun:
    """Run ``prog`` from the DRAM ``image`` (bytes, a whole number of beats) on the SoC; the counters,
    the DRAM after it and the walk's timing (:func:`run_soc`). ``fault``: a PE fault (``rtl_gen.Fault``);
    ``sdc_stop``: the value of ``SDC_CTRL.STOP``; ``soc``: more arguments of ``AxiAccelerator``."""
    W = prog.data_bytes
    dut = SimSystem(config, latency=latency, dram_words=max(2, len(image) // W), queue_depth=queue_depth, fault=fault,
                    stall_seed=stall_seed, rate=None if rate is None else (rate.numerator, rate.denominator), **soc)
    try:
        if len(prog.chunks) > 1:
            model = gemm_program_cycles(config, prog, latency=latency, rate=rate)
        else:
            model = program_cycles(config, prog.commands, latency=latency, rate=rate)
    except ValueError:  # a malformed program the walk cannot time (a transfer's lanes): the RTL refuses it
        model = None
    seen: dict[str, Any] = {}
    words = image.reshape(-1, W)

    async def bench(ctx: Any) -> None:
        write_dram(ctx, dut, words)
        bus = AxilMaster(ctx, dut)
        await bus.reset()
        await bus.write_ok(REG["IRQ_ENABLE"], 0b11)
        await bus.write_ok(REG["SDC_CTRL"], int(sdc_stop))
        counters = {"total": 0, "compute": 0, "stall": 0}
        for i, (first, end) in enumerate(prog.chunks):
            if i:
                await bus.write_ok(REG["IRQ_STATUS"], 0b11)
            seen["cycles"] = await _start(ctx, bus, dut, queue_base + first * 32,
                                          end - first if queue_len is None else queue_len, limit, "the program")
            for name, reg in (("total", "CYCLES_TOTAL"), ("compute", "CYCLES_COMPUTE"),
                              ("stall", "CYCLES_DMA_STALL")):
                lo = await bus.read_ok(REG[f"{reg}_LO"])
                counters[name] += lo | await bus.read_ok(REG[f"{reg}_HI"]) << 32
            seen["code"] = await bus.read_ok(REG["ERROR_CODE"])
            seen["pc"] = await bus.read_ok(REG["ERROR_PC"])
            seen["status"] = await bus.read_ok(REG["STATUS"])
            for name in ("SDC_COUNT", "SDC_PC", "IRQ_STATUS"):
                seen[name] = await bus.read_ok(REG[name])
            if seen["code"]:
                break
        seen.update(counters)
        seen["dram"] = read_dram(ctx, dut, len(words), W)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if force is not None:
        register, bit, level = force(dut)

        async def stuck(ctx: Any) -> None:
            while True:
                value = ctx.get(register)
                ctx.set(register, value | (1 << bit) if level else value & ~(1 << bit))
                await ctx.tick()

        sim.add_testbench(stuck, background=True)
    sim.run()
    return SocRun(seen["cycles"], seen["total"], seen["compute"], seen["stall"], seen["code"], seen["pc"],
                  seen["status"], seen["dram"], prog, model, seen["SDC_COUNT"], seen["SDC_PC"], seen["IRQ_STATUS"])


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
                  reuse: bool, latency: int = 7, limit: int = 400_000, rate: Fraction | None = None) -> ChainRun:
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
    words = max(len(img) for img in images) // W
    dut = SimSystem(config, latency=latency, dram_words=max(2, words), queue_depth=256,
                    rate=None if rate is None else (rate.numerator, rate.denominator))
    seen: dict[str, Any] = {"totals": [], "codes": []}

    async def bench(ctx: Any) -> None:
        bus = AxilMaster(ctx, dut)
        await bus.reset()
        previous: np.ndarray | None = None
        for i, (prog, image) in enumerate(zip(programs, images, strict=True)):
            image = image.copy()
            if previous is not None and plan.regions[i - 1] is None:  # the link goes through DRAM
                t = prog.tensors["a"]
                image[t.base:t.base + t.nbytes] = pack_tensor(t, previous)
            write_dram(ctx, dut, image.reshape(-1, W), zeros=True)  # over the previous program's DRAM
            await bus.write_ok(REG["IRQ_ENABLE"], 0b11)
            await _start(ctx, bus, dut, 0, len(prog.commands), limit, f"program {i}")
            lo = await bus.read_ok(REG["CYCLES_TOTAL_LO"])
            seen["totals"].append(lo | await bus.read_ok(REG["CYCLES_TOTAL_HI"]) << 32)
            seen["codes"].append(await bus.read_ok(REG["ERROR_CODE"]))
            await bus.write_ok(REG["IRQ_STATUS"], 0b11)  # clear DONE before the next program
            dram = read_dram(ctx, dut, len(image) // W, W)
            previous = unpack_tensor(prog.tensors["c"], dram[prog.tensors["c"].base:])
        seen["out"] = previous

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
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
