"""torchvision's ResNet-18 architecture through torch.export gives the builtin ``resnet18``'s convs
(their requantisation and chaining), MACs and vector ops, in the library and through ``evaluate
--workload file.py:fn``, where it runs as the builtin's one-program conv network."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from workloads import resolve
from workloads.host_work import host_work

pytest.importorskip("torch", reason="the [torch] extra (scripts/setup.sh installs it)")

MODEL = Path(__file__).with_name("torch_resnet.py")


def _records(wl):
    """The ops in order, every field but their names and origins, ``a_from_previous`` included."""
    return [(type(op).__name__, {k: v for k, v in dataclasses.asdict(op).items() if k not in ("name", "origin")})
            for op in wl.ops]


def test_torch_resnet18_gives_the_builtins_convs_macs_and_vector_ops():
    torch_wl, builtin = resolve(f"{MODEL}:resnet18"), resolve("resnet18")
    assert torch_wl.source == "torch"
    assert torch_wl.total_macs == builtin.total_macs == 1_814_073_344
    assert _records(torch_wl) == _records(builtin) and len(torch_wl.ops) == 21
    # the builtin's requantisation (its derived parameters: no calibration on meta) and chaining
    assert sum(op.a_from_previous for op in torch_wl.ops) == 8
    assert [op.requant.act_min for op in torch_wl.ops].count(0) == 9  # the stem and each block's conv1: ReLU
    # the downsample, which PyTorch's block computes first, is recorded where the builtin has it
    assert [op.name for op in torch_wl.ops][5:8] == ["layer2.0.conv1", "layer2.0.conv2", "layer2.0.downsample.0"]
    assert torch_wl.vector_after == builtin.vector_after
    assert [(v.kind, math.prod(v.shape)) for v in torch_wl.vector_ops] == [
        (v.kind, math.prod(v.shape)) for v in builtin.vector_ops]
    assert [v.kind for v in torch_wl.vector_ops].count("add") == 8  # the residual adds
    assert host_work(torch_wl.other_primitives, torch_wl.other_elements).arithmetic == ()
    assert [op.name for op in torch_wl.ops][:3] == ["conv1", "layer1.0.conv1", "layer1.0.conv2"]


def _unnamed(x):
    """evaluate's JSON without the op names (a conv's note starts with its name)."""
    if isinstance(x, dict):
        return {k: x[k].partition(": ")[2] if k == "conv_note" else _unnamed(x[k])
                for k in x if k not in ("name", "workload")}
    return [_unnamed(v) for v in x] if isinstance(x, list) else x


def test_evaluate_on_edge_gives_the_builtins_figures_and_network(run_cli):
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", f"{MODEL}:resnet18", "--json")
    assert code == 0, err
    got = json.loads(out)
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", "resnet18", "--json")
    assert code == 0, err
    want = json.loads(out)
    assert got["total"]["macs"] == want["total"]["macs"] == 1_814_073_344
    assert len(got["vector_ops"]) == len(want["vector_ops"]) == 18
    assert got["network"]["convs"] == 21 and "total_cycles" in got["network"]  # one program
    for key in ("ops", "total", "vector_ops", "network", "host_work", "bound"):
        assert _unnamed(got[key]) == _unnamed(want[key]), key
