"""Narrow transfers: tensors shorter than a buffer word cross DRAM at their real size.

A LOAD or STORE with ``lanes`` (``accel_spec.isa``) moves only a word's first lanes; a LOAD
writes the other lanes as zero. The compiler stores a matrix whose rows are shorter than a word
densely (``perf_model.compiler.program.dense_row_elems``) and moves its tiles narrow, so the
SoC runs GEMMs with ``K < R`` and ``N < C``, and convs with fewer channels than rows, from dense
DRAM, bit-exact, in the model's cycles; a conv reads the previous conv's dense output as it is.
"""

from __future__ import annotations

import numpy as np
import pytest
from conv_testlib import conv_reference, operands, run_conv
from system_testlib import int8_operands, jax_int8_matmul, result, run_image, run_soc, small

from accel_dse.simulate.dram.image import pack_tensor, program_image, unpack_tensor
from accel_spec.isa import ERROR_DRAM, Buffer, Command, Opcode
from perf_model.compiler.conv import compile_conv, conv_weight_matrix
from workloads import Requant, output_stage
from workloads.ops import Conv2d


def _narrow(run) -> list[Command]:
    return [c for c in run.program.commands if c.opcode in (Opcode.LOAD, Opcode.STORE) and c["lanes"]]


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("double", [True, False])
@pytest.mark.parametrize("bw,m,k,n", [(2.0, 6, 2, 2), (1.0, 2, 5, 1)])
def test_a_gemm_shorter_than_a_word_runs_from_dense_dram_bit_exact_in_the_models_cycles(dataflow, double, bw, m, k,
                                                                                        n):
    """4x4 arrays: K and N (or M) below the 4 lanes of a word; on a 2-byte bus a row of 2 int8 is one
    beat, on a 1-byte bus a row of 1 or 2 is as many beats (3 would round up to 4, the whole word)."""
    a, b = int8_operands(m, k, n)
    run = run_soc(small(dataflow, double, rows=4, cols=4, bw=bw), a, b)
    assert _narrow(run)  # the program really moves narrow words
    assert run.error_code == 0
    np.testing.assert_array_equal(result(run), jax_int8_matmul(a, b))
    assert run.total == run.model.total and run.stall == run.model.stall
    for t in run.program.tensors.values():  # dense: no row is padded to a whole 4-lane word
        cols = t.shape[0] if t.transposed else t.shape[1]
        if cols < 4:
            assert t.row_elems < 4 or t.row_elems * t.elem_bytes <= run.program.data_bytes


@pytest.mark.parametrize("dataflow", ["ws", "is"])
def test_a_requantised_narrow_store_writes_only_its_channels(dataflow):
    a, b = int8_operands(2, 3, 2, seed=1)
    rq = Requant(multiplier=(1 << 30, 3 << 28), shift=(6,), bias=(7, -300), zero_point=-3, act_min=-100, act_max=90)
    run = run_soc(small(dataflow, rows=4, cols=4, bw=1.0), a, b, requant=rq)
    assert run.error_code == 0 and any(c.opcode == Opcode.STORE for c in _narrow(run))
    np.testing.assert_array_equal(result(run), np.asarray(output_stage(jax_int8_matmul(a, b), rq)).astype(np.int64))
    assert run.total == run.model.total


def test_a_narrow_load_zeroes_the_lanes_it_does_not_read():
    """Stale lanes of a wider word loaded before must not survive a narrow load into the same word:
    load B (4 lanes) full, then again with lanes=1 from a row whose first lane is the same; a RUN
    after the second sees zeros in lanes 1..3."""
    a, b = int8_operands(1, 1, 4, seed=2)
    base = run_soc(small("ws", False, rows=4, cols=4, bw=1.0), a, b)
    cmds = list(base.program.commands)
    loads = [c for c in cmds if c.opcode == Opcode.LOAD and c["buffer"] == Buffer.WEIGHT]
    assert len(loads) == 1 and not loads[0]["lanes"]
    narrow = Command.make(Opcode.LOAD, wait_run=1, **{**dict(loads[0].fields), "lanes": 1})
    at = cmds.index(loads[0]) + 1
    run = run_soc(small("ws", False, rows=4, cols=4, bw=1.0), a, b, commands=[*cmds[:at], narrow, *cmds[at:]])
    want = jax_int8_matmul(a, b).copy()
    want[:, 1:] = 0
    np.testing.assert_array_equal(result(run), want)
    assert run.total == run.model.total


@pytest.mark.parametrize("opcode,lanes,requant", [(Opcode.LOAD, 3, 0), (Opcode.LOAD, 5, 0), (Opcode.STORE, 5, 0),
                                                   (Opcode.STORE, 3, 1)])
def test_lanes_not_whole_beats_or_above_the_word_are_refused_before_any_traffic(opcode, lanes, requant):
    """A 4x4 array on a 2-byte bus: 3 int8 lanes (a load, a requantised store) are 1.5 beats, 5 lanes
    exceed the word: ERROR_DRAM, and nothing is written. (3 raw lanes, 12 bytes, would be whole beats.)"""
    a, b = int8_operands(2, 4, 4)
    prog = run_soc(small("ws", rows=4, cols=4, bw=2.0), a, b).program
    c = prog.tensors["c"]
    fields = dict(buffer=Buffer.OFMAP if opcode == Opcode.STORE else Buffer.IFMAP, dram_addr=c.base,
                  dram_stride=c.pitch, rows=1, words=1, buf_addr=0, row_step=1, word_step=1, lanes=lanes)
    if requant:
        fields["requant"] = 1
    run = run_soc(small("ws", rows=4, cols=4, bw=2.0), a, b, commands=[Command.make(opcode, **fields)])
    assert (run.error_code, run.error_pc) == (ERROR_DRAM, 0)
    assert not run.dram[c.base:c.base + c.nbytes].any()


