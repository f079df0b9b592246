"""A conv's timed program is its compiled program, command by command, and a network's figures from
timed convs are the compiled network's walk.

``perf_model.compiler.conv_timed`` lays out ``compile_conv``'s commands from the runs as arrays, each
``LOAD``/``RUN``/``STORE``/``MOVE`` as its cycles and bytes. The reference is the compiled program:
its commands' opcodes, wait bits and window flags, each one's cycles as the walk computes them
(``program_timing``: the DRAM model's bursts, ``timing.run_cycles``, ``isa.move_cycles``) and
bytes, and the walks of both (``gemm_program_cycles``). At network level the reference is
``compile_conv_network`` compiled and walked (what ``simulate`` runs and checks).
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from model_testlib import random_conv, random_conv_batch, random_ws_design

import perf_model
import workloads
from accel_spec.errors import ModelError
from accel_spec.isa import Command, FieldRangeError, Opcode, move_cycles
from perf_model import dma_timing, program_timing, timing
from perf_model.compiler import conv_chain_score, conv_dram_links
from perf_model.compiler.conv import compile_conv, conv_tiling
from perf_model.compiler.conv_network import compile_conv_network
from perf_model.compiler.conv_score import walked_figures
from perf_model.compiler.conv_timed import timed_conv
from perf_model.compiler.conv_workload import conv_network_spec
from perf_model.compiler.network_figures import network_figures
from perf_model.program_timing import TimedCommand, dram_rate
from workloads.ops import Conv2d, Requant

_RQ = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)

_UNPACED = dict(dram="none")


def _cycles(config, cmd) -> int:
    """The cycles the walk gives one compiled command's unit (``program_timing.program_cycles``)."""
    if cmd.opcode == Opcode.RUN:
        return timing.run_cycles_of(0, config.rows, config.cols, cmd["m"], cmd["k"], cmd["n"],
                                    bool(config.shadow_stationary))
    if cmd.opcode == Opcode.MOVE:
        return move_cycles(cmd["rows"], cmd["words"])
    W = program_timing.axi_data_bytes(config)
    return program_timing._transfer_cycles(cmd, W, program_timing.word_beats(config),
                                           program_timing.DEFAULT_DRAM_LATENCY, program_timing.OUTSTANDING)


def _same_program(config, real, timed) -> int:
    """Assert ``timed`` is ``real`` command by command; the number of timed commands."""
    assert len(timed.commands) == len(real.commands)
    assert timed.chunks == real.chunks and timed.tensors == real.tensors and timed.dram_bytes == real.dram_bytes
    beats, W = program_timing.word_beats(config), program_timing.axi_data_bytes(config)
    count = 0
    for at, (c, t) in enumerate(zip(real.commands, timed.commands, strict=True)):
        where = f"command {at}: {c} against {t}"
        assert (t.opcode, t.wait_dma, t.wait_run, t.wait_vec) == (c.opcode, c.wait_dma, c.wait_run, c.wait_vec), where
        if type(t) is not TimedCommand:
            assert t == c, where
            continue
        count += 1
        assert t.window == c["window"], where
        assert t.cycles == _cycles(config, c), where
        moved = program_timing.transfer_bytes(c, beats, W)
        assert (t.read, t.written) == ((moved, 0) if c.opcode == Opcode.LOAD else (0, moved)), where
        # the fields a conv's figures read (conv_score.program_bytes, run_figures): a transfer's buffer, a RUN's GEMM
        names = {Opcode.RUN: ("m", "k", "n", "accumulate"), Opcode.LOAD: ("buffer",), Opcode.STORE: ("buffer",)}
        for field in names.get(c.opcode, ()):
            assert t[field] == c[field], f"{where}: {field}"
        if c.opcode in (Opcode.LOAD, Opcode.STORE):  # what a walk at a paced DRAM times it from
            load, requant, addr, stride, rows, words, per_word = t.transfer
            assert (load, requant, rows, words, stride) == (c.opcode == Opcode.LOAD, bool(c["requant"]), c["rows"],
                                                           c["words"], c["dram_stride"]), where
            assert addr % dma_timing.PAGE_BYTES == c["dram_addr"] % dma_timing.PAGE_BYTES, where
            assert per_word == program_timing.transfer_word_beats(c, beats, W), where
        else:
            assert t.transfer is None, where
    return count


