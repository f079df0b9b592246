"""A whole CNN workload as one conv network (``perf_model.compiler.conv_workload``): the builtins'
convs, link ops, residual operands and downsample inputs, compiled to one program on ``tiny`` with
its vector unit, and the reasons a workload is not one."""

from __future__ import annotations

import dataclasses

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.isa import Opcode
from perf_model.compiler.conv_network import compile_conv_network
from perf_model.compiler.conv_workload import after_global_pool, conv_network_spec
from workloads.ops import Conv2d, Gemm

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)


def _spec(name: str):
    wl = workloads.resolve(name)
    return wl, conv_network_spec(wl)


def test_resnet18_is_one_network_with_its_downsamples_reading_their_blocks_input():
    wl, spec = _spec("resnet18:res=32")
    assert not isinstance(spec, str)
    names = [c.name for c in spec.convs]
    assert names[0] == "conv1" and names[-1] == "fc" and len(names) == 21
    fc = spec.convs[-1]  # the classifier over the pooled 1x1 map
    assert (fc.h, fc.w, fc.kh, fc.c_in, fc.c_out) == (1, 1, 1, 512, 1000)
    assert [op.kind for op in spec.links[0]] == ["maxpool"]
    assert [op.kind for op in spec.links[19]] == ["add", "relu", "avgpool"]
    for k, name in enumerate(names):
        if name.endswith("downsample"):  # layerN.0.downsample: the block's input, conv1's
            assert spec.inputs[k] == names.index(name.replace("downsample", "conv1"))
            assert spec.skips[k] == k  # its add: the block's conv2 output (tensor k)
        else:
            assert spec.inputs[k] == k
    # layer1.0's add (after its conv2, op 2) adds the pooled map, tensor 1: conv 1's input
    assert spec.skips[2] == 1 and spec.skips[4] == 3
    prog = compile_conv_network(TINY, spec.convs, spec.links, spec.skips, inputs=spec.inputs)
    kinds = [c["vkind"] for c in prog.commands if c.opcode == Opcode.VECTOR]
    # links through DRAM on tiny: the adds and ReLUs run in ifmap chunks, the stem's pool in bands of rows
    assert set(kinds) == {1, 3, 10, 11} and kinds.count(11) == 1 and kinds.count(10) > 1 and kinds.count(1) >= 8
    assert perf_model.gemm_program_cycles(TINY, prog).total > 0


def test_mobilenet_v2s_adds_take_their_blocks_input():
    """MobileNetV2's residual adds follow blocks without one: each add's operand is the first tensor of its
    shape since the previous add (the input of its expand conv), not the workload's input."""
    wl, spec = _spec("mobilenet_v2:res=32")
    assert not isinstance(spec, str)
    for k, skip in enumerate(spec.skips):
        if skip is None:
            continue
        conv = spec.convs[k]
        reader = spec.convs[skip]  # the conv that reads the operand: an expand 1x1 of the same shape
        assert (reader.n, reader.h, reader.w, reader.c_in) == (conv.n, conv.out_h, conv.out_w, conv.c_out)
        assert 0 < k - skip <= 3
    compile_conv_network(TINY, spec.convs, spec.links, spec.skips, inputs=spec.inputs)


def test_workloads_that_are_not_one_network_are_named():
    _, alex = _spec("alexnet")
    assert alex == "op classifier.fc1 is not a requantised convolution"  # it reads a flattened 6x6 map
    _, bert = _spec("bert_base:seq=64")
    assert isinstance(bert, str) and bert.startswith("vector op ")
    gemm = Gemm(m=1, k=8, n=4)
    assert after_global_pool(gemm, None) is gemm
    conv = Conv2d(n=1, h=4, w=4, c_in=8, c_out=8, kh=1, kw=1)
    assert after_global_pool(conv, None) is conv


def test_evaluate_gives_the_one_programs_walk_only_where_there_is_one():
    wl = workloads.resolve("resnet18:res=32")
    net = perf_model.evaluate(TINY, wl).network
    assert net is not None and (net["convs"], net["vector_ops"]) == (21, 18)
    assert net["total_cycles"] > net["compute_cycles"] > 0 and net["vector_cycles"] > 0
    assert perf_model.evaluate(load_design("tiny"), wl).network is None  # no vector unit
    assert perf_model.evaluate(TINY, workloads.resolve("mlp")).network is None  # neither a CNN nor an encoder layer
    encoder = perf_model.evaluate(TINY, workloads.resolve("bert_base:seq=64")).network  # no convs: the layer's
    assert encoder is not None and "convs" not in encoder and (encoder["gemms"], encoder["vector_ops"]) == (30, 6)
    assert perf_model.evaluate(TINY, wl).to_dict()["network"] == net
