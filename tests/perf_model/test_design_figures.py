"""``perf_model.evaluator.design_figures``: the figures computed once per distinct design are every
design's own figures, bit for bit, and ``evaluate_designs`` gives a design the same totals in any batch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from accel_spec.config import CHECKSUMS, FORMAT_CODES, MEMORY_NAMES
from accel_spec.errors import AccelDseError
from perf_model import DesignArrays, design_area, evaluate_designs
from perf_model.evaluator.design_figures import PHYSICAL_FIELDS, design_figures, distinct_rows
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads import resolve

_CHOICES = {
    "rows": [8, 16, 32], "cols": [8, 16, 64], "dataflow": [0, 1, 2], "input_bits": [8, 16],
    "ifmap_sram_kib": [32, 128], "weight_sram_kib": [32, 512], "ofmap_sram_kib": [64, 256],
    "tech_nm": [7, 28, 45], "clock_mhz": [400.0, 1000.0, 1800.0], "double_buffered": [False, True],
    "shadow_stationary": [False, True], "checksum": list(CHECKSUMS), "weight_format": list(FORMAT_CODES),
    "act_format": list(FORMAT_CODES), "pack_int4": [False, True],
    # fields the physical figures do not read: a repeat differs in these alone
    "dram_bytes_per_cycle": [8.0, 32.0], "dram": list(MEMORY_NAMES), "vector_unit": [False, True],
}

_BUS = ("dram_bytes_per_cycle", "dram", "vector_unit")


def _random_designs(seed: int, count: int) -> DesignArrays:
    """``count`` valid random designs, then each again with the bus, memory and vector unit redrawn, and
    again with one other field redrawn."""
    rng = np.random.default_rng(seed)

    def draw(names: tuple[str, ...], base: dict[str, object]) -> dict[str, object]:
        while True:  # until ArrayConfig's rules hold
            row = dict(base, **{name: _CHOICES[name][rng.integers(len(_CHOICES[name]))] for name in names})
            row["acc_bits"] = 32 if row["input_bits"] == 8 else 48
            try:
                DesignArrays.from_columns(**{k: [v] for k, v in row.items()}).config(0)
            except AccelDseError:
                continue
            return row

    rows = [draw(tuple(_CHOICES), {}) for _ in range(count)]
    again = [draw(_BUS, row) for row in rows]
    # and with one field the figures read redrawn: a pair apart in that field alone
    physical = [name for name in _CHOICES if name not in _BUS]
    apart = [draw((physical[rng.integers(len(physical))],), row) for row in rows]
    everything = rows + again + apart
    rows = [everything[i] for i in rng.permutation(len(everything))]
    return DesignArrays.from_columns(**{name: [row[name] for row in rows] for name in rows[0]})


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("seed", [0, 1])
def test_figures_once_per_distinct_design_are_each_designs_own(seed: int) -> None:
    designs = _random_designs(seed, 100)
    energy, area = DEFAULT_ENERGY, area_coefficients()
    shared = design_figures(designs, energy, area)
    first, _ = distinct_rows([getattr(designs, name) for name in PHYSICAL_FIELDS])
    assert 4 * len(first) <= 3 * len(designs)  # the shared path ran (repeats in the physical fields)
    for i in range(len(designs)):  # one design alone: computed on its own, nothing shared
        own = design_figures(designs.take(slice(i, i + 1)), energy, area)
        for field in dataclasses.fields(own):
            assert _equal(getattr(shared, field.name)[..., i:i + 1], getattr(own, field.name)), (i, field.name)


def test_distinct_rows_groups_equal_rows_only() -> None:
    rng = np.random.default_rng(3)
    columns = [rng.integers(0, 3, 500), rng.choice([0.5, 2.0, -1.0], 500), rng.integers(-2, 2, 500),
               rng.integers(0, 1 << 40, 500) % 3 * (1 << 40), np.full(500, 7.0)]
    first, inverse = distinct_rows(columns)
    rows = list(zip(*(c.tolist() for c in columns), strict=True))
    assert len(first) == len(set(rows))
    for i, row in enumerate(rows):
        assert rows[int(first[inverse[i]])] == row


def test_a_design_scores_the_same_alone_and_in_a_batch() -> None:
    designs = _random_designs(5, 60)
    workload = resolve("bert_base")
    batch = evaluate_designs(designs, workload)
    for i in range(0, len(designs), 17):
        alone = evaluate_designs(designs.take(slice(i, i + 1)), workload)
        for name in ("total_cycles", "energy_pj", "area_mm2", "vdd", "f_max_mhz", "feasible"):
            assert _equal(getattr(batch, name)[i:i + 1], getattr(alone, name)), (i, name)
        assert batch.reason[i] == alone.reason[0]


@pytest.mark.parametrize("workload", ["bert_base", "mlp"])
def test_a_designs_area_without_a_workload_is_its_area_on_one(workload: str) -> None:
    """``design_area`` (what the grid checks an area constraint by before it scores a workload) is the
    ``area_mm2`` ``evaluate_designs`` gives every feasible design (an infeasible one's is 0), with the
    vector unit (a workload with vector ops, and one without) and without."""
    designs = _random_designs(9, 60)
    table = evaluate_designs(designs, resolve(workload))
    area = design_area(designs)
    ok = table.feasible
    assert np.array_equal(area[ok], table.area_mm2[ok])
    assert (ok & designs.vector_unit).sum() > 10 and (ok & ~designs.vector_unit).sum() > 10
    # the unit's area is part of it: the same designs without the unit are smaller
    without = design_area(dataclasses.replace(designs, vector_unit=np.zeros(len(designs), dtype=bool)))
    assert (area[designs.vector_unit] > without[designs.vector_unit]).all()


def test_scoring_turns_the_cycle_collector_off_and_leaves_it_as_it_found_it(monkeypatch) -> None:
    """The collector is off while the designs are scored (a first pass makes ~10^5 short-lived objects
    whose full collections find nothing), and back as it was after, a raise included."""
    import gc

    from perf_model.figures import design_table

    designs = _random_designs(2, 5)
    seen = []
    real = design_table.evaluate_block
    monkeypatch.setattr(design_table, "evaluate_block", lambda *a, **k: seen.append(gc.isenabled()) or real(*a, **k))
    assert gc.isenabled()
    evaluate_designs(designs, resolve("mlp"))
    assert gc.isenabled() and seen and not any(seen)
    gc.disable()
    try:
        evaluate_designs(designs, resolve("mlp"))
        assert not gc.isenabled()
    finally:
        gc.enable()

    def fail(*a, **k):
        raise RuntimeError("in the middle")

    monkeypatch.setattr(design_table, "evaluate_block", fail)
    with pytest.raises(RuntimeError, match="in the middle"):
        evaluate_designs(designs, resolve("mlp"))
    assert gc.isenabled()