@pytest.mark.parametrize("seed", range(3))
def test_a_timed_conv_is_its_compiled_program_command_by_command(seed):
    """Random designs and convs (batches, groups, dilations, tap tiles, single and double buffered,
    requantised or not), the input on chip or not, the output moved on chip or stored."""
    rng = random.Random(seed)
    checked = timed_total = 0
    while checked < 25:
        config = dataclasses.replace(random_ws_design(rng), **_UNPACED)
        conv = random_conv(rng) if rng.random() < 0.7 else random_conv_batch(rng)
        requant = conv.requant is not None
        a_region = rng.choice([None, None, 3]) if requant else None
        c_region = rng.choice([None, 5]) if requant else None
        kwargs = dict(requant=requant, a_region=a_region, c_region=c_region)
        try:
            real = compile_conv(config, conv, **kwargs)
        except (ModelError, FieldRangeError) as exc:
            with pytest.raises(type(exc), match=None) as got:
                timed_conv(config, conv, **kwargs)
            assert str(got.value) == str(exc)
            continue
        timed = timed_conv(config, conv, **kwargs)
        timed_total += _same_program(config, real, timed)
        walk = perf_model.gemm_program_cycles(config, real)
        assert perf_model.gemm_program_cycles(config, timed) == walk
        assert program_timing.program_dram_bytes(config, timed.commands) == \
            program_timing.program_dram_bytes(config, real.commands)
        checked += 1
    assert timed_total > 100  # the runs' commands were timed, not compiled


def test_a_program_longer_than_a_queue_load_repeats_its_window_as_compiled():
    """Past ``QUEUE_DEPTH`` commands the program runs as queue-loads, each opening with its window:
    the timed program has those windows where the compiled one has them."""
    config = random_ws_design(random.Random(1), rows=4, cols=4, ifmap_sram_kib=4, weight_sram_kib=1,
                              ofmap_sram_kib=1, double_buffered=True, dram="none")
    conv = random_conv(random.Random(5), 30)
    conv = dataclasses.replace(conv, h=24, w=24, c_in=24, c_out=24, groups=1, kh=3, kw=3, stride_h=1, stride_w=1,
                               dilation_h=1, dilation_w=1, pad_h=1, pad_w=1, pad_h_hi=1, pad_w_hi=1)
    real = compile_conv(config, conv, requant=True, queue_depth=64)
    assert len(real.chunks) > 3
    timed = timed_conv(config, conv, requant=True, queue_depth=64)
    _same_program(config, real, timed)
    assert perf_model.gemm_program_cycles(config, timed) == perf_model.gemm_program_cycles(config, real)


def test_a_paced_dram_walks_each_timed_transfer_from_its_geometry():
    """A paced DRAM's transfers depend on when they start: the timed program's transfers carry their
    geometry, and its walk at the pacing is the compiled program's, on random paced designs and
    convs (the designs' own pacing, and another latency and bursts in flight). A timed transfer
    without its geometry is refused at a pacing."""
    rng = random.Random(3)
    checked = 0
    while checked < 12:
        config = random_ws_design(rng, dram_bytes_per_cycle=rng.choice([16.0, 32.0, 64.0]),
                                  dram=rng.choice(["ddr3-1600-x64", "lpddr5-x32"]),
                                  clock_mhz=rng.choice([800.0, 1200.0, 2000.0]))
        rate = dram_rate(config)
        if rate is None:
            continue
        conv = random_conv(rng) if rng.random() < 0.7 else random_conv_batch(rng)
        requant = conv.requant is not None
        try:
            real = compile_conv(config, conv, requant=requant)
        except (ModelError, FieldRangeError):
            continue
        timed = timed_conv(config, conv, requant=requant)
        assert _same_program(config, real, timed) > 0
        assert perf_model.gemm_program_cycles(config, timed, rate=rate) == \
            perf_model.gemm_program_cycles(config, real, rate=rate), (config.short_name(), conv)
        assert perf_model.gemm_program_cycles(config, timed, latency=37, outstanding=2) == \
            perf_model.gemm_program_cycles(config, real, latency=37, outstanding=2)
        checked += 1
    bare = [TimedCommand(Opcode.LOAD, 10, read=64)]
    with pytest.raises(ValueError, match="geometry"):
        program_timing.program_cycles(config, bare, rate=rate)


