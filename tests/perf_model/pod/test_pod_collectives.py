"""Collective times by hand on small tori, lines and switches (docs/system.md states the algorithms)."""

from __future__ import annotations

import pytest

from perf_model.pod import Axis, Segment, all_gather, all_reduce, all_to_all, p2p, place, reduce_scatter
from perf_model.pod.topology import merge_axes

B = 1000.0  # bytes/s one way per link
S = 4000.0  # bytes


def ring(n: int, *, wrap: bool = True, bw: float = B, lat: float = 0.0) -> Segment:
    return Segment(n, bw, lat, wrap, False)


def test_reduce_scatter_on_a_closed_ring_of_4_uses_both_directions():
    # each chip sends 3/4 of its buffer, half each way, over links of B: 3/4 * S / (2 B)
    assert reduce_scatter([ring(4)], S) == pytest.approx(0.75 * S / (2 * B))
    assert all_gather([ring(4)], S) == pytest.approx(1.5)
    assert all_reduce([ring(4)], S) == pytest.approx(3.0)


def test_a_line_has_half_the_ring_bandwidth_and_latency_adds_per_hop():
    assert reduce_scatter([ring(4, wrap=False)], S) == pytest.approx(0.75 * S / B)
    assert reduce_scatter([ring(4, lat=0.5)], S) == pytest.approx(1.5 + 3 * 0.5)


def test_a_4x4_torus_runs_both_axes_at_once():
    segs = [ring(4), ring(4)]
    assert reduce_scatter(segs, S) == pytest.approx(15 / 16 * S / (4 * B))


def test_switch_and_dcn_hierarchy():
    switch = Segment(4, B, 0.0, False, True)
    dcn = Segment(2, 100.0, 0.0, False, True, True)
    assert all_gather([switch], S) == pytest.approx(0.75 * S / B)
    # in the pod first (S -> S/4 per chip), then the 2 pods on what is left
    assert reduce_scatter([switch, dcn], S) == pytest.approx(0.75 * S / B + 0.5 * (S / 4) / 100.0)


def test_all_to_all_by_hand():
    # closed ring of 4: the link i -> i+1 carries i->i+1 (S/4) and half of i->i+2 and i-1->i+1 (S/8 each)
    assert all_to_all([ring(4)], S) == pytest.approx(0.5 * S / B)
    # line of 3: link 0 -> 1 carries 0->1 and 0->2, S/3 each
    assert all_to_all([ring(3, wrap=False)], S) == pytest.approx(2 / 3 * S / B)
    # closed ring of 3: each chip's two others are neighbours: S/3 per link
    assert all_to_all([ring(3)], S) == pytest.approx(S / 3 / B)
    # a switch: each chip sends all but its own share through its link
    assert all_to_all([Segment(8, B, 0.0, False, True)], S) == pytest.approx(7 / 8 * S / B)
    # two axes, one phase each
    assert all_to_all([ring(4), ring(3)], S) == pytest.approx(0.5 * S / B + S / 3 / B)


def test_point_to_point_and_empty_groups():
    assert p2p([ring(4, lat=0.25)], S) == pytest.approx(S / B + 0.25)
    assert p2p([], S) == 0.0 and all_reduce([], S) == 0.0 and all_to_all([], S) == 0.0


def test_placement_on_a_ring_of_4_shares_links_between_interleaved_groups():
    axes = [Axis(4, B, 0.0, True, False)]
    groups = place({"tp": 2, "dp": 2}, axes)
    assert isinstance(groups, dict)
    assert groups["tp"] == [Segment(2, B, 0.0, False, False, axis=0)]  # neighbours, a line of 2
    assert groups["dp"] == [Segment(2, B / 2, 0.0, True, False, axis=0)]  # 2 apart, a ring, links shared by 2
    # dp's ring: (1/2) S over 2 * B/2
    assert reduce_scatter(groups["dp"], S) == pytest.approx(0.5 * S / B)


def test_placement_over_two_axes_and_the_dcn():
    axes = [Axis(4, B, 0.0, True, False), Axis(4, B, 0.0, True, False), Axis(2, 50.0, 0.0, False, True, True)]
    groups = place({"tp": 4, "dp": 8}, axes)
    assert isinstance(groups, dict)
    assert groups["tp"] == [Segment(4, B, 0.0, True, False, axis=0)]
    assert groups["dp"] == [Segment(4, B, 0.0, True, False, axis=1), Segment(2, 50.0, 0.0, False, True, True, axis=2)]


def test_a_group_that_does_not_tile_the_axes_is_refused_with_a_reason():
    fits = place({"tp": 3, "dp": 2}, [Axis(6, B, 0.0, True, False)])
    assert fits == {"tp": [Segment(3, B, 0.0, False, False, axis=0)],
                    "dp": [Segment(2, B / 3, 0.0, True, False, axis=0)]}
    bad = place({"tp": 4, "dp": 2}, [Axis(6, B, 0.0, True, False), Axis(4, B, 0.0, True, False)])
    assert isinstance(bad, str) and "does not tile" in bad


def test_two_groups_on_one_axis_reduce_as_one_ring():
    axes = [Axis(8, B, 0.0, True, False)]
    groups = place({"ep": 2, "dp": 4}, axes)
    assert isinstance(groups, dict)
    whole = merge_axes(groups["ep"] + groups["dp"])
    assert whole == [Segment(8, B, 0.0, True, False, axis=0)]  # the whole closed axis
    assert reduce_scatter(whole, S) == pytest.approx(7 / 8 * S / (2 * B))


def test_flat_rings_across_the_dcn_pay_one_hop_per_member_and_pieces_repeat_the_latency():
    node = Segment(4, B, 0.5, False, True)
    dcn = Segment(3, 100.0, 2.0, False, True, True)
    bandwidth = 0.75 * S / B + (2 / 3) * (S / 4) / 100.0
    # hierarchical: 3 hops at 0.5 in the node, 2 at 2.0 across nodes
    assert reduce_scatter([node, dcn], S) == pytest.approx(bandwidth + 3 * 0.5 + 2 * 2.0)
    # flat: one ring of 12 members, 11 steps each waiting on the slowest hop (2.0)
    assert reduce_scatter([node, dcn], S, flat=True) == pytest.approx(bandwidth + 11 * 2.0)
    # issued as 5 collectives: the bytes once, the latency five times
    assert all_gather([node, dcn], S, flat=True, pieces=5) == pytest.approx(bandwidth + 5 * 11 * 2.0)
    # flat only changes groups that reach across the DCN
    assert reduce_scatter([node], S, flat=True) == pytest.approx(0.75 * S / B + 3 * 0.5)
