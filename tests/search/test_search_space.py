"""Space files: parse -> validate -> build, and every bad-input rule with its message."""

from __future__ import annotations

import itertools
import math

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from search_testlib import SMALL_SPACE, make_space

from accel_dse.search import OBJECTIVES, load_space, parse_space, space_names
from accel_dse.search.space.metrics import parse_constraint
from accel_spec.config import FIELD_NAMES, ArrayConfig
from accel_spec.errors import ConfigError


def test_param_kinds_and_distributions(small_space):
    d = small_space.distributions()
    assert d["log2_rows"] == IntDistribution(1, 6)
    assert d["dataflow"] == CategoricalDistribution(["ws", "os", "is"])
    assert d["clock_mhz"] == FloatDistribution(200.0, 1000.0, step=200.0)
    assert d["double_buffered"] == CategoricalDistribution([True, False])
    # Fields left out are fixed at the ArrayConfig defaults.
    fixed = small_space.fixed
    defaults = ArrayConfig(rows=1, cols=1).to_dict()
    for field in ("input_bits", "acc_bits", "ifmap_sram_kib", "ofmap_sram_kib", "tech_nm"):
        assert fixed[field] == defaults[field]
    assert [p.field for p in small_space.params] == list(FIELD_NAMES)


def test_design_decodes_powers_of_two_and_round_trips(small_space):
    params = {"log2_rows": 5, "log2_cols": 3, "dataflow": "os", "log2_weight_sram_kib": 2,
              "idx_dram_bytes_per_cycle": 1, "clock_mhz": 600.0, "double_buffered": False}
    config = small_space.design(params)
    assert (config.rows, config.cols, config.weight_sram_kib) == (32, 8, 4)
    assert config.dataflow.value == "os" and config.clock_mhz == 600.0 and config.double_buffered is False
    assert config.dram_bytes_per_cycle == 16.0  # [4, 16, 64]: index 1
    assert small_space.params_of(config) == params


def test_numeric_choices_are_ordered_by_value_not_by_listing():
    space = make_space(params={"rows": [8], "cols": [64, 8, 32], "dram_bytes_per_cycle": [16.0, 4.0],
                               "dataflow": ["is", "ws"], "double_buffered": [True, False]})
    dists = space.distributions()
    assert dists["idx_cols"] == IntDistribution(0, 2) and dists["idx_dram_bytes_per_cycle"] == IntDistribution(0, 1)
    assert dists["dataflow"] == CategoricalDistribution(["is", "ws"])  # not numbers: unordered
    assert dists["double_buffered"] == CategoricalDistribution([True, False])
    by_index = [space.design({"idx_cols": i, "idx_dram_bytes_per_cycle": 0, "dataflow": "ws",
                              "double_buffered": True}).cols for i in range(3)]
    assert by_index == [8, 32, 64]
    assert space.param("idx_cols").describe() == "8|32|64 (ordered)"
    # The grid keeps the listed order (grid indices of saved tables do not change).
    assert list(space.grid_columns(0, space.grid_size())["cols"][::8]) == [64, 8, 32]


def test_grid_enumerates_the_cartesian_product(small_space):
    # Independent enumeration with itertools in the same order (last field fastest).
    axes = {
        "rows": [2, 4, 8, 16, 32, 64], "cols": [2, 4, 8, 16, 32, 64], "dataflow": ["ws", "os", "is"],
        "weight_sram_kib": [1, 2, 4, 8], "dram_bytes_per_cycle": [4.0, 16.0, 64.0],
        "clock_mhz": [200.0, 400.0, 600.0, 800.0, 1000.0], "double_buffered": [True, False],
    }
    fixed = small_space.fixed
    expected = []
    for combo in itertools.product(*(axes.get(f, [fixed.get(f)]) for f in FIELD_NAMES)):
        expected.append(dict(zip(FIELD_NAMES, combo, strict=True)))
    assert small_space.grid_size() == len(expected) == 6 * 6 * 3 * 4 * 3 * 5 * 2
    cols = small_space.grid_columns(0, len(expected))
    for i in (0, 1, 7, 1234, len(expected) - 1):
        got = {f: cols[f][i].item() if hasattr(cols[f][i], "item") else cols[f][i] for f in FIELD_NAMES}
        assert got == expected[i]
        assert small_space.design(small_space.grid_params(i)).to_dict() == ArrayConfig(**expected[i]).to_dict()