def test_a_field_past_its_bits_gets_the_compilers_error():
    """A window field past its encoding raises the compiler's error."""
    rng = random.Random(3)
    unpaced = random_ws_design(rng, rows=32, cols=16, dram_bytes_per_cycle=64.0, dram="none")
    conv = random_conv(rng)
    wide = dataclasses.replace(conv, stride_w=40, w=80, kw=1, pad_w=0, pad_w_hi=0)  # px_step past its bits
    with pytest.raises(ModelError) as real:
        compile_conv(unpaced, wide)
    with pytest.raises(ModelError) as got:
        timed_conv(unpaced, wide)
    assert str(got.value) == str(real.value)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_a_networks_figures_from_timed_convs_are_its_compiled_walk(name):
    """The one program of a CNN on random designs with the vector unit (the last one on a paced
    DRAM): timed (what the sweep records) against compiled and walked, every figure."""
    wl = workloads.resolve(name)
    spec = conv_network_spec(wl)
    rng = random.Random(name)
    seen = 0
    for at in range(5):
        paced = dict(dram="ddr3-1600-x64", dram_bytes_per_cycle=64.0, clock_mhz=2000.0) if at == 4 else \
            dict(dram="none")
        config = random_ws_design(rng, vector_unit=True, input_bits=8, acc_bits=32, **paced,
                                  rows=rng.choice([8, 16, 32]), ifmap_sram_kib=rng.choice([32, 128, 512]),
                                  weight_sram_kib=rng.choice([16, 64, 256]), ofmap_sram_kib=rng.choice([8, 32, 128]))
        config = dataclasses.replace(config, cols=config.rows)
        assert (dram_rate(config) is not None) == (at == 4)
        figures = network_figures(config, wl)
        try:
            real = compile_conv_network(config, spec.convs, spec.links, spec.skips, inputs=spec.inputs,
                                        input_form=True)
        except (ModelError, FieldRangeError) as exc:
            assert figures == {"reason": str(exc)}
            continue
        walk = perf_model.gemm_program_cycles(config, real, rate=dram_rate(config))
        read, written = program_timing.program_dram_bytes(config, real.commands)
        assert any(type(c) is not Command for c in compile_conv_network(
            config, spec.convs, spec.links, spec.skips, inputs=spec.inputs, input_form=True, timed=True).commands)
        assert (figures["total_cycles"], figures["compute_cycles"], figures["vector_cycles"],
                figures["stall_cycles"]) == (walk.total, walk.compute, walk.vector, walk.stall)
        assert (figures["dram_read_bytes"], figures["dram_write_bytes"]) == (read, written)
        assert (figures["queue_loads"], figures["links"]) == (len(real.chunks), real.links)
        seen += 1
    assert seen >= 2


