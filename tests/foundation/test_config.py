"""ArrayConfig: validation, hashing, round-trips."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accel_spec.config import FIELD_NAMES, ArrayConfig, Dataflow
from accel_spec.errors import AccelDseError, ConfigError


def test_defaults_and_derived_figures():
    c = ArrayConfig(rows=8, cols=4)
    assert c.dataflow is Dataflow.WS
    assert c.pes == 32
    assert c.peak_macs_per_s == 32 * 1000.0 * 1e6


@pytest.mark.parametrize("field", ["rows", "cols"])
@pytest.mark.parametrize("value", [0, -3, 12.5, "abc", True, None])
def test_bad_dims_rejected(field, value):
    with pytest.raises(ConfigError) as info:
        ArrayConfig(**{"rows": 4, "cols": 4, field: value})
    msg = str(info.value)
    assert msg.startswith(f"{field} must be a positive integer")
    assert repr(value) in msg


def test_too_large_dim_names_the_limit():
    with pytest.raises(ConfigError, match=r"rows must be no larger than 4096, not 5000"):
        ArrayConfig(rows=5000, cols=4)


@pytest.mark.parametrize("value", ["rs", "ws ", "", 3])
def test_bad_dataflow_lists_choices(value):
    with pytest.raises(ConfigError) as info:
        ArrayConfig(rows=4, cols=4, dataflow=value)
    assert "dataflow must be one of ws, os, is" in str(info.value)
    assert repr(value) in str(info.value)


def test_dataflow_case_insensitive_string():
    assert ArrayConfig(rows=2, cols=2, dataflow="OS").dataflow is Dataflow.OS


@pytest.mark.parametrize("value", [7, 4, 32, True, 8.0])
def test_input_bits_must_be_8_or_16(value):
    with pytest.raises(ConfigError, match="input_bits must be 8 or 16"):
        ArrayConfig(rows=2, cols=2, input_bits=value)


def test_acc_bits_must_hold_a_product():
    with pytest.raises(ConfigError, match=r"acc_bits must be an integer in \[2 \* input_bits = 32, 64\], not 24"):
        ArrayConfig(rows=2, cols=2, input_bits=16, acc_bits=24)


@pytest.mark.parametrize("field", ["ifmap_sram_kib", "weight_sram_kib", "ofmap_sram_kib"])
def test_sram_zero_rejected(field):
    with pytest.raises(ConfigError, match=f"{field} must be a positive integer, not 0"):
        ArrayConfig(rows=2, cols=2, **{field: 0})


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), True, "8"])
def test_bandwidth_and_clock_positive_finite(value):
    for field in ("dram_bytes_per_cycle", "clock_mhz"):
        with pytest.raises(ConfigError, match=f"{field} must be a positive finite number"):
            ArrayConfig(rows=2, cols=2, **{field: value})


def test_double_buffered_must_be_bool():
    with pytest.raises(ConfigError, match="double_buffered must be true or false, not 1"):
        ArrayConfig(rows=2, cols=2, double_buffered=1)


def test_errors_share_one_root():
    with pytest.raises(AccelDseError):
        ArrayConfig(rows=0, cols=1)


def test_frozen_and_replace_rechecks():
    c = ArrayConfig(rows=4, cols=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.rows = 8  # type: ignore[misc]
    assert dataclasses.replace(c, rows=32).rows == 32
    with pytest.raises(ConfigError):
        dataclasses.replace(c, rows=0)


def test_keyword_only():
    with pytest.raises(TypeError):
        ArrayConfig(4, 4)  # type: ignore[misc]


def _sha12(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]


def test_config_hash_is_sha256_of_canonical_json():
    # dram and checksum at their neutral defaults (the default part "lpddr5-x32", "none") are left out,
    # so designs hashed before the fields existed keep their hash; another part (also "none", ideal
    # memory) or a checksum is part of it.
    # max_power_density_w_mm2, a budget the RTL ignores, is left out whatever its value.
    c = ArrayConfig(rows=16, cols=8, dataflow="os", clock_mhz=700)
    budget = "max_power_density_w_mm2"
    without_new = {k: v for k, v in c.to_dict().items() if k not in ("dram", "checksum", "weight_format", "act_format",
                                                                   "vector_unit", "pack_int4", budget)}
    assert c.to_dict()["dram"] == "lpddr5-x32" and c.to_dict()["checksum"] == "none"
    assert c.config_hash == _sha12(without_new)
    assert len(c.config_hash) == 12
    formats = ("weight_format", "act_format", "pack_int4", budget)  # left out while int of input_bits / false
    named = dataclasses.replace(c, dram="hbm2e")
    assert named.config_hash == _sha12({k: v for k, v in named.to_dict().items()
                                        if k not in ("checksum", "vector_unit", *formats)}) != c.config_hash
    ideal = dataclasses.replace(c, dram="none")
    assert ideal.config_hash == _sha12({k: v for k, v in ideal.to_dict().items()
                                        if k not in ("checksum", "vector_unit", *formats)}) != c.config_hash
    checked = dataclasses.replace(c, checksum="detect")
    assert checked.config_hash == _sha12({k: v for k, v in checked.to_dict().items()
                                          if k not in ("dram", "vector_unit", *formats)}) != c.config_hash
    # vector_unit: left out while false (every design hashed before it keeps its hash), part of it when true
    vec = dataclasses.replace(c, vector_unit=True)
    assert vec.config_hash == _sha12({k: v for k, v in vec.to_dict().items()
                                      if k not in ("dram", "checksum", *formats)}) != c.config_hash
    assert vec.vector_lanes == 16 and c.vector_lanes == 0  # the ifmap word's lanes: R for OS
    assert dataclasses.replace(vec, dataflow="is").vector_lanes == 8  # C for IS


def test_vector_unit_takes_its_doors_activation_formats():
    """int8, fp8, unpacked int4 and bf16 activations (the door converts them) take the unit; int16
    lanes and packed int4 activations are refused with the rule (accel_spec.vector_door)."""
    for weight, act, acc in (("int8", "int8", 32), ("fp8_e4m3", "fp8_e4m3", 40), ("fp8_e5m2", "fp8_e5m2", 32),
                             ("int4", "int4", 32), ("int8", "int4", 32), ("int4", "int8", 32), ("bf16", "bf16", 32)):
        c = ArrayConfig(rows=4, cols=4, acc_bits=acc, weight_format=weight, act_format=act, vector_unit=True)
        assert c.vector_unit and c.vector_lanes == 4
    assert ArrayConfig(rows=4, cols=4, weight_format="int4", act_format="int8", pack_int4=True,
                       vector_unit=True).vector_unit  # packed weights: the unit reads no weight
    for kw, rule in (({"input_bits": 16}, "not input_bits = 16 (int16 activations)"),
                     ({"weight_format": "int16", "act_format": "int8"}, "not input_bits = 16 (int8 activations)"),
                     ({"weight_format": "int4", "act_format": "int4", "pack_int4": True},
                      "int4 activations packed two a byte")):
        with pytest.raises(ConfigError, match=r"^vector_unit = true: .*" + re.escape(rule)):
            ArrayConfig(rows=4, cols=4, acc_bits=32, vector_unit=True, **kw)
    with pytest.raises(ConfigError, match="vector_unit must be true or false, not 1"):
        ArrayConfig(rows=4, cols=4, vector_unit=1)


def test_checksum_values_are_checked():
    assert ArrayConfig(rows=2, cols=2, checksum="detect").checksum == "detect"
    for bad in ("correct", "Detect", 1, True, None):
        with pytest.raises(ConfigError, match="checksum must be one of none, detect"):
            ArrayConfig(rows=2, cols=2, checksum=bad)


def test_hash_ignores_int_vs_float_spelling_of_floats():
    assert ArrayConfig(rows=2, cols=2, clock_mhz=700).config_hash == ArrayConfig(
        rows=2, cols=2, clock_mhz=700.0
    ).config_hash


def test_hash_differs_per_field():
    base = ArrayConfig(rows=4, cols=4)
    variants = [
        dataclasses.replace(base, rows=8),
        dataclasses.replace(base, dataflow=Dataflow.OS),
        dataclasses.replace(base, double_buffered=False),
        dataclasses.replace(base, tech_nm=28),
    ]
    assert len({base.config_hash, *(v.config_hash for v in variants)}) == 5


def test_from_dict_unknown_key_suggests():
    with pytest.raises(ConfigError, match=r"unknown key 'rowz' in design \(did you mean 'rows'\?\)"):
        ArrayConfig.from_dict({"rowz": 4, "cols": 4})


def test_from_dict_missing_required():
    with pytest.raises(ConfigError, match="missing required key 'rows'"):
        ArrayConfig.from_dict({"cols": 4})


configs = st.builds(
    ArrayConfig,
    rows=st.integers(1, 4096),
    cols=st.integers(1, 4096),
    dataflow=st.sampled_from(list(Dataflow)),
    input_bits=st.sampled_from([8, 16]),
    acc_bits=st.just(32),
    ifmap_sram_kib=st.integers(1, 1 << 20),
    weight_sram_kib=st.integers(1, 1 << 20),
    ofmap_sram_kib=st.integers(1, 1 << 20),
    dram_bytes_per_cycle=st.floats(0.01, 1e4),
    clock_mhz=st.floats(1, 5000),
    double_buffered=st.booleans(),
    tech_nm=st.integers(5, 180),
)


@given(configs)
def test_dict_and_json_round_trip(config):
    data = json.loads(json.dumps(config.to_dict()))
    assert set(data) == set(FIELD_NAMES)
    again = ArrayConfig.from_dict(data)
    assert again == config
    assert again.config_hash == config.config_hash
