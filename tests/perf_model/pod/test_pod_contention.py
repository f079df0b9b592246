"""Link contention: the data-parallel collectives hide only under the part of each pass that the
tensor-parallel and expert collectives leave free on the links they share (by hand)."""

from __future__ import annotations

import pytest
from pod_testlib import CHIP

from accel_spec.pod_config import Split, SystemConfig
from perf_model.pod.data_parallel import exposed_s, shared_axes
from perf_model.pod.topology import merge_axes, place, system_axes


def test_exposed_data_parallel_time_by_hand():
    # 2 microbatches, backward 4 s of which 1.5 s hold the shared links: 2 * (4 - 1.5) = 5 s of cover
    assert exposed_s(Split(dp=4), 10.0, 2, 2.0, 4.0) == pytest.approx(2.0)  # no contention: 10 - 8
    assert exposed_s(Split(dp=4), 10.0, 2, 2.0, 4.0, 0.5, 1.5) == pytest.approx(5.0)
    # ZeRO-3 hides under both passes: 2 * ((2 - 0.5) + (4 - 1.5)) = 8 s of cover
    assert exposed_s(Split(dp=4, zero=3), 10.0, 2, 2.0, 4.0, 0.5, 1.5) == pytest.approx(2.0)
    # links busy all the time: nothing hides; without overlap everything is exposed
    assert exposed_s(Split(dp=4), 10.0, 2, 2.0, 4.0, 0.0, 4.0) == pytest.approx(10.0)
    assert exposed_s(Split(dp=4, overlap=False), 10.0, 2, 2.0, 4.0, 0.0, 1.0) == pytest.approx(10.0)


def _groups(split: Split, system: SystemConfig) -> dict:
    groups = place({"tp": split.tp, "ep": split.ep, "dp": split.dp // split.ep, "pp": split.pp}, system_axes(system))
    groups["dp_all"] = merge_axes(groups["ep"] + groups["dp"])
    return groups


def test_groups_on_the_same_switch_share_its_links_and_a_full_node_does_not():
    # two nodes of 8 on a switch, joined by the DCN
    system = SystemConfig(chip=CHIP, topology="switch", dims=(8,), pods=2, dcn_gb_per_s=10.0)
    # tp 2 leaves 4 data-parallel ranks in the node: both cross the node's switch
    assert shared_axes(_groups(Split(dp=8, tp=2), system)) == {"tp"}
    # tp 8 fills the node: data parallelism runs over the DCN alone
    assert shared_axes(_groups(Split(dp=2, tp=8), system)) == set()
    # experts inside the data-parallel group: ep 2 on the switch beside dp
    assert shared_axes(_groups(Split(dp=16, ep=2), system)) == {"ep"}
