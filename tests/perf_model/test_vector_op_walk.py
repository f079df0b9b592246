"""A vector op on an op-by-op design is the walk of its own program, of any size.

``vector_op_program`` runs one op whole when its operands and output fit the ifmap together, else
in chunks of whole units (rows, words, images, positions); the evaluator's vector cycles and DRAM
bytes of the op are that program's walk, exactly, on random designs and ops."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from accel_spec.isa import Command, Opcode
from accel_spec.vector_isa import pool_from_registers
from perf_model.arrays.designs import DesignArrays
from perf_model.compiler import vector_walk
from perf_model.compiler.vector import vector_program
from perf_model.compiler.vector_chunks import vector_op_program
from perf_model.compiler.vector_walk import COMPILER_WALKS
from perf_model.dma_timing import PAGE_BYTES
from perf_model.evaluator.vector_work import vector_columns
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.program_timing import dram_rate, gemm_program_cycles, program_dram_bytes, word_beats
from perf_model.vector_timing import plan_cycles, vector_plan
from workloads.vector_ops import VectorOp
from workloads.vector_params import GELU_PARAMS, add_params, norm_params, softmax_params


def _op(kind: str, shape: tuple[int, ...], params: dict[str, int] | None = None, axis: int | None = None) -> VectorOp:
    return VectorOp(kind=kind, shape=shape, axis=axis, params=tuple((params or {}).items()))


def random_op(rng: random.Random, lanes: int) -> VectorOp:
    """A random op the unit of ``lanes`` lanes runs, from a few hundred to ~100k elements."""
    kind = rng.choice(["relu", "gelu", "add", "silu", "layernorm", "softmax", "causal", "rope", "maxpool",
                       "avgpool"])
    rows, n = rng.choice([1, 3, 16, 64, 200]), rng.choice([5, 40, 64, 256, 600])
    if kind in ("relu", "gelu", "add", "silu"):
        params = {"gelu": GELU_PARAMS, "add": add_params(0.05, 0.07, 0.06), "silu": {"gated": rng.randint(0, 1)}}
        return _op(kind, (rows, n), params.get(kind))
    if kind == "layernorm":
        return _op(kind, (1, rows, n), norm_params(n, 1e-5), axis=2)
    if kind in ("softmax", "causal"):
        q = rng.choice([1, 4, 16])
        return _op("softmax", (1, rows, q, n), softmax_params(0.125, 0 if kind == "causal" else None), axis=3)
    if kind == "rope":
        return _op(kind, (rng.randint(1, 2), rng.choice([1, 7, 40]), rng.choice([1, 4]), 2 * lanes * rng.randint(1, 3)),
                   {"start": 3, "theta": 10000})
    size = rng.choice([4, 9, 16])
    pool = {"window_h": 3, "window_w": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}
    return _op(kind, (rng.randint(1, 12), size, size, rng.choice([3, 16, 40])), pool)


def random_design(rng: random.Random) -> ArrayConfig:
    return ArrayConfig(rows=rng.choice([4, 8, 16, 32]), cols=rng.choice([4, 8, 16, 32]),
                       dataflow=rng.choice(list(Dataflow)), vector_unit=True,
                       ifmap_sram_kib=rng.choice([1, 2, 4, 16, 64]), double_buffered=rng.random() < 0.5,
                       dram_bytes_per_cycle=rng.choice([4.0, 8.0, 32.0]), clock_mhz=rng.choice([500.0, 1000.0]),
                       dram=rng.choice(["none", "ddr4-3200-x64"]))


def _walk(config: ArrayConfig, op: VectorOp) -> tuple[int, int, int]:
    program = vector_op_program(config, op)
    read, written = program_dram_bytes(config, program.commands)
    return gemm_program_cycles(config, program, rate=dram_rate(config)).total, read, written


def _tiles(config: ArrayConfig, program: object, opcode: int, names: list[str], halo: bool | str = False) -> None:
    """The ``opcode`` transfers of ``program`` cover the DRAM tensors ``names`` exactly: each byte once
    (``halo``: at least once, a pooling's bands reading their windows' rows again), nothing else."""
    W = program.data_bytes  # type: ignore[attr-defined]
    size = word_beats(config)["ifmap"] * W
    counts = np.zeros(program.dram_bytes, dtype=np.int64)  # type: ignore[attr-defined]
    for c in program.commands:  # type: ignore[attr-defined]
        if c.opcode == opcode:
            for r in range(c["rows"]):
                a = c["dram_addr"] + r * c["dram_stride"]
                counts[a:a + c["words"] * size] += 1
    want = np.zeros_like(counts)
    for name in names:
        t = program.tensors[name]  # type: ignore[attr-defined]
        want[t.base:t.base + t.nbytes] = 1
    if halo == "skips":  # windows that skip columns (stride past the window): what is read lies inside
        assert not counts[want == 0].any(), names
    else:
        assert np.array_equal(np.minimum(counts, 1) if halo else counts, want), names


def test_the_evaluators_vector_cycles_and_bytes_are_the_walk_of_each_ops_program():
    rng = random.Random(50)
    energy = DEFAULT_ENERGY
    chunked = 0
    for _ in range(40):
        configs = [random_design(rng) for _ in range(3)]
        designs = DesignArrays.from_configs(configs)
        op = random_op(rng, rng.choice([4, 8, 16]))
        count = rng.randint(1, 3)
        got = vector_columns(designs, [(op, count)], energy, np.ones(len(configs)), walks=COMPILER_WALKS)
        for i, config in enumerate(configs):
            if isinstance(vector_plan(op, config.vector_lanes), str):
                continue
            try:
                total, read, written = _walk(config, op)
            except ModelError as exc:
                assert got.misfit[i], str(exc)
                continue
            if got.misfit[i]:
                continue  # a row longer than the buffer (the per-row rule): refused either way
            try:
                vector_program(config, [op])
            except (ModelError, ValueError):
                chunked += 1
            assert got.busy_cycles[i] + got.stall_cycles[i] == count * total, (config, op)
            assert (got.dram_read[i], got.dram_write[i]) == (count * read, count * written), (config, op)
    assert chunked >= 10  # the chunked programs were exercised


_POOL = {"window_h": 3, "window_w": 3, "stride_h": 2, "stride_w": 2, "pad_h": 1, "pad_w": 1}
#: Poolings whose one output row does not fit a 1 KiB ifmap of 8 lanes: tiles of a row's columns.
_WIDE = [_op("maxpool", (1, 5, 300, 8), _POOL), _op("avgpool", (2, 4, 200, 40), _POOL),
         _op("maxpool", (1, 7, 129, 16), dict(_POOL, window_w=2, stride_w=3, pad_w=0))]


@pytest.mark.parametrize("seed", range(30 + len(_WIDE)))
def test_a_chunked_program_moves_every_unit_once_and_runs_every_row(seed):
    """Independent of how it cuts: the loads read each operand tensor whole, the stores write the
    output tensor whole (no overlap), and the VECTOR commands cover the op's rows (words of an
    element-wise op of one row; a pooling's outputs and its windows' in-image pixels) exactly."""
    rng = random.Random(seed)
    config = dataclasses.replace(random_design(rng), ifmap_sram_kib=1, dataflow=Dataflow.WS, rows=rng.choice([4, 8]))
    plan: object = ""
    if seed >= 30:
        config = dataclasses.replace(config, rows=8)
        op, plan = _WIDE[seed - 30], vector_plan(_WIDE[seed - 30], 8)
    while isinstance(plan, str):  # an op the unit runs (a RoPE's half head must be whole words)
        op = random_op(rng, config.vector_lanes)
        plan = vector_plan(op, config.vector_lanes)
    try:
        program = vector_op_program(config, op)
    except ModelError as exc:
        assert "ifmap words" in str(exc)
        return
    _tiles(config, program, Opcode.STORE, ["z0"])
    _tiles(config, program, Opcode.LOAD, [k for k in program.tensors if k != "z0"], halo=plan.pool is not None and (
        "skips" if plan.pool.stride_w > plan.pool.window_w or plan.pool.stride_h > plan.pool.window_h else True))
    heads = [c for c in program.commands if c.opcode == Opcode.VECTOR]
    timing = gemm_program_cycles(config, program, rate=dram_rate(config))
    if plan.pool is not None:  # each band: its outputs, and its windows' in-image pixels (2 cycles a run besides)
        blocks = [program.commands[i + 1] for i, c in enumerate(program.commands) if c.opcode == Opcode.VECTOR]
        bands = [pool_from_registers(plan.kind, tuple(b[f"vp{j}"] for j in range(8))) for b in blocks]
        assert sum(c["vrows"] * g.out_h * g.out_w * g.words_c for c, g in zip(heads, bands, strict=True)) == \
            plan.rows * plan.out_words
        assert timing.vector - 2 * len(heads) == plan_cycles(plan) - 2
    elif plan.rows == 1 and plan.passes == 1:
        assert sum(c["vwords"] for c in heads) == plan.words
    else:
        assert sum(c["vrows"] for c in heads) == plan.rows
    assert timing.vector >= plan.rows and timing.total > timing.vector


@pytest.mark.parametrize("spec", ["bert_base:seq=64,d=256,heads=4,ffn=512", "llama_decode:kv=64,d=128,heads=4,ffn=256",
                                  "resnet18:res=32"])
def test_an_op_by_op_designs_figure_is_its_ops_programs_and_each_vector_ops_walk(spec):
    """On designs with the unit that run the workload op by op (OS and IS arrays; small buffers), the
    recorded figure is the matrix ops' rows plus, per vector op, its runs times its own program's walk."""
    import perf_model
    import workloads
    from perf_model.evaluator.vector_work import workload_vector_ops

    wl = workloads.resolve(spec)
    rng = random.Random(spec)
    configs = [dataclasses.replace(random_design(rng), dataflow=(Dataflow.OS, Dataflow.IS)[i % 2],
                                   ifmap_sram_kib=rng.choice([8, 16, 64]), weight_sram_kib=64, ofmap_sram_kib=64)
               for i in range(6)]
    table = perf_model.evaluate_designs(DesignArrays.from_configs(configs), wl)
    checked = 0
    for i, config in enumerate(configs):
        result = perf_model.evaluate(config, wl)
        if not table.feasible[i]:
            continue
        assert result.network is None or "reason" in result.network  # op by op
        walks = 0
        for op, count in workload_vector_ops(wl):
            if not isinstance(vector_plan(op, config.vector_lanes), str):
                walks += count * _walk(config, op)[0]
        ops = sum(op.total_cycles for op in result.ops)
        assert table.total_cycles[i] == result.total["total_cycles"] == ops + walks, config
        checked += 1
    assert checked >= 3


def _shifted(program: object, by: int, fetch_by: int) -> object:
    """``program`` with every transfer's DRAM address ``by`` bytes on and its fetch ``fetch_by`` on."""
    def shift(c: Command) -> Command:
        if c.opcode not in (Opcode.LOAD, Opcode.STORE):
            return c
        return dataclasses.replace(c, fields=tuple((n, v + by if n == "dram_addr" else v) for n, v in c.fields))
    return dataclasses.replace(program, commands=tuple(shift(c) for c in program.commands),  # type: ignore[call-arg]
                               queue_base=program.queue_base + fetch_by)  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(2))
