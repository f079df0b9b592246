"""Expert parallelism with capacity factors, by hand: the experts' GEMM rows, the all-to-all volume
and its time on a ring, and the split's checks (one-line errors from the CLI)."""

from __future__ import annotations

import pytest
from cli_testlib import assert_one_line_error
from pod_testlib import DENSE, MOE, system, train

from accel_spec.errors import ConfigError
from accel_spec.pod_config import Split
from perf_model.pod import evaluate_split
from perf_model.pod.evaluate import OpCosts, _time_pass
from perf_model.pod.steps import passes
from perf_model.pod.topology import place, system_axes

# A ring of 4 chips (10 GB/s a link one way, 1 us a hop), MOE (d 256, 8 experts of 128, top-2, gated),
# dp = ep = 4, training batch 8 of 64 tokens, microbatch 1: 2 sequences a replica, 64 tokens a microbatch.
# By hand, capacity factor 1.25:
#   tokens routed to the 2 local experts of a chip from its 4-chip group: 64 * 4 * 2 = 512 over 8 experts
#   = 64 each; capacity ceil(1.25 * 64) = 80 rows per expert GEMM, 2 experts (batch 2) per chip
#   all-to-all bytes per chip: 64 tokens * top-2 * 256 * 2 bytes * 1.25 = 81,920
#   a bidirectional ring of 4: the busiest link carries S * 4 / 8 = 40,960 bytes: 4.096 us, plus 3 hops
#   of 1 us: 7.096 us per all-to-all; 2 per layer (dispatch, combine) on 4 layers: 8 per pass = 56.768 us
ROWS, A2A_BYTES, A2A_PASS_S = 80, 81_920, 8 * (40_960 / 10e9 + 3e-6)


def _ring() -> object:
    return system("ring", (4,))


def _pass(capacity: float):
    sys_ = _ring()
    split = Split(dp=4, ep=4, capacity_factor=capacity)
    return sys_, split, passes(sys_, train(MOE), split, seqs=1, q_len=64, kv_len=64, head_tokens=64)


def test_capacity_sets_the_expert_rows_and_the_all_to_all_volume_by_hand():
    _, _, (fwd, bwd) = _pass(1.25)
    experts = {op.name: op for op, _ in fwd.ops if op.name.startswith("expert_")}
    assert set(experts) == {"expert_gate", "expert_up", "expert_down"}
    assert all(op.m == ROWS and op.batch == 2 for op in experts.values())
    assert experts["expert_up"].k == 256 and experts["expert_up"].n == 128
    assert fwd.ep_alltoall == bwd.ep_alltoall == A2A_BYTES
    assert fwd.ep_count == bwd.ep_count == 8
    # dropless (capacity 0): exactly the routed tokens, 64 rows and 65,536 bytes
    _, _, (fwd0, _) = _pass(0.0)
    assert {op.m for op, _ in fwd0.ops if op.name.startswith("expert_")} == {64}
    assert fwd0.ep_alltoall == 65_536


def test_the_all_to_alls_take_their_closed_form_time_on_the_ring():
    sys_, split, (fwd, _) = _pass(1.25)
    groups = place({"tp": 1, "ep": 4, "dp": 1, "pp": 1}, system_axes(sys_))
    costs = OpCosts(sys_.chip)
    costs.prepare([op for op, _ in fwd.ops])
    timed = _time_pass(fwd, costs, groups, 1e12)
    assert timed.ep_s == pytest.approx(A2A_PASS_S, rel=1e-12)


def test_a_larger_capacity_costs_more_and_is_reported_in_the_split():
    sys_ = _ring()
    job = train(MOE)
    low, high = (evaluate_split(sys_, job, Split(dp=4, ep=4, capacity_factor=c)) for c in (1.0, 2.0))
    assert low.ok and high.ok
    assert high.metrics["step_s"] > low.metrics["step_s"]
    assert "capacity=2" in high.split.label()


@pytest.mark.parametrize("value", [-1.0, 0.1, 65.0, float("nan"), True, "1.25"])
def test_bad_capacity_factors_are_refused_by_name(value):
    with pytest.raises(ConfigError, match="capacity_factor must be 0 .dropless. or a number in"):
        Split(capacity_factor=value)


def test_a_capacity_on_a_dense_model_is_infeasible_with_the_reason():
    result = evaluate_split(_ring(), train(DENSE), Split(dp=4, capacity_factor=1.25))
    assert not result.ok and "needs a mixture-of-experts model" in result.reason


def test_the_cli_takes_a_capacity_and_refuses_a_bad_one(run_cli):
    args = ("system", "evaluate", "--system", "tpu-v5e-pod", "--dims", "2,2", "--model", "qwen3_moe_30b:layers=4",
            "--seq", "256", "--batch", "16")
    code, out, err = run_cli(*args, "--split", "dp=4,ep=4,capacity_factor=1.5")
    assert code == 0, err
    assert "capacity=1.5" in out
    code, out, err = run_cli(*args, "--split", "dp=4,ep=4,capacity_factor=100")
    assert_one_line_error(code, out, err, "capacity_factor must be 0 .dropless. or a number in .0.25, 64.")
