"""A Hugging Face config's rope_theta and rope_scaling (linear, llama3, dynamic) reach the JAX
builder's ``rope`` records and the unit's cos/sin table; other types are named and left out."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from accel_spec.errors import WorkloadError
from workloads._int_ops import rope_tables
from workloads._registry import resolve
from workloads._rope_scaling import config_scaling, inverse_frequencies

LLAMA = json.loads((Path(__file__).parent / "hf_configs" / "llama_tiny.json").read_text())  # head size 8
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}


def _ropes(tmp_path, **changes):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, **changes}))
    wl = resolve(f"{path}:seq=4,kv=60,layers=1")
    ropes = [v for v in wl.vector_ops if v.kind == "rope"]
    assert len(ropes) == 2  # q and k
    return wl, dict(ropes[0].params)


def test_config_theta_and_llama3_scaling_reach_the_rope_record(tmp_path):
    wl, params = _ropes(tmp_path, rope_theta=500000.0, rope_scaling=LLAMA3)
    assert params == {"start": 60, "theta": 500000, "scaling": 2, "factor_q16": 8 << 16, "low_freq_q16": 1 << 16,
                      "high_freq_q16": 4 << 16, "original": 64}
    assert "rope_theta=500000" in wl.description
    _, plain = _ropes(tmp_path, rope_theta=1000000.0)  # transformers 5's rope_parameters spelling too
    assert plain == {"start": 60, "theta": 1000000}
    _, nested = _ropes(tmp_path, rope_parameters={**LLAMA3, "rope_theta": 500000.0})
    assert nested == params


def test_another_scaling_type_is_named_and_left_out(tmp_path):
    wl, params = _ropes(tmp_path, rope_scaling={"rope_type": "yarn", "factor": 4.0})
    assert params == {"start": 60, "theta": 10000}
    assert "RoPE scaling of type 'yarn' not applied" in wl.description


def test_bad_scaling_factor_is_one_line():
    with pytest.raises(WorkloadError, match="rope_scaling factor must be a positive number, not 'x'"):
        config_scaling({"rope_scaling": {"type": "linear", "factor": "x"}}, "config.json")


def test_scaled_rates_by_hand():
    plain = inverse_frequencies(4, 10000, {}, 10)
    assert plain == pytest.approx([1.0, 0.1, 0.01, 0.001])
    linear = dict(config_scaling({"rope_scaling": {"type": "linear", "factor": 4.0}}, "c")[0])
    assert inverse_frequencies(4, 10000, linear, 10) == pytest.approx([0.25, 0.025, 0.0025, 0.00025])
    dynamic = {"scaling": 3, "factor_q16": 2 << 16, "original": 4}
    assert inverse_frequencies(2, 10000, dynamic, 4) == pytest.approx([1.0, 0.01])  # within the original length
    # past it: base 10000 * (2 * 8 / 4 - 1) ** (2 / 1) = 90000, rates 1 and 90000 ** -0.5
    assert inverse_frequencies(2, 10000, dynamic, 8) == pytest.approx([1.0, 1 / 300])
    # llama3, original 64: wavelengths above 64 (rates below 2 pi / 64) divided by 8, below 16 kept
    l3 = dict(config_scaling({"rope_scaling": LLAMA3}, "c")[0])
    rates = inverse_frequencies(4, 10000, l3, 10)
    assert rates[0] == 1.0 and rates[2:] == pytest.approx([0.01 / 8, 0.001 / 8])
    smooth = (64 / (2 * math.pi / 0.1) - 1) / 3  # wavelength 62.8: the blended band
    assert rates[1] == pytest.approx((1 - smooth) * 0.1 / 8 + smooth * 0.1)


def test_the_units_table_holds_the_scaled_rates():
    scaling = config_scaling({"rope_scaling": LLAMA3}, "c")[0]
    cos, sin = rope_tables(60, 4, 4, 500000, scaling)
    rates = inverse_frequencies(4, 500000, dict(scaling), 64)
    angles = np.arange(60, 64)[:, None] * np.array(rates)[None, :]
    assert np.array_equal(cos, np.round(np.cos(angles) * 2**14))
    assert np.array_equal(sin, np.round(np.sin(angles) * 2**14))
    assert not np.array_equal(cos, rope_tables(60, 4, 4, 500000)[0])


def test_llama3_and_dynamic_rates_equal_transformers():
    pytest.importorskip("transformers", reason="the [torch] extra (scripts/setup.sh installs it)")
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for spec, seen in ((LLAMA3, 100), ({"rope_type": "dynamic", "factor": 2.0}, 200)):
        cfg = LlamaConfig(hidden_size=256, num_attention_heads=2, max_position_embeddings=64,
                          rope_parameters={**spec, "rope_theta": 500000.0})
        want = ROPE_INIT_FUNCTIONS[spec["rope_type"]](cfg, None, seen)[0].double().numpy()
        params = dict(config_scaling({"rope_scaling": spec, "max_position_embeddings": 64}, "c")[0])
        got = inverse_frequencies(64, 500000, params, seen)
        assert np.allclose(got, want, rtol=1e-5), spec["rope_type"]