def test_networks_that_share_their_dram_links_commands_are_each_their_compiled_walk():
    """Designs that differ in their buffers alone, whose ResNet-18 sends links
    through DRAM: the timed networks share those links' commands (``conv_dram_links._LINK_BUILDS``,
    made by the first design), and each one's figures are still its own compiled program's walk."""
    wl = workloads.resolve("resnet18")
    spec = conv_network_spec(wl)
    conv_dram_links._LINK_BUILDS.clear()
    base = random_ws_design(random.Random(5), vector_unit=True, input_bits=8, acc_bits=32, dram="none", rows=16,
                            cols=16)
    designs = [dataclasses.replace(base, ifmap_sram_kib=i, weight_sram_kib=w, ofmap_sram_kib=o)
               for i, w, o in ((64, 32, 16), (64, 128, 64), (32, 64, 32), (128, 64, 32), (96, 64, 32))]
    alone = 0
    for config in designs:  # each on its own: the links' commands it makes
        conv_dram_links._LINK_BUILDS.clear()
        network_figures(config, wl)
        alone += len(conv_dram_links._LINK_BUILDS)
    conv_dram_links._LINK_BUILDS.clear()
    for config in designs:
        figures = network_figures(config, wl)
        real = compile_conv_network(config, spec.convs, spec.links, spec.skips, inputs=spec.inputs, input_form=True)
        walk = perf_model.gemm_program_cycles(config, real, rate=dram_rate(config))
        assert (figures["total_cycles"], figures["compute_cycles"], figures["vector_cycles"]) == (
            walk.total, walk.compute, walk.vector)
        assert (figures["dram_read_bytes"], figures["dram_write_bytes"]) == program_timing.program_dram_bytes(
            config, real.commands)
        assert real.links != "on chip"
    assert 0 < len(conv_dram_links._LINK_BUILDS) < alone  # the later designs found links the earlier ones made


def test_a_chains_figures_from_timed_convs_are_its_compiled_programs():
    """The chain scorer (``conv_chain_score``) on random WS designs that keep a layer's output (R == C),
    half of them on a paced DRAM, and random chains of two or three convs: timed (what the sweep
    records) against the same chain compiled and walked, every figure of every conv, or the same
    reason."""
    rng = random.Random(7)
    kept = refused = 0
    while kept < 6:
        rows = rng.choice([4, 8, 16])
        paced = dict(dram="ddr3-1600-x64", dram_bytes_per_cycle=64.0, clock_mhz=2000.0) if kept % 2 else \
            dict(dram="none")
        config = random_ws_design(rng, rows=rows, cols=rows, **paced)
        if (dram_rate(config) is None) == bool(kept % 2):  # not paced at this bus width: another design
            continue
        channels, hw = rng.choice([4, 8, 16, 24]), rng.choice([4, 6, 9])
        first = Conv2d(n=rng.choice([1, 1, 2]), h=hw, w=hw, c_in=channels, c_out=channels, kh=3, kw=3, pad_h=1,
                       pad_w=1, stride_h=1, stride_w=1, requant=_RQ, name="c0")
        chain = (first,) + tuple(dataclasses.replace(first, name=f"c{i}", kh=k, kw=k, pad_h=k // 2, pad_w=k // 2)
                                 for i, k in enumerate(rng.choices([1, 3], k=rng.choice([1, 2])), 1))
        timed, real = conv_chain_score._figures(config, chain), conv_chain_score._figures(config, chain, timed=False)
        assert timed == real, (config.short_name(), chain)
        if isinstance(real, str):
            refused += 1
            assert refused < 40, "random chains all refused: the test no longer checks figures"
            continue
        assert any(type(c) is TimedCommand for c in compile_conv_network(
            config, chain, [None] * (len(chain) - 1), require_on_chip=True, timed=True).commands)
        kept += 1


def test_a_convs_figures_on_a_paced_dram_are_its_compiled_programs():
    """The per-op conv scorer on a paced DRAM walks the timed program (``conv_score.walked_figures``):
    every figure equal to the compiled program's, on random paced designs and convs."""
    rng = random.Random(11)
    checked = 0
    while checked < 10:
        config = random_ws_design(rng, dram="ddr3-1600-x64", dram_bytes_per_cycle=64.0,
                                  clock_mhz=rng.choice([1200.0, 2000.0]))
        conv = random_conv(rng)
        requant = conv.requant is not None
        if dram_rate(config) is None:
            continue
        try:
            tiling = conv_tiling(config, conv, requant=requant)
        except ModelError:
            continue
        if not tiling.feasible:
            continue
        timed = walked_figures(config, conv, requant, tiling, timed=True)
        assert timed == walked_figures(config, conv, requant, tiling)
        checked += 1
