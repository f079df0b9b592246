# amaranth: UnusedElaboratable=no
"""Verilog export: determinism, naming, memories without init blocks, Verilator lint, and a
GEMM run on the exported (hierarchical) Verilog under Icarus."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rtl_testlib import iverilog_testbench, lanes_of, ofmap_words, wrap

from accel_dse.design_files import load_preset
from accel_dse.simulate import find_simulator
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError, ExportError
from perf_model import timing
from rtl_gen import (
    LINT_WAIVERS,
    Fault,
    block_rows,
    buffer_layout,
    lint_verilog,
    to_verilog,
    top_name,
    write_verilog,
)

MODULE = re.compile(r"^module\s+(\S+?)\s*\(", re.MULTILINE)


def _variant(preset: str, dataflow: str) -> ArrayConfig:
    return dataclasses.replace(load_preset(preset), dataflow=dataflow)


def test_export_is_deterministic_and_named_from_the_config_hash(tmp_path: Path, uncached_verilog: None) -> None:
    # uncached_verilog: each of the three is its own conversion
    config = load_preset("tiny")
    first = to_verilog(config)
    assert to_verilog(config) == first
    path = write_verilog(config, tmp_path / "out")
    assert path == tmp_path / "out" / f"accel_{config.config_hash}.v"
    assert path.read_text(encoding="utf-8") == first
    modules = MODULE.findall(first)
    assert modules[0] == f"accel_{config.config_hash}"
    # hierarchical: the PE and the row are written once each
    assert modules.count(f"accel_{config.config_hash}_pe") == 1
    assert modules.count(f"accel_{config.config_hash}_row") == 1
    assert len(re.findall(rf"^\s*accel_{config.config_hash}_pe\s+\S+\s*\(", first, re.MULTILINE)) == config.cols
    assert "/work/" not in first and ".py:" not in first  # no source paths


def test_different_designs_and_faults_give_different_modules() -> None:
    tiny = load_preset("tiny")
    other = dataclasses.replace(tiny, dataflow="os")
    fault = Fault(row=1, col=2)
    assert top_name(tiny) != top_name(other)
    assert top_name(tiny, fault) == f"accel_{tiny.config_hash}_f1_2_b0_s1"
    faulty = to_verilog(tiny, fault=fault)
    assert MODULE.findall(faulty)[0] == top_name(tiny, fault)
    assert f"{top_name(tiny, fault)}_pe_fault" in MODULE.findall(faulty)


def test_large_buffers_export_without_initial_contents() -> None:
    # TPU-v1's buffer sizes on a 2x2 array: 12.5 M ifmap words must not become initial lines
    config = ArrayConfig(rows=2, cols=2, ifmap_sram_kib=24576, weight_sram_kib=256, ofmap_sram_kib=4096)
    text = to_verilog(config)
    assert len(text) < 200_000
    # one 8-bit bank per lane, 24 MiB / 2 lanes / 1 byte = 12,582,912 words each
    assert "reg [7:0] ifmap_bank0 [12582911:0];" in text
    assert "reg [7:0] ifmap_bank1 [12582911:0];" in text
    assert not re.search(r"ifmap_bank\d+\[\d+\]\s*=", text)


def test_buffer_too_small_for_one_word_names_the_field() -> None:
    config = ArrayConfig(rows=4096, cols=4096, ofmap_sram_kib=8)
    with pytest.raises(ConfigError, match=r"ofmap_sram_kib .*4096 x 32-bit word.*not 8"):
        to_verilog(config)


def test_write_verilog_into_a_file_path_is_an_export_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ExportError, match="cannot write Verilog"):
        write_verilog(load_preset("tiny"), blocker)


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("preset", ["tiny", "edge"])
def test_exported_verilog_is_lint_clean(tmp_path: Path, preset: str, dataflow: str) -> None:
    config = _variant(preset, dataflow)
    path = write_verilog(config, tmp_path)
    assert lint_verilog(path, top_name(config)) == []


@pytest.mark.parametrize(("dataflow", "vector_unit"), [("ws", False), ("os", False), ("is", False), ("ws", True)])
def test_the_soc_verilog_is_lint_clean(tmp_path: Path, dataflow: str, vector_unit: bool) -> None:
    from rtl_gen import system_name, system_verilog

    config = dataclasses.replace(_variant("tiny", dataflow), vector_unit=vector_unit)
    path = tmp_path / "soc.v"
    path.write_text(system_verilog(config))
    assert lint_verilog(path, system_name(config)) == []


def test_lint_catches_a_real_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.v"
    path.write_text("module bad(input clk, input a, output reg y);\n  always @(posedge clk) y = a;\nendmodule\n")
    found = lint_verilog(path, "bad")
    assert any("BLKSEQ" in line for line in found)
    assert "BLKSEQ" not in LINT_WAIVERS


def _icarus() -> tuple[str, str]:
    """``(iverilog, vvp)`` found as ``accel-dse simulate`` finds them. scripts/setup.sh installs
    Icarus, so a missing one fails the test (SimulationError naming the install command), as in
    the simulate tests: these are the only runs of the exported one-word and tall-array Verilog."""
    iverilog = find_simulator("icarus").executable
    vvp = Path(iverilog).with_name("vvp")
    return iverilog, str(vvp) if vvp.exists() else "vvp"


def _iverilog_run(tmp_path: Path, config: ArrayConfig, a: np.ndarray, b: np.ndarray,
                  fault: Fault | None = None) -> tuple[int, int, np.ndarray]:
    top = top_name(config, fault)
    design = tmp_path / f"{top}.v"
    if not design.exists():
        write_verilog(config, tmp_path, fault=fault)
    (tmp_path / "tb.v").write_text(iverilog_testbench(config, top, a, b), encoding="utf-8")
    iverilog, vvp = _icarus()
    subprocess.run([iverilog, "-g2012", "-o", "sim.vvp", "tb.v", design.name], cwd=tmp_path,
                   check=True, capture_output=True, text=True)
    out = subprocess.run([vvp, "-n", "sim.vvp"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    ticks, cycles = map(int, re.search(r"CYCLES (\d+) (\d+)", out).groups())  # type: ignore[union-attr]
    words = [int(w, 16) for w in re.findall(r"WORD ([0-9a-fA-F]+)", out)]
    m, n = a.shape[0], b.shape[1]
    assert len(words) == ofmap_words(config, m, n)
    c = config.cols
    result = np.zeros((m, n), dtype=np.int64)
    for idx, word in enumerate(words):
        lanes = lanes_of(word, c, config.acc_bits)
        fold, pos = divmod(idx, n if config.dataflow.value == "is" else m)
        for lane, value in enumerate(lanes):
            col = fold * c + lane
            if config.dataflow.value == "is":
                if col < m:
                    result[col, pos] = value
            elif col < n:
                result[pos, col] = value
    return ticks, cycles, result


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_exported_verilog_computes_a_tiled_gemm_under_icarus(tmp_path: Path, dataflow: str) -> None:
    config = dataclasses.replace(load_preset("tiny"), dataflow=dataflow)
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (6, 7))
    b = rng.integers(-128, 128, (7, 5))
    a[0, :] = -128
    b[:, 0] = -128
    ticks, cycles, c = _iverilog_run(tmp_path, config, a, b)
    np.testing.assert_array_equal(c, wrap(a @ b, 32))
    want = int(timing.run_cycles(timing.dataflow_code(dataflow), 4, 4, 6, 7, 5, config.shadow_stationary))
    assert ticks == cycles == want
    if dataflow == "ws":
        (tmp_path / "f").mkdir()
        _, _, c_bad = _iverilog_run(tmp_path / "f", config, np.full((6, 7), 3), np.full((7, 5), 2),
                                    fault=Fault(row=2, col=1))
        assert not np.array_equal(c_bad, np.full((6, 5), 42))


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_a_one_word_ofmap_buffer_works(tmp_path: Path, dataflow: str) -> None:
    # 65 lanes x 64 bits = 520 bytes: a 1 KiB ofmap holds one word (built as two, the
    # address needs a bit); run on the exported Verilog under Icarus.
    config = ArrayConfig(rows=1, cols=65, dataflow=dataflow, acc_bits=64, ifmap_sram_kib=1,
                         weight_sram_kib=1, ofmap_sram_kib=1)
    assert buffer_layout(config).ofmap.depth == 1
    assert lint_verilog(write_verilog(config, tmp_path), top_name(config)) == []
    m, k, n = (1, 2, 65) if dataflow != "is" else (65, 2, 1)
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (m, k))
    b = rng.integers(-128, 128, (k, n))
    ticks, cycles, c = _iverilog_run(tmp_path, config, a, b)
    np.testing.assert_array_equal(c, a @ b)
    code = timing.dataflow_code(dataflow)
    assert ticks == cycles == int(timing.run_cycles(code, 1, 65, m, k, n, config.shadow_stationary))


@pytest.mark.parametrize("dataflow", ["ws", "os"])
def test_tall_arrays_export_with_a_block_level(tmp_path: Path, dataflow: str) -> None:
    config = ArrayConfig(rows=36, cols=2, dataflow=dataflow, ifmap_sram_kib=4, weight_sram_kib=1, ofmap_sram_kib=1)
    assert block_rows(36) == 6
    fault = Fault(row=20, col=1, bit=0, stuck=1)
    text = to_verilog(config, fault=fault)
    top = top_name(config, fault)
    modules = MODULE.findall(text)
    for suffix in ("_block", "_block_fault", "_row", "_row_fault", "_pe", "_pe_fault"):
        assert modules.count(top + suffix) == 1, suffix
    # the top's array holds 6 blocks, one of them the faulty one
    assert len(re.findall(rf"^\s*{top}_block(_fault)?\s+block_\d+\s*\(", text, re.MULTILINE)) == 6
    assert len(re.findall(rf"^\s*{top}_block_fault\s+block_3\s*\(", text, re.MULTILINE)) == 1
    assert len(re.findall(rf"^\s*{top}_row_fault\s+row_2\s*\(", text, re.MULTILINE)) == 1
    path = write_verilog(config, tmp_path / "good")
    assert lint_verilog(path, top_name(config)) == []
    # the faulty PE (row 20) must hold data: WS maps K on the rows, OS maps M
    m, k, n = (3, 40, 3) if dataflow == "ws" else (24, 5, 3)
    rng = np.random.default_rng(36)
    a = rng.integers(-128, 128, (m, k))
    b = rng.integers(-128, 128, (k, n))
    ticks, cycles, c = _iverilog_run(tmp_path / "good", config, a, b)
    np.testing.assert_array_equal(c, a @ b)
    code = timing.dataflow_code(dataflow)
    assert ticks == cycles == int(timing.run_cycles(code, 36, 2, m, k, n, config.shadow_stationary))
    ones_a, ones_b = np.full((m, k), 3), np.full((k, n), 2)  # products 6: bit 0 clear
    (tmp_path / "bad").mkdir()
    # the faulty design's Verilog is the text checked above (write_verilog writes to_verilog's text,
    # see test_export_is_deterministic_and_named_from_the_config_hash): not converted a second time
    (tmp_path / "bad" / f"{top}.v").write_text(text, encoding="utf-8")
    _, _, c_bad = _iverilog_run(tmp_path / "bad", config, ones_a, ones_b, fault=fault)
    assert not np.array_equal(c_bad, ones_a @ ones_b)