def test_fingerprint_ignores_name_but_not_the_problem():
    a = make_space()
    assert make_space(name="other", description="x").fingerprint == a.fingerprint
    assert make_space(objectives=["latency"]).fingerprint != a.fingerprint
    assert make_space(constraints=["area_mm2 <= 3"]).fingerprint != a.fingerprint
    params = dict(SMALL_SPACE["params"], rows=[4, 8])
    assert make_space(params=params).fingerprint != a.fingerprint


def test_ranges_log_int_and_float_steps():
    params = dict(SMALL_SPACE["params"], ifmap_sram_kib={"low": 16, "high": 1024, "scale": "log"},
                  clock_mhz={"low": 100.0, "high": 900.0, "scale": "log"}, acc_bits={"low": 16, "high": 48, "step": 8})
    space = make_space(params=params)
    d = space.distributions()
    assert d["ifmap_sram_kib"] == IntDistribution(16, 1024, log=True)
    assert d["clock_mhz"] == FloatDistribution(100.0, 900.0, log=True)
    assert space.param("acc_bits").grid_values() == (16, 24, 32, 40, 48)
    with pytest.raises(ConfigError, match=r"params.clock_mhz is a continuous range.*needs a step"):
        space.grid_size()


def test_shipped_spaces_load_and_default_exists():
    names = space_names()
    assert "edge-int8" in names and len(names) >= 3
    for name in names:
        space = load_space(name)
        assert space.name == name
        assert space.objectives and (space.workloads or space.pod is not None) and space.free_params


def test_a_single_choice_is_fixed():
    space = make_space(params=dict(SMALL_SPACE["params"], dataflow=["os"]))
    assert "dataflow" not in space.distributions() and space.fixed["dataflow"] == "os"


BAD = [
    ({"params": dict(SMALL_SPACE["params"], dataflow=[])}, r"params.dataflow: the list of choices must not be empty"),
    ({"params": dict(SMALL_SPACE["params"], cols={"low": 64, "high": 8})},
     r"params.cols: low must be <= high, not low=64 > high=8"),
    ({"params": dict(SMALL_SPACE["params"], colums=[4])},
     r"unknown field 'colums' in \[params\] \(did you mean 'cols'\?\)"),
    ({"objectives": ["throughput"]}, r"objective must be one of latency, energy, area, edp, tops_per_w, power, "
                                     r"accuracy, coverage, not 'throughput'"),
    ({"constraints": ["area_mm3 <= 4"]}, r"unknown metric 'area_mm3' \(did you mean 'area_mm2'\?\)"),
    ({"constraints": ["area_mm2 ~ 4"]}, r"constraint must read 'METRIC <= NUMBER'"),
    ({"constraints": ["area_mm2 <= nan"]}, r"needs a finite number bound"),
    ({"params": dict(SMALL_SPACE["params"], rows={"low": 3, "high": 64, "scale": "pow2"})},
     r"params.rows: a pow2 range needs powers of two, not low=3"),
    ({"params": dict(SMALL_SPACE["params"], rows={"low": 2, "high": 9, "step": 2})},
     r"params.rows: high - low must be a multiple of step"),
    ({"params": dict(SMALL_SPACE["params"], rows=[4, 4])}, r"params.rows: choices must not repeat a value"),
    ({"params": dict(SMALL_SPACE["params"], rows=[4, 0])}, r"params.rows: rows must be a positive integer, not 0"),
    ({"params": dict(SMALL_SPACE["params"], rows=8.5)}, r"params.rows: rows must be a positive integer, not 8.5"),
    ({"params": dict(SMALL_SPACE["params"], dataflow={"low": 1, "high": 2})}, r"dataflow takes a value or a list"),
    ({"params": dict(SMALL_SPACE["params"], rows={"low": 2, "hi": 8})}, r"unknown range key 'hi'"),
    ({"params": dict(SMALL_SPACE["params"], rows={"low": 2, "high": 8, "scale": "cubic"})},
     r"scale must be one of linear, log, pow2, not 'cubic'"),
    ({"params": {"cols": 4}}, r"\[params\] must set 'rows'"),
    ({"objectives": []}, r"objectives must be a non-empty list"),
    ({"objectives": ["edp", "edp"]}, r"objectives must not repeat a name"),
    ({"workloads": []}, r"workloads must be a non-empty list"),
    ({"workloads": [{"spec": "a", "weight": 0}]}, r"weight must be a positive finite number, not 0"),
    ({"workloads": ["a", "a"]}, r"workloads must not repeat a spec"),
    ({"name": "bad name!"}, r"name must be letters, digits"),
    ({"objectivs": ["edp"]}, r"unknown key 'objectivs' \(did you mean 'objectives'\?\)"),
    ({"params": dict(SMALL_SPACE["params"], input_bits=[8, 12])}, r"params.input_bits: input_bits must be 8 or 16"),
]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_bad_spaces_are_one_clear_error(change, message):
    with pytest.raises(ConfigError, match=message) as info:
        make_space(**change)
    text = str(info.value)
    assert "\n" not in text and text.startswith("test space")


