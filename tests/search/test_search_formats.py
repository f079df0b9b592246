"""Operand formats as a search axis: the sweep's accuracy metric, its constraint, its aggregation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from accel_dse.search import load_space
from accel_dse.search.scoring.evaluator import ModelEvaluator
from accel_spec.config import FIELD_NAMES, ArrayConfig
from accel_spec.errors import ConfigError
from workloads import Gemm, Workload, resolve
from workloads.accuracy import workload_sqnr_db


def test_a_format_sweep_with_an_sqnr_constraint_keeps_only_accurate_designs(run_cli, tmp_path):
    code, out, err = run_cli("sweep", "--space", "edge-formats", "--trials", "24", "--sampler", "random",
                             "--seed", "3", "--out-dir", str(tmp_path / "run"), "--json", "--quiet")
    assert code == 0, err
    best = json.loads(out)["best"]
    assert best
    mlp = resolve("mlp")
    for row in best:
        config = ArrayConfig.from_dict(row["params"] | {"acc_bits": 48, "tech_nm": 28})
        sqnr = workload_sqnr_db(mlp, config.weight_fmt.name, config.act_fmt.name)
        assert row["metrics"]["sqnr_db"] == pytest.approx(sqnr) and sqnr >= 30
        assert row["values"]["accuracy"] == pytest.approx(sqnr)
        assert config.weight_fmt.name != "int4" and config.act_fmt.name != "int4"  # int4 is ~11-15 dB on mlp


def test_the_space_lists_fp8_e5m2_and_refuses_an_unknown_format(tmp_path):
    text = ('objectives = ["edp"]\n[[workloads]]\nspec = "mlp"\n[params]\nrows = 4\ncols = 4\n'
            'weight_format = ["int8", "fp8_e5m2"]\nact_format = ["int8", "fp8_e5m2"]\n')
    path = tmp_path / "s.toml"
    path.write_text(text)
    space = load_space(path)
    assert "fp8_e5m2" in str(space)
    path.write_text(text.replace('"fp8_e5m2"]\nact', '"fp8_e5m3"]\nact'))
    with pytest.raises(ConfigError, match="weight_format must be one of int4, int8, int16, fp8_e4m3, fp8_e5m2, bf16, "
                                          "not 'fp8_e5m3'"):
        load_space(path)


def test_sqnr_is_the_minimum_over_the_workloads():
    shallow = Workload(name="shallow", ops=(Gemm(m=8, k=8, n=8, name="s"),), counts=(1,))
    deep = Workload(name="deep", ops=(Gemm(m=8, k=1024, n=8, name="d"),), counts=(1,))
    base = ArrayConfig(rows=4, cols=4, weight_format="int4", act_format="int8").to_dict()
    columns = {f: np.array([base[f]]) for f in FIELD_NAMES}
    both = ModelEvaluator([("shallow", 1.0, shallow), ("deep", 3.0, deep)]).evaluate_columns(columns)
    each = [workload_sqnr_db(w, "int4", "int8") for w in (shallow, deep)]
    assert each[0] != each[1]
    assert both.metrics["sqnr_db"][0] == pytest.approx(min(each))
