# amaranth: UnusedElaboratable=no
"""``accel-dse rtl verilog`` and ``accel-dse rtl synth``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import rtl_gen.tools.synth as synth_mod
from accel_dse.design_files import load_preset


def test_verilog_to_a_file_and_to_stdout(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    top = f"accel_{load_preset('tiny').config_hash}"
    out = tmp_path / "sub" / "tiny.v"
    out.parent.mkdir()  # -o never creates directories
    code, stdout, stderr = run_cli("rtl", "verilog", "tiny", "-o", str(out))
    assert (code, stdout, stderr) == (0, "", "")
    text = out.read_text(encoding="utf-8")
    assert f"\nmodule {top}(" in text
    code, stdout, _ = run_cli("rtl", "verilog", "tiny")
    assert code == 0
    assert stdout == text


def test_design_the_rtl_cannot_build_exits_2_naming_the_field(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    design = tmp_path / "d.toml"
    design.write_text("[design]\nrows = 4\ncols = 2048\nweight_sram_kib = 1\nofmap_sram_kib = 64\n")
    code, stdout, stderr = run_cli("rtl", "verilog", str(design))
    assert code == 2
    assert stdout == ""
    assert stderr.count("\n") == 1
    assert "weight_sram_kib must hold at least one 2048 x 8-bit word" in stderr


def test_unwritable_output_exits_2(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, stderr = run_cli("rtl", "verilog", "tiny", "-o", str(blocker / "x.v"))
    assert code == 2
    assert "of -o" in stderr and "is a file, not a directory" in stderr
    code, _, stderr = run_cli("rtl", "verilog", "tiny", "-o", "/proc/x.v")  # a directory no one can write into
    assert code == 2
    assert "cannot write Verilog to '/proc/x.v'" in stderr


def test_synth_json_and_table(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    def fake(component: Any, name: str, **_: Any) -> dict[str, Any]:
        return {"cells": 3, "flops": 1, "transistors": 20, "seconds": 0.0}

    monkeypatch.setattr(synth_mod, "synth_component", fake)
    monkeypatch.setenv("ACCEL_DSE_CACHE_DIR", str(tmp_path))
    code, stdout, _ = run_cli("rtl", "synth", "tiny", "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["top"] == f"accel_{load_preset('tiny').config_hash}"
    assert data["parts"]["pe"]["count"] + data["parts"]["pe_top_row"]["count"] == 16
    assert data["total"]["transistors"] == 20 * sum(p["count"] for p in data["parts"].values())
    assert list((tmp_path / "synth").glob("pe-*.json"))
    code, stdout, _ = run_cli("rtl", "synth", "tiny")
    assert code == 0
    assert "total" in stdout and "pe" in stdout
