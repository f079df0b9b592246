"""The ECP5 Fmax model and the FPGA metrics of the sweep's target.

The Fmax figures are nextpnr's post-route Fmax of our RTL (``bench/fpga_measured.json``, ECP5-85k,
seed 1), not values computed by the model.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from accel_dse.design_files import load_preset
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model import (
    ECP5_FMAX_FIT,
    DesignArrays,
    fpga_device,
    fpga_fmax_arrays,
    fpga_fmax_mhz,
    fpga_metrics,
    fpga_path_arrays,
    fpga_resource_arrays,
    fpga_resources,
)

_BASE = {"input_bits": 8, "acc_bits": 32, "clock_mhz": 100.0}


@pytest.mark.parametrize(
    ("config", "mhz"),  # nextpnr Fmax (post-route) on an ECP5-85k, six-stage output stage (bench/fpga_measured.json)
    [
        (load_preset("tiny"), 61.56),
        (ArrayConfig(rows=2, cols=2, dataflow="ws", ifmap_sram_kib=2, weight_sram_kib=2, ofmap_sram_kib=2, **_BASE),
         64.31),
        (ArrayConfig(rows=8, cols=4, dataflow="ws", ifmap_sram_kib=4, weight_sram_kib=4, ofmap_sram_kib=8, **_BASE),
         58.74),
        (ArrayConfig(rows=8, cols=8, dataflow="is", ifmap_sram_kib=16, weight_sram_kib=16, ofmap_sram_kib=32,
                     **_BASE), 55.45),
        (ArrayConfig(rows=4, cols=4, dataflow="ws", input_bits=16, acc_bits=48, ifmap_sram_kib=8, weight_sram_kib=8,
                     ofmap_sram_kib=16, clock_mhz=100.0), 56.65),
    ],
)
def test_fmax_within_5_percent_of_nextpnr(config: ArrayConfig, mhz: float) -> None:
    assert fpga_fmax_mhz(config) == pytest.approx(mhz, rel=0.05)


def test_the_slower_path_sets_the_fmax() -> None:
    tiny = DesignArrays.from_configs([load_preset("tiny")])
    paths = fpga_path_arrays(tiny)
    # nextpnr: tiny's critical path runs through the output stage (25.6 ns), not the PE (16.5 ns before it existed)
    assert paths["output_stage"][0] > paths["pe"][0]
    slow_pe = dataclasses.replace(ECP5_FMAX_FIT, pe_ns=100.0)
    assert fpga_fmax_arrays(tiny, slow_pe)[0] == pytest.approx(1000.0 / fpga_path_arrays(tiny, slow_pe)["pe"][0])
    # OS accumulates in place: its PE path is the slower one (nextpnr: 19.3 ns vs 16.5 ns for WS at 4 x 4)
    os_tiny = DesignArrays.from_configs([dataclasses.replace(load_preset("tiny"), dataflow="os")])
    assert fpga_path_arrays(os_tiny)["pe"][0] > paths["pe"][0]


def test_larger_arrays_are_slower() -> None:
    sizes = [ArrayConfig(rows=r, cols=r, **_BASE) for r in (2, 4, 8, 16, 32)]
    fmax = fpga_fmax_arrays(DesignArrays.from_configs(sizes))
    assert np.all(np.diff(fmax) < 0)


def _grid() -> list[ArrayConfig]:
    out = []
    for r, c, df, ib, kib, sh in itertools.product([1, 3, 8], [1, 4, 16], ["ws", "os", "is"], [8, 16], [1, 64],
                                                   [True, False]):
        out.append(ArrayConfig(rows=r, cols=c, dataflow=df, input_bits=ib, acc_bits=32 if ib == 8 else 48,
                               ifmap_sram_kib=kib, weight_sram_kib=2 * kib, ofmap_sram_kib=kib, shadow_stationary=sh))
    return out


def test_vectorised_model_equals_one_design_at_a_time() -> None:
    configs = _grid()
    batch = fpga_resource_arrays(DesignArrays.from_configs(configs))
    fmax = fpga_fmax_arrays(DesignArrays.from_configs(configs))
    for i, config in enumerate(configs):
        assert {k: int(v[i]) for k, v in batch.items()} == fpga_resources(config)
        assert fmax[i] == fpga_fmax_mhz(config)
    # the batch is not one design repeated
    assert len(set(batch["brams"].tolist())) > 5 and len(set(fmax.tolist())) > 3


def test_metrics_of_a_device() -> None:
    tiny = load_preset("tiny")
    metrics = fpga_metrics(DesignArrays.from_configs([tiny, dataclasses.replace(tiny, rows=64, cols=16)]),
                           "ecp5", "85k")
    assert set(metrics) == {"luts", "ffs", "dsps", "brams", "fmax_mhz", "fpga_utilization"}
    # tiny (nextpnr): 32 of the 85k's 156 MULT18X18D, 33 of its 208 DP16KD, 6,167 of 83,640 logic cells:
    # the DSPs are the largest share
    assert metrics["fpga_utilization"][0] == pytest.approx(32 / 156)
    # 64 x 16 needs 1,024 + 64 multipliers: far beyond 156
    assert metrics["dsps"][1] == 64 * 16 + 4 * 16 and metrics["fpga_utilization"][1] == pytest.approx(1088 / 156)


@pytest.mark.parametrize(
    ("family", "device", "needle"),
    [("nexus", "lifcl-40", "FPGA family must be one of ecp5"), ("ecp5", "100k", "not '100k'"),
     ("ecp5", ["85k"], "ecp5 device must be one of 12k, 25k, 45k, 85k")],
)
def test_unknown_family_or_device(family: object, device: object, needle: str) -> None:
    with pytest.raises(ModelError, match="must be one of") as info:
        fpga_device(family, device)  # type: ignore[arg-type]
    assert needle in str(info.value)
