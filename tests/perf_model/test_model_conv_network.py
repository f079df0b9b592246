"""The conv network compiler (``perf_model.compiler.conv_network``) without the RTL: where it keeps a
link, where the bands go, the bytes it moves and what it refuses (the RTL runs are in
``tests/rtl_gen/test_rtl_conv_network.py``)."""

from __future__ import annotations

import dataclasses

import pytest

from accel_dse.design_files import load_design
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import Buffer, Opcode
from perf_model.compiler.conv import compile_conv
from perf_model.compiler.conv_network import compile_conv_network, output_words
from perf_model.compiler.program import _buffer_depths
from workloads.ops import Conv2d, Requant
from workloads.vector_ops import VectorOp

RQ = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
RELU = VectorOp(kind="relu", shape=(1,))


def _design(name: str):
    return dataclasses.replace(load_design(name), vector_unit=True)


def _conv(c: int, hw: int, **kw) -> Conv2d:
    return Conv2d(n=1, h=hw, w=hw, c_in=c, c_out=c, kh=3, kw=3, pad_h=1, pad_w=1, requant=RQ, **kw)


def test_resnet18_layer1_pair_on_edge_keeps_its_link_and_reads_each_tensor_once():
    """conv 3x3 64 -> 64 on 8x8 twice (ResNet-18's layer1 at res=32) on ``edge``: the link on chip,
    the program's transfers are exactly the real tensors (no halo re-read, no intermediate), the first
    conv's bands below the region its output goes to."""
    config = _design("edge")
    convs = [_conv(64, 8), _conv(64, 8)]
    prog = compile_conv_network(config, convs, [None])
    assert prog.on_chip
    bands = [c for c in prog.commands if c.opcode == Opcode.LOAD and c["buffer"] == Buffer.IFMAP]
    region = [c for c in prog.commands if c.opcode == Opcode.MOVE][0]["dst_addr"]
    assert bands and all(c["buf_addr"] + c["rows"] * c["words"] <= region for c in bands)
    assert region + output_words(config, convs[0]) <= _buffer_depths(config)[0]
    moved = sum(c["rows"] * c["words"] for c in prog.commands if c.opcode in (Opcode.LOAD, Opcode.STORE)
                and c["buffer"] != Buffer.QPARAM) * config.rows
    real = sum(prog.tensors[n].nbytes for n in ("a0", "b0", "b1", "c1"))
    assert moved == real
    two = [compile_conv(config, c, requant=True) for c in convs]
    apart = sum(c["rows"] * c["words"] for p in two for c in p.commands
                if c.opcode in (Opcode.LOAD, Opcode.STORE) and c["buffer"] != Buffer.QPARAM) * config.rows
    assert apart - moved == 2 * prog.tensors["c0"].nbytes  # the intermediate's STORE and its LOAD back


def test_the_first_convs_bands_stay_below_the_region_on_a_full_ifmap():
    """16x16x8 on tiny: the intermediate takes half the ifmap (512 of 1024 words), so conv 0's bands
    (double buffered) must use the quarters below it, not the upper half the region holds."""
    config = _design("tiny")
    prog = compile_conv_network(config, [_conv(8, 16), _conv(8, 16)], [None])
    assert prog.on_chip
    region = [c for c in prog.commands if c.opcode == Opcode.MOVE][0]["dst_addr"]
    bands = [c for c in prog.commands if c.opcode == Opcode.LOAD and c["buffer"] == Buffer.IFMAP]
    assert len(bands) > 1 and all(c["buf_addr"] + c["rows"] * c["words"] <= region for c in bands)


def test_a_pair_too_large_for_the_ifmap_goes_through_dram_inside_the_program():
    config = _design("tiny")
    convs = [_conv(64, 8), _conv(64, 8)]  # 1024 ifmap words a tensor: tiny's whole ifmap
    prog = compile_conv_network(config, convs, [RELU])
    assert not prog.on_chip
    ops = [c.opcode for c in prog.commands]
    assert Opcode.MOVE not in ops and ops.count(Opcode.VECTOR) >= 1
    assert prog.chunks == ((0, len(prog.commands)),)