def test_missing_keys_and_unknown_space_name(tmp_path):
    doc = {k: v for k, v in SMALL_SPACE.items() if k != "objectives"}
    with pytest.raises(ConfigError, match="'objectives' is missing"):
        parse_space(doc, source="s")
    with pytest.raises(ConfigError, match=r"space 'edge-int9' is neither a space file nor a shipped space "
                                          r"\(spaces: .*edge-int8"):
        load_space("edge-int9")
    with pytest.raises(ConfigError, match=r"space file .*nope.toml' not found"):
        load_space(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("objectives = [\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_space(bad)


def test_space_file_round_trip(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        'objectives = ["latency", "area"]\nconstraints = ["power_w <= 2"]\n'
        '[[workloads]]\nspec = "a"\nweight = 2\n[[workloads]]\nspec = "b"\n'
        '[params]\nrows = {low = 4, high = 32, scale = "pow2"}\ncols = 16\ndataflow = ["ws", "is"]\n'
    )
    space = load_space(path)
    assert space.name == "mine" and space.is_multi_objective
    assert [w.weight for w in space.workloads] == [2.0, 1.0]
    assert space.directions == ["minimize", "minimize"]
    assert str(space.constraints[0]) == "power_w <= 2"


def test_objective_table_and_constraints():
    assert OBJECTIVES["tops_per_w"] == ("tops_per_w", "maximize")
    c = parse_constraint("area <= 50", where="x")  # objective short names are accepted
    assert (c.metric, c.op, c.bound) == ("area_mm2", "<=", 50.0)
    assert c.violation(49.0) == -1.0 and c.violation(52.5) == 2.5
    g = parse_constraint("tops_per_w > 2", where="x")
    assert g.op == ">=" and g.violation(1.5) == 0.5 and g.violation(3.0) == -1.0
    assert math.isclose(parse_constraint("power_w<=1e-1", where="x").bound, 0.1)


def test_evaluator_marks_format_pairs_it_cannot_build():
    import numpy as np

    from accel_dse.search.scoring.evaluator import ModelEvaluator
    from accel_spec.config import FIELD_NAMES, ArrayConfig
    from workloads import resolve

    base = ArrayConfig(rows=4, cols=4).to_dict()
    fp8 = dict(base, weight_format="fp8_e4m3", act_format="fp8_e4m3", acc_bits=48, clock_mhz=500.0)
    rows = [dict(base, weight_format="int4"), dict(base, weight_format="fp8_e5m2", act_format="int8"),
            dict(fp8, checksum="detect"), dict(fp8, acc_bits=32),
            dict(base, weight_format="bf16", act_format="bf16", acc_bits=48), fp8,
            # input_bits as the formats make it (ArrayConfig's rule), whatever the column says
            dict(base, weight_format="int4", act_format="int4", input_bits=16),
            dict(base, weight_format="bf16", act_format="bf16", input_bits=8, clock_mhz=200.0)]
    columns = {f: np.array([r[f] for r in rows]) for f in FIELD_NAMES}
    batch = ModelEvaluator([("mlp", 1.0, resolve("mlp"))]).evaluate_columns(columns)
    assert batch.feasible.tolist() == [True, False, False, False, False, True, True, True]
    assert "float operands take one format for both" in batch.reason[1]
    for i in (1, 2, 3, 4):  # ArrayConfig refuses each pair with the same rule
        with pytest.raises(ConfigError) as err:
            ArrayConfig(**rows[i])
        assert batch.reason[i] == str(err.value)
    same = ArrayConfig(**dict(rows[6], input_bits=8))
    assert batch.metrics["area_mm2"][6] == pytest.approx(
        ModelEvaluator([("mlp", 1.0, resolve("mlp"))]).evaluate_columns(
            {f: np.array([same.to_dict()[f]]) for f in FIELD_NAMES}).metrics["area_mm2"][0])
