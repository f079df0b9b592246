# amaranth: UnusedElaboratable=no
"""One program for chained 3x3 convolutions on ``tiny`` with the vector unit (``system_testlib.run_image``):
conv 3x3 -> ReLU -> conv 3x3 with the link on chip (the first conv's requantised output MOVEd into
the ifmap as the second conv's whole NHWC input, the ReLU run there in place, the second conv's
window reading it with its pads made on chip), and the same network with its link through DRAM
inside the one program. The network's output bit-exact against JAX (``lax.conv_general_dilated``
per conv, ``output_stage``, ``jnp.maximum`` for the ReLU), the total cycles of the one program equal
to the walk's, and on chip: no STORE or LOAD of the intermediate, fewer DRAM bytes than through
DRAM. A ResNet basic block conv -> ReLU -> conv -> add(x) -> ReLU holds x in the ifmap."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from conv_testlib import conv_reference
from system_testlib import run_image, small

import perf_model
from accel_dse.design_files import load_design
from accel_dse.simulate.dram.image import pack_qparam_lanes, pack_tensor, program_image, qparam_fields, unpack_tensor
from accel_spec.isa import QUEUE_DEPTH, Opcode
from perf_model.compiler.conv import ConvTiling, conv_weight_matrix
from perf_model.compiler.conv_network import compile_conv_network
from perf_model.compiler.network import link_ops
from perf_model.program_timing import DEFAULT_DRAM_LATENCY, dram_rate, transfer_word_beats, word_beats
from workloads import _int_ops as io
from workloads.ops import Conv2d, Requant, Workload
from workloads.vector_ops import VectorOp

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
RQ = Requant(multiplier=(1 << 30) + 12345, shift=9, zero_point=0, bits=8)
RELU = VectorOp(kind="relu", shape=(1,))
ADD = VectorOp(kind="add", shape=(1,), params=tuple(io.add_params(1 / 16, 1 / 32, 1 / 16).items()))


def _conv(c_in: int, c_out: int, hw: int = 6) -> Conv2d:
    return Conv2d(n=1, h=hw, w=hw, c_in=c_in, c_out=c_out, kh=3, kw=3, pad_h=1, pad_w=1, requant=RQ)


def _dram_bytes(prog) -> int:
    """Bytes the program's LOADs and STOREs move (the walk's beats per word)."""
    beats = word_beats(TINY)
    return sum(c["rows"] * c["words"] * transfer_word_beats(c, beats, prog.data_bytes) * prog.data_bytes
               for c in prog.commands if c.opcode in (Opcode.LOAD, Opcode.STORE))


def _run(convs, links, keep_on_chip: bool, seed: int = 0, drop_vector: bool = False, queue_depth: int = 256,
         tilings=None, config=TINY, **memory):
    """The design's output of the network, the reference, the SoC run and the program (``memory``:
    the DRAM model's ``latency`` and ``rate``, ``run_image``'s)."""
    prog = compile_conv_network(config, convs, links, keep_on_chip=keep_on_chip, queue_depth=queue_depth,
                                tilings=tilings)
    rng = np.random.default_rng(seed)
    c0 = convs[0]
    x = rng.integers(-128, 128, (c0.n, c0.h, c0.w, c0.c_in))
    ws = [rng.integers(-128, 128, (c.kh, c.kw, c.c_in // c.groups, c.c_out)) for c in convs]
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], x.reshape(-1, c0.c_in))}
    for i, (conv, w) in enumerate(zip(convs, ws, strict=True)):
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], conv_weight_matrix(conv, prog.convs[i], config.rows, w))
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(conv.requant, conv.c_out))
    h = x
    for i, (conv, w) in enumerate(zip(convs, ws, strict=True)):
        y = conv_reference(conv, h, w, conv.requant)
        for op in link_ops(links[i] if i < len(links) else None):
            if op.kind in ("maxpool", "avgpool"):
                y = np.asarray(io._run(op.kind, dict(op.params), jnp.asarray(y, jnp.int8))).astype(np.int64)
                continue
            y = np.asarray(jnp.maximum(jnp.asarray(y, jnp.int8), 0) if op.kind == "relu" else io.add(
                jnp.asarray(y, jnp.int8), jnp.asarray(x, jnp.int8), scale_a=1 / 16, scale_b=1 / 32,
                scale_out=1 / 16)).astype(np.int64)
        h = y
    if drop_vector:  # every VECTOR and its parameter block out
        keep = [c for j, c in enumerate(prog.commands) if c.opcode != Opcode.VECTOR
                and not (j and prog.commands[j - 1].opcode == Opcode.VECTOR)]
        prog = dataclasses.replace(prog, commands=tuple(keep), chunks=((0, len(keep)),))
    image = program_image(prog, tensors)
    image = np.concatenate([image, np.zeros(-len(image) % prog.data_bytes, np.uint8)])
    run = run_image(config, prog, image, queue_depth=queue_depth, **memory)
    assert run.error_code == 0
    last = convs[-1]
    out = t[f"c{len(convs) - 1}"]
    got = unpack_tensor(out, run.dram[out.base:]).reshape(last.n, last.out_h, last.out_w, last.c_out)
    return got, h, run, prog


@pytest.mark.parametrize("channels", [4, 8], ids=["one_word", "two_words"])
def test_a_chained_3x3_pair_keeps_its_link_on_chip(channels):
    """conv 3x3 -> ReLU -> conv 3x3 (pad 1) as one program: bit-exact, RTL cycles == walk; the
    intermediate never crosses DRAM (one LOAD of the input's bands, the output STOREd once), and the
    program moves fewer DRAM bytes than the same network through DRAM (also bit-exact, RTL == walk)."""
    convs = [_conv(channels, channels, hw=4), _conv(channels, channels, hw=4)]  # 4x4: pads on every side
    got, want, run, prog = _run(convs, [RELU], keep_on_chip=True)
    assert prog.on_chip
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total
    c0 = prog.tensors["c0"]
    touched = [c for c in prog.commands if c.opcode in (Opcode.LOAD, Opcode.STORE)
               and c0.base <= c["dram_addr"] < c0.base + c0.nbytes]
    assert touched == []  # the intermediate is not in DRAM
    assert Opcode.MOVE in [c.opcode for c in prog.commands]
    # on chip the program reads the real tensors once (input, weights, parameters) and writes the output
    assert _dram_bytes(prog) == sum(prog.tensors[n].nbytes for n in ("a0", "b0", "b1", "q0", "q1", "c1"))
    got2, want2, run2, prog2 = _run(convs, [RELU], keep_on_chip=False)
    assert not prog2.on_chip
    assert (got2 == want2).all()
    assert run2.total == run2.model.total
    assert _dram_bytes(prog) < _dram_bytes(prog2)


def test_the_second_conv_reads_the_region_in_row_tiles_channel_blocks_and_tap_tiles():
    """conv 0's output (6x6x8: two channel words a pixel) read in place by conv 1 in tiles of 2 output
    rows, channel blocks of one word (the window steps over the pixel's other word: ``cw`` 2,
    ``cblocks`` 1) and tap tiles of one kernel row (pads shifted per tile); bit-exact, RTL == walk."""
    convs = [_conv(8, 8), _conv(8, 8)]
    tiling = ConvTiling("ok", "", rows_t=2, n_t=4, c_t=1, taps_t=3, order="mn")
    got, want, run, prog = _run(convs, [RELU], keep_on_chip=True, tilings=[None, tiling])
    assert prog.on_chip and prog.convs[1].tiling == tiling
    windows = [c for c in prog.commands if c.opcode == Opcode.WINDOW and c["cblocks"] == 1 and c["px_step"] == 2]
    assert windows  # channel blocks of one word out of two-word pixels
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


def _pool(kind: str, shape: tuple[int, ...], window: int, stride: int, pad: int) -> VectorOp:
    return VectorOp(kind=kind, shape=shape, params=(("window_h", window), ("window_w", window), ("stride_h", stride),
                                                    ("stride_w", stride), ("pad_h", pad), ("pad_w", pad)))


@pytest.mark.parametrize("kind", ["maxpool", "avgpool"])
def test_a_pooling_between_two_convs_stays_on_chip(kind):
    """conv 3x3 (8x8x4) -> ReLU -> 3x3/2 pad-1 pooling -> conv 3x3 on the 4x4 map, ResNet's stem
    pattern: the conv's output MOVEd into the ifmap, the ReLU in place, the unit pooling it into a
    region of its own that the second conv's window reads; bit-exact, RTL == walk, no DRAM trip."""
    convs = [_conv(4, 4, hw=8), _conv(4, 4, hw=4)]
    got, want, run, prog = _run(convs, [(RELU, _pool(kind, (1, 8, 8, 4), 3, 2, 1))], keep_on_chip=True)
    assert prog.on_chip
    assert [c["vkind"] for c in prog.commands if c.opcode == Opcode.VECTOR] == [3, 10 if kind == "maxpool" else 11]
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total
    assert _dram_bytes(prog) == sum(prog.tensors[n].nbytes for n in ("a0", "b0", "b1", "q0", "q1", "c1"))


@pytest.mark.parametrize("kind, window, stride, pad", [("maxpool", 3, 2, 1), ("avgpool", 2, 2, 0)])
def test_a_pooling_link_through_dram_runs_in_bands(kind, window, stride, pad):
    """The same stem pattern on a 16x16 map with a 1 KiB ifmap: the link goes through DRAM inside the
    program, the unit pools the stored output in bands of rows (each band's input rows with their
    window overlap, its top padding only at the image's top) into the pooled tensor the second conv
    reads; bit-exact, RTL == walk."""
    config = dataclasses.replace(TINY, ifmap_sram_kib=1)
    convs = [_conv(4, 4, hw=16), _conv(4, 4, hw=8)]
    link = (RELU, _pool(kind, (1, 16, 16, 4), window, stride, pad))
    got, want, run, prog = _run(convs, [link], keep_on_chip=False, config=config)
    assert not prog.on_chip
    pools = [c for c in prog.commands if c.opcode == Opcode.VECTOR and c["vkind"] in (10, 11)]
    assert len(pools) > 1  # bands
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


def test_a_pooling_link_is_refused_where_it_cannot_run():
    """A pooling must end its link, and not follow the last conv (the network's output is a conv's),
    and the next conv must read its pooled shape: else the network is refused with the reason."""
    from accel_spec.errors import ModelError

    convs = [_conv(4, 4, hw=8), _conv(4, 4, hw=4)]
    pool = _pool("maxpool", (1, 8, 8, 4), 3, 2, 1)
    with pytest.raises(ModelError, match="link 0: a maxpool must be the link's last op"):
        compile_conv_network(TINY, convs, [(pool, RELU)])
    with pytest.raises(ModelError, match="a pooling after the last conv"):
        compile_conv_network(TINY, convs[:1], [pool])
    with pytest.raises(ModelError, match="conv 1 reads 1x8x8x4"):
        compile_conv_network(TINY, [convs[0], _conv(4, 4, hw=8)], [pool])


def test_the_chained_pair_fails_without_its_relu():
    convs = [_conv(4, 4, hw=4), _conv(4, 4, hw=4)]
    got, want, _, _ = _run(convs, [RELU], keep_on_chip=True, drop_vector=True)
    assert (got != want).any()


def test_a_basic_block_over_several_queue_loads_keeps_its_regions_and_windows():
    """The basic block in queue-loads of 4 commands: the ifmap keeps x and the links between them, each
    VECTOR stays with its parameter block, a RUN starting a queue-load gets its WINDOW again (START
    clears it); bit-exact, RTL == walk (summed over the queue-loads)."""
    convs = [_conv(4, 4), _conv(4, 4)]
    got, want, run, prog = _run(convs, [RELU, (ADD, RELU)], keep_on_chip=True, queue_depth=4)
    assert prog.on_chip and len(prog.chunks) > 3
    windows = [c for c in prog.commands if c.opcode == Opcode.WINDOW]
    assert len(windows) > 2  # each conv's WINDOW, and again where a queue-load starts before a RUN
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


def test_a_resnet_basic_block_runs_as_one_program():
    """x -> conv 3x3 -> ReLU -> conv 3x3 -> add(x) -> ReLU: x LOADed whole into its region (conv 0 reads
    it in place and the add reads it after conv 1), the output STOREd from the ifmap; bit-exact, RTL == walk."""
    convs = [_conv(4, 4), _conv(4, 4)]
    got, want, run, prog = _run(convs, [RELU, (ADD, RELU)], keep_on_chip=True)
    assert prog.on_chip
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


@pytest.mark.parametrize(("hw", "channels", "kib", "kept"), [(10, 4, 1, (1,)), (10, 8, 2, (0, 2))],
                         ids=["inner_link_kept", "skip_and_add_kept"])
def test_a_block_whose_tensors_do_not_all_fit_keeps_some_links_on_chip(hw, channels, kib, kept):
    """x -> conv -> ReLU -> conv -> add(x) -> ReLU -> conv on a 1-2 KiB ifmap: x, the inner link and the
    block's output do not fit together beside the bands, so the compiler keeps the links it can, one
    group at a time while the walk gets no slower (``conv_network._keep_links``): the inner link alone
    (the add's operand and output through DRAM, the add in DRAM chunks below the region), or x with
    the block's output (the add on chip, the inner link through DRAM). Bit-exact, RTL == walk, and
    fewer cycles than every link through DRAM."""
    convs = [_conv(channels, channels, hw) for _ in range(3)]
    links = [RELU, (ADD, RELU)]
    config = dataclasses.replace(TINY, ifmap_sram_kib=kib)
    got, want, run, prog = _run(convs, links, keep_on_chip=True, config=config)
    assert not prog.on_chip and prog.kept == kept
    assert prog.links.startswith(f"partly on chip ({len(kept)} tensor")  # what evaluate and simulate print
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total
    stored = {c["dram_addr"] for c in prog.commands if c.opcode == Opcode.STORE}
    for t in (1, 2):  # a kept tensor is never stored; one through DRAM is
        assert (prog.tensors[f"c{t - 1}"].base in stored) == (t not in kept)
    apart = compile_conv_network(config, convs, links, keep_on_chip=False, queue_depth=256)
    from perf_model import gemm_program_cycles

    assert run.total < gemm_program_cycles(config, apart).total


@pytest.mark.parametrize("keep_on_chip", [True, False], ids=["on_chip", "through_dram"])
def test_a_resnet_downsample_block_runs_as_one_program(keep_on_chip):
    """x (6x6x4) -> conv 3x3 stride 2 -> conv 3x3 -> y; downsample 1x1 stride 2 of x -> d; add(d, y) -> ReLU
    (``inputs = (0, 1, 0)``: the downsample reads x, held in the ifmap while both convs run; the add
    reads y's region): bit-exact, RTL == walk; without the add's VECTOR the output differs."""
    convs = [Conv2d(n=1, h=6, w=6, c_in=4, c_out=8, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=1, pad_w=1,
                    requant=RQ),
             _conv(8, 8, hw=3),
             Conv2d(n=1, h=6, w=6, c_in=4, c_out=8, kh=1, kw=1, stride_h=2, stride_w=2, requant=RQ)]
    links = [None, None, (ADD, RELU)]
    prog = compile_conv_network(TINY, convs, links, [None, None, 2], inputs=(0, 1, 0), keep_on_chip=keep_on_chip)
    assert prog.on_chip == keep_on_chip
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 6, 6, 4))
    ws = [rng.integers(-128, 128, (c.kh, c.kw, c.c_in // c.groups, c.c_out)) for c in convs]
    y0 = conv_reference(convs[0], x, ws[0], RQ)
    y1 = conv_reference(convs[1], y0, ws[1], RQ)
    d = conv_reference(convs[2], x, ws[2], RQ)
    s = io.add(jnp.asarray(d, jnp.int8), jnp.asarray(y1, jnp.int8), scale_a=1 / 16, scale_b=1 / 32, scale_out=1 / 16)
    want = np.asarray(jnp.maximum(s, 0)).astype(np.int64)
    t = prog.tensors
    tensors = {"a0": pack_tensor(t["a0"], x.reshape(-1, 4))}
    for i, (conv, w) in enumerate(zip(convs, ws, strict=True)):
        tensors[f"b{i}"] = pack_tensor(t[f"b{i}"], conv_weight_matrix(conv, prog.convs[i], TINY.rows, w))
        tensors[f"q{i}"] = pack_qparam_lanes(t[f"q{i}"], qparam_fields(conv.requant, conv.c_out))
    image = program_image(prog, tensors)
    image = np.concatenate([image, np.zeros(-len(image) % prog.data_bytes, np.uint8)])
    run = run_image(TINY, prog, image)
    assert run.error_code == 0
    got = unpack_tensor(t["c2"], run.dram[t["c2"].base:]).reshape(want.shape)
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total
    assert (got != np.asarray(jnp.maximum(jnp.asarray(d), 0))).any()  # the add changed the downsample's output


@pytest.mark.parametrize("keep_on_chip", [True, False], ids=["on_chip", "through_dram"])
def test_a_narrow_pair_whose_first_conv_is_tap_packed_reads_the_link_unpacked(keep_on_chip):
    """8x8 with a 2-byte bus: the first conv's 2-channel pixels are one narrow word, so its band is a
    sliding LOAD and its window packs 4 taps a word; on chip, the second conv reads the first one's
    output in the ifmap, one tap a word. Through DRAM, the second conv's band is a sliding LOAD of
    the first one's stored output too (its ``T - 1`` tail pixels read past that tensor's rows,
    masked by the window), so it packs as well (no op on that link: a 2-channel DRAM row is no whole
    vector word). Bit-exact, RTL cycles == walk."""
    config = small("ws", True, rows=8, cols=8, vector_unit=True)
    conv = Conv2d(n=1, h=5, w=5, c_in=2, c_out=2, kh=3, kw=3, pad_h=1, pad_w=1, requant=RQ)
    got, want, run, prog = _run([conv, conv], [RELU if keep_on_chip else None], keep_on_chip=keep_on_chip,
                                config=config)
    windows = [c for c in prog.commands if c.opcode == Opcode.WINDOW]
    assert prog.on_chip == keep_on_chip
    assert (windows[0]["pack"], windows[-1]["pack"]) == ((2, 0) if keep_on_chip else (2, 2))
    assert (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total


@pytest.mark.parametrize("change", [{"n": 2}, {"groups": 2}, {"groups": 4}], ids=["batch_2", "groups_2", "depthwise"])
def test_batched_grouped_and_depthwise_pairs_keep_their_link_on_chip(change):
    """The chains the model may keep (``perf_model.evaluator.conv_ops``) beyond one image of dense
    convs: two images in the region, two groups, depthwise. Bit-exact, RTL cycles == walk, no
    intermediate in DRAM."""
    conv = dataclasses.replace(_conv(4, 4, hw=4), **change)
    got, want, run, prog = _run([conv, conv], [None], keep_on_chip=True)
    assert prog.on_chip and (got == want).all(), np.argwhere(got != want)[:5]
    assert run.total == run.model.total
    c0 = prog.tensors["c0"]
    assert not [c for c in prog.commands if c.opcode in (Opcode.LOAD, Opcode.STORE)
                and c0.base <= c["dram_addr"] < c0.base + c0.nbytes]


def test_evaluate_scores_a_chained_pair_as_the_rtl_runs_it():
    """``perf_model.evaluate`` (on-chip reuse, the default) keeps the link of a 3x3 pair whose second
    conv reads the first one's output as is: the ops show ``out``/``in``, their cycles add up to the
    RTL's total cycles of the one program, their DRAM bytes to the real tensors (input, weights,
    output; the intermediate never crosses DRAM), and the workload takes fewer cycles and bytes than
    with each conv its own program (``reuse=False``)."""
    first = dataclasses.replace(_conv(4, 4), name="c0")
    second = dataclasses.replace(first, name="c1", a_from_previous=True)
    wl = Workload(name="pair", ops=(first, second), counts=(1, 1))
    kept, alone = perf_model.evaluate(TINY, wl), perf_model.evaluate(TINY, wl, reuse=False)
    assert [o.on_chip for o in kept.ops] == ["out", "in"] and [o.on_chip for o in alone.ops] == ["", ""]
    # the memory the model assumes (simulate's): the design's DRAM pacing, the default latency and queue
    got, want, run, prog = _run([first, second], [None], keep_on_chip=True, queue_depth=QUEUE_DEPTH,
                                latency=DEFAULT_DRAM_LATENCY, rate=dram_rate(TINY))
    assert prog.on_chip and (got == want).all()
    assert sum(o.total_cycles for o in kept.ops) == run.total
    assert sum(o.compute_cycles for o in kept.ops) == run.compute
    moved = sum(o.dram_read_bytes + o.dram_write_bytes for o in kept.ops)
    assert moved == sum(prog.tensors[n].nbytes for n in ("a0", "b0", "b1", "c1"))
    assert kept.total["total_cycles"] < alone.total["total_cycles"]
    assert moved < sum(o.dram_read_bytes + o.dram_write_bytes for o in alone.ops)
