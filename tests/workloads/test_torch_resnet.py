"""torchvision's ResNet-18 architecture through torch.export gives the builtin ``resnet18``'s convs,
MACs and vector ops, in the library and through ``evaluate --workload file.py:fn``."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from workloads import resolve
from workloads.host_work import host_work

pytest.importorskip("torch", reason="the [torch] extra (scripts/setup.sh installs it)")

MODEL = Path(__file__).with_name("torch_resnet.py")


def _shapes(wl):
    """The ops as shapes, as a multiset (PyTorch's module order runs a block's downsample before its
    first conv): not their names, origins or requantisation, nor ``a_from_previous``, which a float
    model's trace does not set (its ops carry no requantisation records yet: #53)."""
    return Counter((type(op).__name__, tuple((k, v) for k, v in dataclasses.asdict(op).items()
                                             if k not in ("name", "origin", "requant", "a_from_previous")))
                   for op in wl.ops)


def test_torch_resnet18_gives_the_builtins_convs_macs_and_vector_ops():
    torch_wl, builtin = resolve(f"{MODEL}:resnet18"), resolve("resnet18")
    assert torch_wl.source == "torch"
    assert torch_wl.total_macs == builtin.total_macs == 1_814_073_344
    assert _shapes(torch_wl) == _shapes(builtin) and len(torch_wl.ops) == 21
    assert [(v.kind, math.prod(v.shape)) for v in torch_wl.vector_ops] == [
        (v.kind, math.prod(v.shape)) for v in builtin.vector_ops]
    assert [v.kind for v in torch_wl.vector_ops].count("add") == 8  # the residual adds
    assert host_work(torch_wl.other_primitives, torch_wl.other_elements).arithmetic == ()
    assert [op.name for op in torch_wl.ops][:3] == ["conv1", "layer1.0.conv1", "layer1.0.conv2"]


def test_evaluate_on_edge_gives_the_builtins_macs(run_cli):
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", f"{MODEL}:resnet18", "--json")
    assert code == 0, err
    got = json.loads(out)
    code, out, err = run_cli("evaluate", "--design", "edge", "--workload", "resnet18", "--json")
    assert code == 0, err
    want = json.loads(out)
    assert got["total"]["macs"] == want["total"]["macs"] == 1_814_073_344
    assert len(got["vector_ops"]) == len(want["vector_ops"]) == 18
