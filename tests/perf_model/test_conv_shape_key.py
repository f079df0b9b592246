"""Convs that differ in their name or requantisation values only are one shape to the conv scorer
(``conv_search.shape_key``): scored once, each still named in its own reasons."""

from __future__ import annotations

import dataclasses

from accel_spec.config import ArrayConfig
from perf_model.compiler import conv_search
from perf_model.compiler.conv_score import conv_figures
from perf_model.compiler.conv_search import conv_tiling, shape_key
from workloads.ops import Conv2d, Requant

A = Conv2d(n=1, h=14, w=14, c_in=16, c_out=16, kh=3, kw=3, pad_h=1, pad_w=1, name="block1.conv1",
           requant=Requant(multiplier=(1 << 30,), shift=(0,)))
B = dataclasses.replace(A, name="block2.conv1", requant=Requant(multiplier=(3 << 28,), shift=(2,)))


def test_two_names_one_shape_share_one_ranking_and_figures():
    assert shape_key(A) == shape_key(B) and shape_key(A) != A and shape_key(A).name == ""
    assert shape_key(dataclasses.replace(A, kh=1, pad_h=0)) != shape_key(A)
    config = ArrayConfig(rows=8, cols=8, ifmap_sram_kib=16, weight_sram_kib=16, ofmap_sram_kib=16)
    conv_search._RANKINGS.clear()
    conv_search._CANDIDATES.clear()
    first = conv_figures(config, A, True)
    ranked = len(conv_search._RANKINGS)
    second = conv_figures(config, B, True)
    assert len(conv_search._RANKINGS) == ranked  # B's ranking was A's
    assert first == second and first.feasible  # type: ignore[union-attr]


def test_an_infeasible_conv_is_named_in_its_own_reason():
    tight = ArrayConfig(rows=8, cols=8, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    big_a = dataclasses.replace(A, h=200, w=200)
    big_b = dataclasses.replace(B, h=200, w=200)
    first, second = conv_tiling(tight, big_a, requant=True), conv_tiling(tight, big_b, requant=True)
    assert not first.feasible and not second.feasible
    assert first.reason.startswith("block1.conv1: the band of one output row")
    assert second.reason.startswith("block2.conv1: the band of one output row")