def test_the_walks_kept_by_queue_load_are_the_full_walk(seed):
    # program_walk keeps each queue-load's walk by what it reads (its commands with addresses modulo a
    # page, its fetch address modulo a page, the bus, beats, lanes, pacing): on random designs (OS/IS/WS,
    # int8 and bf16, single/double buffered, paced and unpaced DRAM) and ops (element-wise, norms,
    # softmax, causal softmax, RoPE, pooling), cold and shared, it is the full walk of every queue-load;
    # so is it for the same program at other DRAM addresses and fetch addresses (a whole page on: the
    # same walk; part of one: the bursts' own) and under the other DRAM pacing.
    rng = random.Random(60 + seed)
    vector_walk.clear_caches()
    loads = multi = 0
    for _ in range(20):
        config = random_design(rng)
        if rng.random() < 0.3:
            config = dataclasses.replace(config, input_bits=16, acc_bits=32, weight_format="bf16", act_format="bf16")
        twin = dataclasses.replace(config, ifmap_sram_kib=rng.choice([1, 2, 4, 16, 64]))  # may share loads
        op = random_op(rng, config.vector_lanes)
        if rng.random() < 0.2:  # many chunks on a small ifmap: several queue-loads, some alike
            op = _op("add", (rng.choice([64, 200]), 600), add_params(0.05, 0.07, 0.06))
            config = twin = dataclasses.replace(config, ifmap_sram_kib=1)
        paced = dataclasses.replace(config, dram="none" if config.dram != "none" else "ddr4-3200-x64")
        for design in (config, twin, config, paced):  # the third: every queue-load kept
            try:
                program = vector_op_program(design, op)
            except ModelError:
                continue
            rate = dram_rate(design)
            W = program.data_bytes
            part = (PAGE_BYTES - W * rng.randint(1, 8), W * rng.randint(1, 63))  # part of a page on
            for by, fetch_by in ((0, 0), (PAGE_BYTES, 2 * PAGE_BYTES), part):
                shifted = _shifted(program, by, fetch_by)
                full = gemm_program_cycles(design, shifted, rate=rate)
                assert vector_walk.program_walk(design, shifted, rate) == (full.total, full.vector), (design, op, by)
            loads += 3 * len(program.chunks)
            multi += len(program.chunks) > 1
    assert multi >= 3 and len(vector_walk._LOADS) < loads  # long programs, and walks shared


