"""``simulate --waves`` and the exported runner's ``--waves``: a readable trace holding the array's
signals, its path printed; no trace without the flag (Icarus: FST, read here with a small reader)."""

from __future__ import annotations

import gzip
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

#: FST block types (the format of GTKWave's fstapi): header, hierarchy (gzip).
FST_HEADER, FST_HIERARCHY = 0, 4


def fst_names(path: Path) -> set[str]:
    """Scope and signal names of an FST file's (gzip) hierarchy block; fails on anything else."""
    data = path.read_bytes()
    assert data and data[0] == FST_HEADER, "not an FST file (no header block first)"
    pos, names = 0, None
    while pos < len(data):
        kind = data[pos]
        length = struct.unpack(">Q", data[pos + 1:pos + 9])[0]
        if kind == FST_HIERARCHY:
            expected = struct.unpack(">Q", data[pos + 9:pos + 17])[0]
            body = gzip.decompress(data[pos + 17:pos + 1 + length])
            assert len(body) == expected
            names = {n.decode() for n in re.findall(rb"\x00([A-Za-z_][\w$.]*)", body)}
        pos += 1 + length
    assert pos == len(data), "blocks do not add up to the file"
    assert names is not None, "no hierarchy block"
    return names


def _simulate(run_cli, sim_cache, *extra):
    return run_cli("simulate", "--design", "tiny", "--workload", "gemm:m=8,k=8,n=8", "--simulator", "icarus",
                   "--work-dir", str(sim_cache), *extra)


def test_waves_writes_a_trace_with_the_arrays_signals_and_prints_its_path(run_cli, sim_cache):
    code, out, err = _simulate(run_cli, sim_cache, "--waves")
    assert code == 0, out + err
    line = next(line for line in out.splitlines() if line.startswith("waves: "))
    trace = Path(line.removeprefix("waves: "))
    assert trace.suffix == ".fst" and trace.parent == Path(
        next(line for line in out.splitlines() if line.startswith("run directory: ")).removeprefix("run directory: "))
    names = fst_names(trace)
    assert "array" in names and {"pe_0", "pe_1", "pe_2", "pe_3"} <= names  # tiny: a 4x4 array
    assert "clk" in names


def test_no_trace_without_waves(run_cli, sim_cache):
    code, out, err = _simulate(run_cli, sim_cache)
    assert code == 0, out + err
    assert "waves:" not in out
    run_dir = Path(next(line for line in out.splitlines() if line.startswith("run directory: "))
                   .removeprefix("run directory: "))
    assert not list(run_dir.glob("*.fst")) and not list(run_dir.glob("*.vcd"))


def test_the_exported_runner_writes_a_trace_with_waves(tmp_path):
    from accel_dse.design_files import load_preset
    from accel_dse.export import export_design

    out = tmp_path / "tiny"
    export_design(load_preset("tiny"), out, synth=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    proc = subprocess.run([sys.executable, "run.py", "--simulator", "icarus", "--target", "core", "--waves"],
                          cwd=out, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trace = out / "sim_build" / "icarus" / "waves.fst"
    assert f"[icarus] waves: {trace}" in proc.stdout
    names = fst_names(trace)
    assert "array" in names and {"pe_0", "pe_3"} <= names


def test_the_reader_refuses_what_is_not_fst(tmp_path):
    bogus = tmp_path / "x.fst"
    bogus.write_bytes(b"$date\n today\n$end\n")
    with pytest.raises(AssertionError):
        fst_names(bogus)
