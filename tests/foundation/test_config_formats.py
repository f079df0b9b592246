"""Operand formats in ArrayConfig: old hashes kept, formats resolved, bad formats and unbuilt pairs refused."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from accel_spec.number_formats import FORMATS, build_rule, product_bits

PRESETS = Path(__file__).resolve().parents[2] / "accel_dse" / "presets"

#: Hashes computed by the code before the format fields existed (main at 98b6ebd): old design files
#: and studies keyed by them must keep them.
OLD_HASHES = {"edge": "ccd1a362e114", "tiny": "11c7f766a4bf", "tpu-v1": "beee4359b8f5"}


@pytest.mark.parametrize("name", sorted(OLD_HASHES))
def test_old_design_files_keep_their_hash(name):
    data = tomllib.loads((PRESETS / f"{name}.toml").read_text())
    # edge gained the vector unit later (a design of its own, a hash of its own): the file as it was
    if data["design"].pop("vector_unit", False):
        assert ArrayConfig.from_dict({**data["design"], "vector_unit": True}).config_hash != OLD_HASHES[name]
    config = ArrayConfig.from_dict(data["design"])
    if name in NAMED_THE_NEW_DEFAULT:
        # edge names lpddr5-x32, which became the default part; the hash leaves the default out, so a file
        # naming no part keeps its hash (tiny's, now naming the part too) and edge's hash is that of its
        # file without the line: one design, one hash, whichever way it is written
        assert config.config_hash != OLD_HASHES[name]
        assert config.config_hash == ArrayConfig.from_dict(
            {k: v for k, v in data["design"].items() if k != "dram"}).config_hash
        return
    assert config.config_hash == OLD_HASHES[name]


#: Presets whose old hash named ``dram = "lpddr5-x32"``, the default part since (issue 52).
NAMED_THE_NEW_DEFAULT = ("edge",)


def test_old_int16_design_keeps_its_hash_spelt_either_way():
    old = ArrayConfig(rows=8, cols=4, dataflow="os", input_bits=16, acc_bits=40, dram="hbm2e")
    assert old.config_hash == "3edff7af59b4"  # from the code before the fields existed
    spelt = dataclasses.replace(old, weight_format="int16", act_format="int16")
    assert spelt == old and spelt.config_hash == old.config_hash and spelt.short_name() == "8x4-os-i16"
    assert spelt.weight_format == "auto" and spelt.weight_fmt.name == "int16"


def test_w4a8_resolves_and_hashes_apart():
    c = ArrayConfig(rows=4, cols=4, weight_format="int4")
    assert (c.weight_format, c.act_format, c.input_bits) == ("int4", "int8", 8)
    assert c.short_name() == "4x4-ws-w4a8"
    assert c.weight_fmt.max_finite == 7 and c.act_fmt.max_finite == 127
    assert c.config_hash != ArrayConfig(rows=4, cols=4).config_hash
    assert c.config_hash != ArrayConfig(rows=4, cols=4, act_format="int4").config_hash


def test_from_dict_derives_input_bits_from_formats():
    c = ArrayConfig.from_dict({"rows": 2, "cols": 2, "weight_format": "int16", "act_format": "int4"})
    assert c.input_bits == 16 and c.acc_bits == 32
    again = ArrayConfig.from_dict(c.to_dict())
    assert again == c and again.config_hash == c.config_hash


def test_replace_keeps_the_pair_consistent():
    c = dataclasses.replace(ArrayConfig(rows=2, cols=2), act_format="int16")
    assert (c.weight_format, c.act_format, c.input_bits) == ("int8", "int16", 16)


def test_unknown_format_lists_the_known_ones():
    with pytest.raises(ConfigError) as err:
        ArrayConfig.from_dict({"rows": 2, "cols": 2, "act_format": "fp9"})
    msg = str(err.value)
    assert "\n" not in msg and "'fp9'" in msg
    for name in FORMATS:
        assert name in msg


@pytest.mark.parametrize(("pair", "extra", "rule"), [
    (("bf16", "bf16"), {"acc_bits": 48}, "acc_bits must be 32 for bf16 operands (a float32 accumulator), not 48"),
    (("bf16", "bf16"), {"checksum": "detect"}, "built for integer operands only"),
    (("bf16", "int16"), {}, "float operands take one format for both"),
    (("fp8_e5m2", "fp8_e5m2"), {"acc_bits": 64},
     "acc_bits must be 32 for fp8_e5m2 operands (a float32 accumulator), not 64"),
    (("fp8_e5m2", "fp8_e4m3"), {"acc_bits": 32}, "float operands take one format for both"),
    (("fp8_e5m2", "fp8_e5m2"), {"acc_bits": 32, "checksum": "detect"}, "built for integer operands only"),
    (("int8", "fp8_e5m2"), {}, "float operands take one format for both"),
    (("fp8_e4m3", "int8"), {"acc_bits": 48}, "float operands take one format for both"),
    (("fp8_e4m3", "fp8_e4m3"), {}, "acc_bits must be >= 37 for fp8_e4m3 operands (one exact product), not 32"),
    (("fp8_e4m3", "fp8_e4m3"), {"acc_bits": 48, "checksum": "detect"}, "built for integer operands only"),
])
def test_unbuilt_pair_is_refused_with_the_rule(pair, extra, rule):
    with pytest.raises(ConfigError, match=re.escape(rule)) as err:
        ArrayConfig(rows=2, cols=2, weight_format=pair[0], act_format=pair[1], **extra)
    assert "\n" not in str(err.value)


def test_fp8_e4m3_pair_is_a_design_of_8_bit_lanes():
    config = ArrayConfig(rows=2, cols=2, acc_bits=48, weight_format="fp8_e4m3", act_format="fp8_e4m3")
    assert config.input_bits == 8 and config.weight_fmt.name == config.act_fmt.name == "fp8_e4m3"
    assert product_bits(config.weight_fmt) == 37  # 448 * 2**9 = 229376 < 2**18: a 36-bit square and a sign


def test_input_bits_conflicting_with_formats_is_refused():
    with pytest.raises(ConfigError, match=r"input_bits must be 16 for weight_format int16 .* not 8"):
        ArrayConfig.from_dict({"rows": 2, "cols": 2, "input_bits": 8, "weight_format": "int16"})


def test_build_rule_accepts_every_integer_pair():
    ints = [f for f in FORMATS.values() if f.is_int]
    assert len(ints) == 3  # int4, int8, int16
    assert all(build_rule(w, a) is None for w in ints for a in ints)


def test_acc_bits_rule_reads_the_derived_width():
    with pytest.raises(ConfigError, match=r"acc_bits must be an integer in \[2 \* input_bits = 32, 64\]"):
        ArrayConfig(rows=2, cols=2, weight_format="int16", acc_bits=24)


def test_every_operand_pair_is_built_or_refused_with_its_rule():
    """The whole pair matrix, from the rule as docs/formats.md states it: integers in any mix
    (W4A8, W8A16, ...), a float format only with itself; a built pair takes its accumulator
    (integers and fp8_e4m3 48 bits here, bf16 and fp8_e5m2 a 32-bit float32)."""
    floats = {"fp8_e4m3", "fp8_e5m2", "bf16"}
    built = 0
    for w in FORMATS:
        for a in FORMATS:
            acc = 32 if {w, a} <= {"bf16", "fp8_e5m2"} else 48
            if (w not in floats and a not in floats) or w == a:
                config = ArrayConfig(rows=2, cols=2, weight_format=w, act_format=a, acc_bits=acc)
                assert config.input_bits == max(8, FORMATS[w].bits, FORMATS[a].bits)
                built += 1
                continue
            with pytest.raises(ConfigError, match=re.escape(f"weight_format {w} with act_format {a}: ")) as err:
                ArrayConfig(rows=2, cols=2, weight_format=w, act_format=a, acc_bits=acc)
            assert "float operands take one format for both" in str(err.value) and "\n" not in str(err.value)
    assert built == 9 + 3  # the 3 x 3 integer pairs, and each float format with itself