@pytest.mark.parametrize("what", ["data", "pacing"])
def test_a_kept_walk_follows_what_changes_the_walk(what):
    # the same program with its transfers part of a page on, or under another DRAM pacing, is walked
    # in other cycles (here: some rows' bursts split at a page; the DMA paced at 25.6 of 32 bytes a
    # cycle): the walks kept tell them apart
    config = ArrayConfig(rows=32, cols=32, dataflow="os", vector_unit=True, ifmap_sram_kib=16, double_buffered=True,
                         dram="ddr4-3200-x64", dram_bytes_per_cycle=32.0)
    program = vector_op_program(config, _op("avgpool", (3, 16, 16, 40), _POOL))
    if what == "pacing":
        designs = [config, dataclasses.replace(config, dram="none")]
        programs = [program, program]
    else:
        designs = [config] * (PAGE_BYTES // program.data_bytes)
        programs = [_shifted(program, k * program.data_bytes, 0) for k in range(len(designs))]
    vector_walk.clear_caches()
    full = [gemm_program_cycles(d, p, rate=dram_rate(d)).total for d, p in zip(designs, programs, strict=True)]
    assert len(set(full)) > 1, full  # some change the walk
    got = [vector_walk.program_walk(d, p, dram_rate(d))[0] for d, p in zip(designs, programs, strict=True)]
    assert got == full
