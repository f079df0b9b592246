"""`accel-dse design ...`: presets, design files and every bad input of the Foundation issue."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accel_dse.design_files import load_design, preset_names
from accel_spec.config import ArrayConfig, Dataflow
from tests.cli_testlib import one_line_error

GOOD = """\
[design]
rows = 8
cols = 4
dataflow = "os"
"""


def _write(tmp_path, text, name="d.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_presets_listed_and_loadable(run_cli):
    assert {"tiny", "edge", "tpu-v1"} <= set(preset_names())
    code, out, err = run_cli("design", "presets")
    assert code == 0 and err == ""
    for name in ("tiny", "edge", "tpu-v1"):
        assert name in out
    # every preset names its DRAM part, and the table shows it
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert " dram " in out.splitlines()[0]
    assert "ddr3-2133-2x64" in rows["tpu-v1"] and "lpddr5-x32" in rows["tiny"]


def test_tiny_vector_is_tiny_with_the_vector_unit():
    """The smallest design that runs whole networks from one program: tiny, plus the unit (4 lanes)."""
    import dataclasses

    tiny, vec = load_design("tiny"), load_design("tiny-vector")
    assert not tiny.vector_unit and vec.vector_lanes == 4
    assert vec == dataclasses.replace(tiny, vector_unit=True)


def test_tpu_v1_preset_matches_the_paper(run_cli):
    code, out, _ = run_cli("design", "check", "tpu-v1", "--json")
    assert code == 0
    data = json.loads(out)
    d = data["design"]
    # Jouppi et al. 2017: 256x256 MACs, 8-bit, 700 MHz, 24 MiB unified buffer, 34 GB/s.
    assert (d["rows"], d["cols"], d["input_bits"], d["clock_mhz"]) == (256, 256, 8, 700.0)
    assert d["dataflow"] == "ws"
    assert d["ifmap_sram_kib"] == 24 * 1024
    assert abs(d["dram_bytes_per_cycle"] * d["clock_mhz"] * 1e6 - 34e9) / 34e9 < 0.01
    assert data["config_hash"] == ArrayConfig.from_dict(d).config_hash
    tiny = load_design("tiny")
    edge = load_design("edge")
    assert (tiny.rows, tiny.cols, edge.rows, edge.cols) == (4, 4, 16, 16)


def test_check_file_prints_normalised_design(run_cli, tmp_path):
    path = _write(tmp_path, GOOD)
    code, out, err = run_cli("design", "check", str(path))
    assert code == 0, err
    assert 'dataflow = "os"' in out
    assert "input_bits = 8" in out  # defaults are filled in
    config = load_design(path)
    assert config == ArrayConfig(rows=8, cols=4, dataflow=Dataflow.OS)


def test_version_and_help(run_cli):
    code, out, _ = run_cli("--version")
    assert code == 0 and out.startswith("accel-dse ")
    code, out, _ = run_cli("--help")
    assert code == 0 and "design" in out


BAD_DESIGNS = {
    "rows_zero": ("rows = 0\ncols = 4", "rows must be a positive integer, not 0"),
    "rows_negative": ("rows = -4\ncols = 4", "rows must be a positive integer, not -4"),
    "rows_fraction": ("rows = 12.5\ncols = 4", "rows must be a positive integer, not 12.5"),
    "rows_text": ('rows = "abc"\ncols = 4', "rows must be a positive integer, not 'abc'"),
    "rows_bool": ("rows = true\ncols = 4", "rows must be a positive integer, not True"),
    "cols_zero": ("rows = 4\ncols = 0", "cols must be a positive integer, not 0"),
    "dataflow_rs": ('rows = 4\ncols = 4\ndataflow = "rs"', "dataflow must be one of ws, os, is, not 'rs'"),
    "dataflow_space": ('rows = 4\ncols = 4\ndataflow = "ws "', "dataflow must be one of ws, os, is, not 'ws '"),
    "unknown_key": ("rows = 4\ncols = 4\ncolz = 4", "unknown key 'colz'"),
    "sram_zero": ("rows = 4\ncols = 4\nifmap_sram_kib = 0", "ifmap_sram_kib must be a positive integer, not 0"),
    "input_bits_7": ("rows = 4\ncols = 4\ninput_bits = 7", "input_bits must be 8 or 16, not 7"),
}


@pytest.mark.parametrize("case", sorted(BAD_DESIGNS))
def test_bad_design_values(run_cli, tmp_path, case):
    body, expected = BAD_DESIGNS[case]
    path = _write(tmp_path, "[design]\n" + body + "\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run_cli("design", "check", str(path))
    assert out == ""
    assert expected in one_line_error(code, out, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_unknown_key_suggests_the_field(run_cli, tmp_path):
    path = _write(tmp_path, "[design]\nrowz = 4\ncols = 4\n")
    _, _, err = run_cli("design", "check", str(path))
    assert "did you mean 'rows'?" in err


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "is empty"),
        ("   \n\n", "is empty"),
        ("[design]\nrows = = 4\n", "is not valid TOML"),
        ("[design]\nrows = 4\ncols = 4\n[design]\nrows = 8\n", "is not valid TOML"),
        ("[other]\nrows = 4\n", "unknown top-level key 'other'\nhas no [design] table"),
        ("rows = 4\n", "unknown top-level key 'rows'\nhas no [design] table"),
        ("[design]\ncols = 4\n", "missing required key 'rows'"),
    ],
    ids=["empty", "blank", "malformed", "duplicate_table", "wrong_table", "no_table", "missing_rows"],
)
def test_bad_files(run_cli, tmp_path, text, expected):
    """One error line per problem the file holds (a file with no [design] table has two)."""
    path = _write(tmp_path, text)
    code, out, err = run_cli("design", "check", str(path))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == len(expected.splitlines())
    for line, part in zip(lines, expected.splitlines(), strict=True):
        assert line.startswith("accel-dse: error: ") and part in line


def test_a_design_file_with_three_mistakes_names_all_three(run_cli, tmp_path):
    """Fixing one mistake must not reveal the next: every problem of one pass, one line each, exit 2."""
    path = _write(tmp_path, '[design]\nrows = 0\ncols = 4\ndataflow = "rs"\nclock_mhz = -1\n')
    code, out, err = run_cli("design", "check", str(path))
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [
        f"accel-dse: error: design file {str(path)!r}: rows must be a positive integer, not 0",
        f"accel-dse: error: design file {str(path)!r}: dataflow must be one of ws, os, is, not 'rs'",
        f"accel-dse: error: design file {str(path)!r}: clock_mhz must be a positive finite number, not -1",
    ]


def test_unknown_and_missing_keys_and_bad_values_together(run_cli, tmp_path):
    path = _write(tmp_path, "[design]\nrowz = 4\ncols = 0\ninput_bits = 7\n[extra]\n")
    code, _, err = run_cli("design", "check", str(path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 5, err
    for part in ("unknown top-level key 'extra'", "unknown key 'rowz'", "missing required key 'rows'",
                 "cols must be a positive integer, not 0", "input_bits must be 8 or 16, not 7"):
        assert sum(part in line for line in lines) == 1, part


def test_several_errors_as_json_are_one_object(run_cli, tmp_path):
    path = _write(tmp_path, "[design]\nrows = 0\ncols = 0\n")
    code, _, err = run_cli("design", "check", str(path), "--json")
    payload = json.loads(err)
    assert code == 2 and payload["kind"] == "config"
    assert "rows must be a positive integer, not 0" in payload["error"]
    assert "cols must be a positive integer, not 0" in payload["error"]


def test_malformed_toml_names_line_and_column(run_cli, tmp_path):
    path = _write(tmp_path, "[design]\nrows = 4\ncols = = 4\n")
    _, _, err = run_cli("design", "check", str(path))
    assert "line 3" in err and "column" in err


def test_duplicate_table_is_reported(run_cli, tmp_path):
    path = _write(tmp_path, "[design]\nrows = 4\ncols = 4\n[design]\nrows = 8\n")
    _, _, err = run_cli("design", "check", str(path))
    assert "design" in err and "line 4" in err


def test_missing_file_and_unknown_preset(run_cli, tmp_path):
    code, _, err = run_cli("design", "check", str(tmp_path / "nope.toml"))
    assert code == 2 and "not found" in err and "nope.toml" in err
    code, _, err = run_cli("design", "check", "nosuchpreset")
    assert code == 2
    assert "neither a design file nor a preset" in err and "tpu-v1" in err


def test_directory_is_not_a_design(run_cli, tmp_path):
    code, _, err = run_cli("design", "check", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_subprocess_exit_code_and_no_traceback(tmp_path, cli_env):
    path = _write(tmp_path, "[design]\nrows = 0\ncols = 4\n")
    proc = subprocess.run(
        [sys.executable, "-m", "accel_dse", "design", "check", str(path)],
        capture_output=True, text=True, env=cli_env, check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"accel-dse: error: design file {str(path)!r}: rows must be a positive integer, not 0"
    ]
    debug = subprocess.run(
        [sys.executable, "-m", "accel_dse", "--debug", "design", "check", str(path)],
        capture_output=True, text=True, env=cli_env, check=False,
    )
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_usage_error_exits_2(run_cli):
    code, _, err = run_cli("design", "frobnicate")
    assert code == 2 and "invalid choice" in err