@pytest.mark.parametrize(("convs", "links", "kwargs", "match"), [
    ([_conv(4, 6), _conv(8, 6)], [None], {}, "conv 1 reads 1x6x6x8"),
    ([_conv(4, 6), _conv(4, 6)], [VectorOp(kind="softmax", shape=(1,))], {}, "a softmax cannot run in place"),
    ([_conv(4, 6), _conv(4, 6)], [None, VectorOp(kind="add", shape=(1,))], {"skips": [None, 3]},
     "second operand must be a tensor 0 .. 1"),
    ([_conv(4, 6), _conv(4, 6), _conv(4, 6)], [None, None], {"inputs": (0, 0, 1)}, "tensor 2\\) is read by no"),
    ([_conv(4, 6), dataclasses.replace(_conv(4, 6), requant=None)], [None], {}, "conv 1 is not requantised"),
])
def test_bad_networks_are_refused_with_the_rule(convs, links, kwargs, match):
    with pytest.raises(ModelError, match=match):
        compile_conv_network(_design("tiny"), convs, links, **kwargs)


@pytest.mark.parametrize("entry", [1, 2])
def test_queue_loads_keep_vector_blocks_whole_start_on_an_entry_and_restate_their_window(entry):
    """``network._split`` on a basic block's commands: no queue-load longer than its depth, each starting
    on a whole queue entry (SYNC padding), no VECTOR apart from its parameter block, and every window
    RUN preceded by a WINDOW in its own queue-load."""
    from perf_model.compiler.network import _split

    config = _design("tiny")
    add = VectorOp(kind="add", shape=(1,), params=(("mult_a", 1), ("mult_b", 1), ("shift", 0)))
    prog = compile_conv_network(config, [_conv(4, 6), _conv(4, 6)], [RELU, (add, RELU)])
    for depth in (4, 6, 8):
        out, chunks = _split(list(prog.commands), depth, entry)
        assert chunks[0][0] == 0 and chunks[-1][1] == len(out)
        for a, b in chunks:
            assert 0 < b - a <= depth and a % entry == 0
            seg = out[a:b]
            assert seg[-1].opcode != Opcode.VECTOR
            window = False
            for c in seg:
                window |= c.opcode == Opcode.WINDOW
                assert c.opcode != Opcode.RUN or not c["window"] or window


def test_a_conv_reading_its_input_on_chip_is_not_tap_packed():
    """On an 8x8 design with a 2-byte bus a 2-channel pixel is one narrow word, so the conv alone is
    tap packed (4 taps a word, its band a sliding LOAD); inside a network the second conv reads the
    first one's output where it sits (pixel-major, no sliding words), so its window packs nothing."""
    config = ArrayConfig(rows=8, cols=8, dataflow="ws", ifmap_sram_kib=2, weight_sram_kib=2, ofmap_sram_kib=2,
                         dram_bytes_per_cycle=2.0, vector_unit=True)
    conv = Conv2d(n=1, h=5, w=5, c_in=2, c_out=2, kh=3, kw=3, pad_h=1, pad_w=1, requant=RQ)
    alone = compile_conv(config, conv, requant=True)
    assert {c["pack"] for c in alone.commands if c.opcode == Opcode.WINDOW} == {2}
    prog = compile_conv_network(config, [conv, conv], [RELU])
    assert prog.on_chip
    windows = [c for c in prog.commands if c.opcode == Opcode.WINDOW]
    assert windows and windows[-1]["pack"] == 0  # the second conv reads the region
    assert prog.convs[1].pack == 0


