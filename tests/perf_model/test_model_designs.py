"""DesignArrays: built from configs or columns, broadcast, checked like ArrayConfig."""

from __future__ import annotations

import numpy as np
import pytest

import perf_model
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError


def test_from_configs_round_trips():
    configs = [ArrayConfig(rows=8, cols=4, dataflow="os", input_bits=16, acc_bits=40, tech_nm=7),
               ArrayConfig(rows=2, cols=3, double_buffered=False, dram_bytes_per_cycle=3.5)]
    designs = perf_model.DesignArrays.from_configs(configs)
    assert len(designs) == 2
    assert designs.dataflow.tolist() == [1, 0]
    assert [designs.config(i) for i in range(2)] == configs


def test_from_columns_broadcasts_and_defaults():
    designs = perf_model.DesignArrays.from_columns(rows=[4, 8, 16], cols=8, dataflow=["ws", "OS", "is"])
    assert len(designs) == 3
    assert designs.cols.tolist() == [8, 8, 8]
    assert designs.dataflow.tolist() == [0, 1, 2]
    default = ArrayConfig(rows=4, cols=8)
    assert designs.config(0) == default
    assert designs.rows.dtype == np.int64 and designs.clock_mhz.dtype == np.float64


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (dict(rows=[4, 0], cols=4), "rows\\[1\\] must be an integer in \\[1, 4096\\], not 0"),
        (dict(rows=4, cols=4, input_bits=[8, 12]), "input_bits\\[1\\] must be 8 or 16, not 12"),
        (dict(rows=4, cols=4, input_bits=16, acc_bits=24),
         "acc_bits\\[0\\] must be an integer in \\[2 \\* input_bits, 64\\]"),
        (dict(rows=4, cols=4, dram_bytes_per_cycle=[1.0, np.nan]),
         "dram_bytes_per_cycle\\[1\\] must be a positive finite"),
        (dict(rows=4, cols=4, clock_mhz=-1.0), "clock_mhz\\[0\\] must be a positive finite number, not -1.0"),
        (dict(rows=4, cols=4, dataflow="xs"), "dataflow must be one of ws, os, is, not 'xs'"),
        (dict(rows=4, cols=4, dataflow=7), "dataflow\\[0\\] must be a dataflow code"),
        (dict(rows=4, cols=4, tech_nm=3), "tech_nm\\[0\\] must be an integer in \\[5, 180\\], not 3"),
        (dict(rows=4.5, cols=4), "rows\\[0\\] must be an integer, not 4.5"),
        (dict(rows=[1, 2], cols=[1, 2, 3]), "do not broadcast"),
        (dict(rows=4, cols=4, double_buffered=1), "double_buffered must hold booleans"),
        (dict(rows=4, cols=4, colour=1), "unknown design field 'colour'"),
        (dict(cols=4), "needs the 'rows' column"),
    ],
)
def test_bad_columns_name_field_index_and_value(columns, message):
    with pytest.raises(ModelError, match=message):
        perf_model.DesignArrays.from_columns(**columns)


def test_take_selects_designs():
    designs = perf_model.DesignArrays.from_columns(rows=[1, 2, 3, 4], cols=2)
    assert designs.take(np.array([3, 0])).rows.tolist() == [4, 1]
    assert len(designs.take(slice(1, 3))) == 2
