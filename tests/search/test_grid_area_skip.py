"""The grid sampler without a table scores no design whose area breaks a constraint (the area needs
no workload), and finds exactly what scoring every design finds."""

from __future__ import annotations

import numpy as np

import perf_model
import workloads
from accel_dse.search import ModelEvaluator, parse_space
from accel_dse.search.scoring import grid

_SPACE = {
    "name": "area-skip",
    "objectives": ["edp"],
    "workloads": [{"spec": "mlp"}],
    "params": {
        "rows": {"low": 4, "high": 64, "scale": "pow2"},
        "cols": {"low": 4, "high": 64, "scale": "pow2"},
        "dataflow": ["ws", "os"],
        "ifmap_sram_kib": {"low": 16, "high": 1024, "scale": "pow2"},
        "vector_unit": [True, False],
    },
}


def _space(constraints: list[str]):
    return parse_space({**_SPACE, "constraints": constraints}, source="test space")


def test_a_grid_without_a_table_skips_designs_over_its_area_and_finds_the_same(tmp_path, monkeypatch):
    plain = _space([])
    designs = perf_model.DesignArrays.from_columns(**plain.grid_columns(0, plain.grid_size()))
    bound = float(np.median(perf_model.design_area(designs)))
    space = _space([f"area_mm2 <= {bound:.6g}", "power_w <= 5"])
    evaluator = ModelEvaluator([("mlp", 1.0, workloads.resolve("mlp"))])
    scored: list[int] = []
    real = perf_model.evaluate_designs

    def counted(d, ops, **kw):
        scored.append(len(d))
        return real(d, ops, **kw)

    monkeypatch.setattr(perf_model, "evaluate_designs", counted)
    full = grid.grid_search(space, evaluator, chunk=97, keep=30, table=tmp_path / "all.npz")
    every = sum(scored)
    scored.clear()
    skipped = grid.grid_search(space, evaluator, chunk=97, keep=30)
    assert every == space.grid_size() and 0 < sum(scored) < 0.6 * every  # about half over the area, not scored
    assert full.n_feasible == skipped.n_feasible > 10
    assert list(full.index) == list(skipped.index) and np.array_equal(full.values, skipped.values)
    table = np.load(tmp_path / "all.npz")
    assert (table["violation"] > 0).sum() > 0.3 * every  # the constraint cut designs the table run scored
    # with workers (the constraints go with the space to each): the same
    two = grid.grid_search(space, evaluator, chunk=97, keep=30, workers=2)
    assert two.n_feasible == full.n_feasible and list(two.index) == list(full.index)


def test_a_skipped_design_comes_back_infeasible_with_the_constraint_as_its_reason():
    columns = _space([]).grid_columns(0, _space([]).grid_size())
    area = perf_model.design_area(perf_model.DesignArrays.from_columns(**columns))
    bound = float(np.round(np.quantile(area, 0.4), 2))
    space = _space([f"area_mm2 <= {bound}"])
    evaluator = ModelEvaluator([("mlp", 1.0, workloads.resolve("mlp"))])
    batch = evaluator.evaluate_columns(columns, skip_broken=space.constraints)
    whole = evaluator.evaluate_columns(columns)
    over = area > bound
    assert over.any() and (~over).any() and whole.feasible[over].any()
    assert not batch.feasible[over].any()
    for i in np.flatnonzero(over)[:20]:
        assert batch.reason[i] == f"area_mm2 = {area[i]:.4g} breaks the constraint area_mm2 <= {bound:g} (not scored)"
    # the others are scored as without the skip
    assert np.array_equal(batch.feasible[~over], whole.feasible[~over])
    for name, values in whole.metrics.items():
        assert np.array_equal(batch.metrics[name][~over], values[~over]), name