def test_the_host_writes_the_input_in_the_stems_fastest_form_only_when_the_stem_alone_reads_it():
    """``input_form``: a 7x7 stride-2 stem on 3 channels runs over the layout its per-op plan picks
    (space-to-depth or its kernel rows stacked: ``conv_score.conv_steps``), its ``a0`` laid out for
    that form and the program faster than over the raw image; when the network's input is read again
    (a residual add of tensor 0), the input stays as it is."""
    from perf_model import gemm_program_cycles
    from perf_model.compiler.conv_forms import form_conv
    from perf_model.compiler.conv_score import conv_steps

    config = _design("edge")
    stem = Conv2d(n=1, h=32, w=32, c_in=3, c_out=16, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3,
                  requant=RQ)
    nxt = _conv(16, 16)
    steps = conv_steps(config, stem, True)
    assert steps  # edge's per-op plan reshapes such a stem: the case is worth testing
    raw = compile_conv_network(config, [stem, nxt], [None])
    formed = compile_conv_network(config, [stem, nxt], [None], input_form=True)
    assert raw.input_steps == () and formed.input_steps == steps
    run = form_conv(stem, steps)
    assert formed.tensors["a0"].shape == (run.n * run.h * run.w, run.c_in)
    assert gemm_program_cycles(config, formed).total < gemm_program_cycles(config, raw).total
    from workloads import _int_ops as io

    add = VectorOp(kind="add", shape=(1, 16, 16, 3), params=tuple(io.add_params(1 / 16, 1 / 32, 1 / 16).items()))
    thin = _conv(3, 16)  # 3x3 on 3 channels: its per-op plan stacks the kernel rows
    assert conv_steps(config, thin, True)
    alone = compile_conv_network(config, [thin, thin], [None], input_form=True)
    again = compile_conv_network(config, [thin, thin], [(add,)], [0], input_form=True)  # tensor 0 added back
    assert alone.input_steps == conv_steps(config, thin, True) and again.input_steps == ()


