"""SystemConfig, Split and system files: bad values are one-line errors naming the field and the rule."""

from __future__ import annotations

import pytest
from pod_testlib import CHIP, system

from accel_dse.pod_files import load_system, parse_system_toml, system_preset_names
from accel_spec.errors import AccelDseError, ConfigError
from accel_spec.pod_config import Split, SystemConfig


@pytest.mark.parametrize("changes,needle", [
    ({"link_gb_per_s": 0.0}, "link_gb_per_s must be a positive finite number, not 0.0"),
    ({"link_gb_per_s": -5.0}, "link_gb_per_s must be a positive"),
    ({"hbm_gib": 0}, "hbm_gib must be a positive"),
    ({"dims": (2, 2, 2)}, "dims must have 2 entries for a torus2d, not 3"),
    ({"dims": (2, 0)}, "dims entry must be a positive integer, not 0"),
    ({"topology": "hypercube"}, "topology must be one of ring, torus2d, torus3d, switch"),
    ({"pods": 2}, "dcn_gb_per_s must be positive when pods > 1"),
    ({"cores": 0}, "cores must be a positive integer"),
])
def test_bad_system_values(changes, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        system(**changes)
    assert isinstance(info.value, AccelDseError) and "\n" not in str(info.value)


@pytest.mark.parametrize("fields,needle", [
    ({"dp": 0}, "split dp must be a positive integer, not 0"),
    ({"dp": 4, "ep": 3}, "split ep must divide dp"),
    ({"zero": 4}, r"split zero must be no larger than 3, not 4"),
    ({"recompute": 1.5}, r"split recompute must be a number in \[0, 1\]"),
])
def test_bad_split_values(fields, needle):
    with pytest.raises(ConfigError, match=needle):
        Split(**fields)


def test_system_file_with_split_and_stated_chips():
    text = """
[design]
rows = 16
cols = 16
input_bits = 16
acc_bits = 64

[system]
topology = "torus3d"
dims = [2, 2, 4]
chips = 16
hbm_gib = 8

[system.split]
dp = 4
tp = 4
"""
    sys_, split = parse_system_toml(text, source="t")
    assert sys_.chips == 16 and sys_.dims == (2, 2, 4)
    assert split == Split(dp=4, tp=4)
    with pytest.raises(ConfigError, match=r"dims \[2, 2, 4\] make 16 chips, not the 32 chips given"):
        parse_system_toml(text.replace("chips = 16", "chips = 32"), source="t")
    with pytest.raises(ConfigError, match="unknown key 'linkbw'"):
        parse_system_toml(text.replace("hbm_gib = 8", "hbm_gib = 8\nlinkbw = 3"), source="t")
    with pytest.raises(ConfigError, match="the chip is missing"):
        parse_system_toml("[system]\ntopology = 'ring'\ndims = [4]\n", source="t")
    chip_by_name, _ = parse_system_toml("[system]\nchip = 'edge'\ntopology = 'ring'\ndims = [4]\n", source="t")
    assert chip_by_name.chip.rows == 16


def test_presets_load_and_state_their_peaks():
    assert {"tpu-v4-pod", "tpu-v5e-pod", "a100-cluster"} <= set(system_preset_names())
    v4, _ = load_system("tpu-v4-pod")
    assert v4.chips == 4096 and v4.peak_macs_per_s * 2 == pytest.approx(275e12, rel=0.01)
    v5e, _ = load_system("tpu-v5e-pod")
    assert v5e.chips == 256 and v5e.peak_macs_per_s * 2 == pytest.approx(197e12, rel=0.01)
    a100, _ = load_system("a100-cluster")
    assert a100.peak_macs_per_s * 2 == pytest.approx(312e12, rel=0.01)
    assert SystemConfig(chip=CHIP, topology="switch", dims=(8,)).chips == 8