NARROW_CONVS = {  # an 8 x 8 array on a 2-byte bus: 3 channels are 2 beats (4 lanes) of an 8-lane word
    "3x3 same, 3 -> 3 channels": Conv2d(n=1, h=5, w=5, c_in=3, c_out=3, kh=3, kw=3, pad_h=1, pad_w=1),
    "3x3 stride 2, 2 images, 2 -> 5 channels": Conv2d(n=2, h=6, w=5, c_in=2, c_out=5, kh=3, kw=3, stride_h=2,
                                                      stride_w=2, pad_h=1, pad_w=1),
}


@pytest.mark.parametrize("double,pack", [(True, False), (False, False), (True, True)])
@pytest.mark.parametrize("name", list(NARROW_CONVS))
def test_a_conv_with_fewer_channels_than_rows_reads_and_writes_dense_nhwc(name, double, pack):
    """One tap a word (``pack=False``), and tap-packed: 2-3 channels are at most half the 8 rows, so
    a word's rows hold T = 2 (3 channels, 4 lanes) or 4 (2 channels) taps, and each band is one sliding
    load over a dense tensor with T - 1 pixels of slack after the images."""
    conv = NARROW_CONVS[name]
    config = small("ws", double, rows=8, cols=8, bw=2.0)
    run, out, ref = run_conv(config, conv, pack=pack)
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert (run.total, run.stall) == (run.model.total, run.model.stall)
    a, c = run.program.tensors["a"], run.program.tensors["c"]
    lanes = {2: 2, 3: 4}[conv.c_in]  # 2 channels: one 2-byte beat; 3: two beats (4 lanes), not 8
    assert c.pitch == (16 if conv.c_out <= 4 else 32)  # raw int32 outputs: 4 lanes, or (5 filters) all 8
    bands = [x for x in run.program.commands if x.opcode == Opcode.LOAD and x["buffer"] == Buffer.IFMAP]
    assert a.pitch == lanes and bands and all(x["lanes"] == lanes for x in bands)
    pixels = conv.n * conv.h * conv.w
    weights = [x for x in run.program.commands if x.opcode == Opcode.LOAD and x["buffer"] == Buffer.WEIGHT]
    if pack:
        taps = 8 // lanes  # the word's rows: T taps of `lanes` rows each
        assert run.program.pack == taps.bit_length() - 1
        assert a.rows == pixels + taps - 1
        assert all(x["slide"] and x["rows"] == 1 for x in bands)
        # a packed word of weights holds T taps' rows: whole 8-row words, one per weight row
        assert weights and all(x["words"] == 1 for x in weights)
    else:
        assert run.program.pack == 0 and a.rows == pixels
        # a tap's weights: its first `lanes` rows only (the ifmap lanes beyond are zero), R = 8 words apart
        assert weights and all((x["words"], x["row_step"], x["word_step"]) == (lanes, 8, 1) for x in weights)
    # the bands read the image's real bytes (plus halo rows), not 8-lane words
    assert sum(x["rows"] * x["words"] * lanes for x in bands) < conv.n * conv.h * conv.w * 8


@pytest.mark.parametrize("double", [True, False])
def test_a_chained_conv_pair_reads_the_first_convs_dense_output_as_it_is(double):
    """conv1's requantised NHWC output bytes, copied unchanged into conv2's input tensor, are conv2's
    input: both dense (4 bytes a pixel for 3 channels on 8-lane words)."""
    first = Conv2d(n=1, h=5, w=5, c_in=2, c_out=3, kh=3, kw=3, pad_h=1, pad_w=1)
    second = Conv2d(n=1, h=5, w=5, c_in=3, c_out=2, kh=3, kw=3, pad_h=1, pad_w=1)
    config = small("ws", double, rows=8, cols=8, bw=2.0)
    rq = Requant(multiplier=(1 << 30,), shift=(7,), bias=(5,), zero_point=0)
    run1, y, _ = run_conv(config, first, requant=rq, seed=3)
    c1 = run1.program.tensors["c"]
    raw = np.asarray(run1.dram[c1.base:c1.base + c1.nbytes])

    # one tap a word: conv2's input is exactly conv1's output tensor (tap-packed, its input tensor would
    # have T - 1 pixels of slack after the images)
    prog2 = compile_conv(config, second, requant=False, pack=False)
    a2 = prog2.tensors["a"]
    assert (a2.rows, a2.pitch) == (c1.rows, c1.pitch)
    _, w2 = operands(second, seed=4)
    tensors = {"a": raw, "b": pack_tensor(prog2.tensors["b"], conv_weight_matrix(second, prog2, config.rows, w2))}
    image = program_image(prog2, tensors)
    image = np.concatenate([image, np.zeros(-len(image) % prog2.data_bytes, np.uint8)])
    run2 = run_image(config, prog2, image)
    c2 = prog2.tensors["c"]
    out = unpack_tensor(c2, run2.dram[c2.base:]).reshape(1, 5, 5, 2)
    np.testing.assert_array_equal(out, conv_reference(second, np.asarray(y), w2))
    assert run2.total == run2.model.total