@pytest.mark.parametrize("link", ["relu", "maxpool"])
def test_a_links_chunks_through_dram_take_turns_in_the_ifmaps_halves(link):
    """Through DRAM, a link's ops (a ReLU on 16x16x8 of ``tiny``'s 4-lane words) or a pooling run in at
    least ``PIPELINE_CHUNKS`` chunks alternating between the two halves of the ifmap: only the first
    load waits for the unit, each chunk's first ``VECTOR`` waits for the DMA and the next chunk's load
    comes right after it, each store waits for the unit; the chunks' transfers move exactly the tensor
    (read once and written once, a pooling's window rows re-read at band edges aside), each as DRAM
    rows of many pixels; and the walk is shorter than the chunks run one after the other."""
    from perf_model import gemm_program_cycles
    from perf_model.compiler import network

    config = _design("tiny")
    depth = _buffer_depths(config)[0]
    conv = _conv(8, 16)
    ops = [RELU] if link == "relu" else [VectorOp(kind="maxpool", shape=(1, 16, 16, 8), params=(
        ("window_h", 2), ("window_w", 2), ("stride_h", 2), ("stride_w", 2), ("pad_h", 0), ("pad_w", 0)))]
    nxt = conv if link == "relu" else _conv(8, 8)
    prog = compile_conv_network(config, [conv, nxt], [tuple(ops)], keep_on_chip=False)
    cmds = list(prog.commands)
    first = next(i for i, c in enumerate(cmds) if c.opcode == Opcode.VECTOR)
    last = max(i for i, c in enumerate(cmds) if c.opcode == Opcode.VECTOR)
    chunk = [c for c in cmds[first - 1:last + 3] if c.opcode in (Opcode.LOAD, Opcode.STORE, Opcode.VECTOR)
             and (c.opcode == Opcode.VECTOR or c["buffer"] == Buffer.IFMAP)]
    loads = [c for c in chunk if c.opcode == Opcode.LOAD]
    vectors = [c for c in chunk if c.opcode == Opcode.VECTOR]
    assert len(vectors) >= network.PIPELINE_CHUNKS
    assert {c["buf_addr"] for c in loads} == {0, depth // 2}
    assert [c.wait_vec for c in loads] == [1] + [0] * (len(loads) - 1)
    assert all(v.wait_dma for v in vectors)
    for k, v in enumerate(chunk):  # after every VECTOR but the last: the next chunk's load
        if v.opcode == Opcode.VECTOR and k + 1 < len(chunk) and v is not vectors[-1]:
            assert chunk[k + 1].opcode == Opcode.LOAD
    stores = [c for c in chunk if c.opcode == Opcode.STORE]
    assert all(c.wait_vec for c in stores) and len(stores) == len(vectors)
    out = 16 * 16 * 2 if link == "relu" else 8 * 8 * 2  # words of the link's output: 2 words a pixel
    assert sum(c["rows"] * c["words"] for c in stores) == out
    read = sum(c["rows"] * c["words"] for c in loads)
    assert read == 16 * 16 * 2 if link == "relu" else read >= 16 * 16 * 2
    assert all(c["rows"] < 16 * 16 // len(vectors) for c in loads)  # several pixels a DRAM row
    serial = [c for c in cmds[:first - 1]] + [dataclasses.replace(c, wait_vec=1) if c.opcode == Opcode.LOAD else c
                                              for c in cmds[first - 1:]]
    assert len(serial) == len(cmds)
    # the same chunks one after the other: each load waits for the unit (ops done), as without halves
    one_by_one = gemm_program_cycles(config, dataclasses.replace(prog, commands=tuple(serial))).total
    assert gemm_program_cycles(config, prog).total < one_by_one


def test_a_network_whose_tensors_do_not_all_fit_keeps_the_groups_that_do():
    """ResNet-18 at 32x32 on a 16x16 array with 16 KiB of ifmap (1,024 words): the stem's output
    (1,024 words) and its pooled copy (the first block's input, tied to the block outputs it is added
    to: ``_ties``) do not fit together, so not every link stays on chip; the compiler keeps the later
    groups that fit (each group whole: an add's output with its operand), never STOREs a kept tensor,
    and its walk is below the program with every link through DRAM. With 32 KiB every link stays on
    chip."""
    import workloads
    from perf_model import gemm_program_cycles
    from perf_model.compiler.conv_network import _ties
    from perf_model.compiler.conv_workload import conv_network_spec

    spec = conv_network_spec(workloads.resolve("resnet18:res=32"))
    adds = {i: j for i, j in enumerate(spec.skips) if j is not None}
    groups = _ties(len(spec.convs), adds, list(spec.inputs), False)
    # layer1's trunk (the pooled stem output and both block outputs), a block's inner link alone, and a
    # downsample block's output with the block's last conv's output and the next block's output
    assert groups[:3] == [frozenset({1, 3, 5}), frozenset({2}), frozenset({4})]
    assert frozenset({7, 8, 10}) in groups and sorted(t for g in groups for t in g) == list(range(1, 21))
    config = dataclasses.replace(load_design("tiny"), rows=16, cols=16, vector_unit=True, ifmap_sram_kib=16,
                                 weight_sram_kib=16, ofmap_sram_kib=32, dram_bytes_per_cycle=4.0)
    kw = {"inputs": spec.inputs, "input_form": True}
    prog = compile_conv_network(config, spec.convs, spec.links, spec.skips, **kw)
    apart = compile_conv_network(config, spec.convs, spec.links, spec.skips, keep_on_chip=False, **kw)
    assert not prog.on_chip and prog.kept and apart.kept == ()
    kept = set(prog.kept)
    assert all(g <= kept or not g & kept for g in groups)
    assert 1 not in kept
    stored = {c["dram_addr"] for c in prog.commands if c.opcode == Opcode.STORE}
    assert not any(prog.tensors[f"c{t - 1}"].base in stored for t in kept)
    assert gemm_program_cycles(config, prog).total < gemm_program_cycles(config, apart).total
    roomy = dataclasses.replace(config, ifmap_sram_kib=32)
    assert compile_conv_network(roomy, spec.convs, spec.links, spec.skips, **kw).on_chip
