"""Every system preset states where its figures come from, and its peak is the one it states."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from accel_dse.pod_files import load_system, system_preset_names

#: Each preset's stated bf16/fp16 peak, TFLOPS, as its comments give it.
PEAKS = {"a100-cluster": 312.0, "h100-cluster": 989.4, "tpu-v3-pod": 123.0, "tpu-v4-pod": 275.0, "tpu-v5e-pod": 197.0,
         "v100-cluster": 125.0}


@pytest.mark.parametrize("name", system_preset_names())
def test_every_preset_names_its_sources_and_marks_its_assumptions(name):
    text = (resources.files("accel_dse") / "systems" / f"{name}.toml").read_text()
    comments = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert re.search(r"Sources?", comments), name
    # the chip, the memory and the links each have a figure in the comments
    for figure in ("TFLOPS", "GB/s", "HBM"):
        assert figure in comments, (name, figure)
    # latencies are not published: the comments say they are assumed
    assert "assum" in comments, name
    assert name in PEAKS, f"{name}: add its stated peak to PEAKS"


@pytest.mark.parametrize("name", sorted(PEAKS))
def test_each_preset_peak_is_the_stated_one(name):
    system, _ = load_system(name)
    assert 2 * system.peak_macs_per_s / 1e12 == pytest.approx(PEAKS[name], rel=0.005)
