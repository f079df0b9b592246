"""Yosys synthesis says which piece it synthesises and the time left, one line per piece not in the
cache (``synth_stats(progress=...)``; ``rtl synth`` prints them to stderr). Yosys itself is replaced
by a stand-in here: the lines, not the figures, are under test (the figures have their own tests)."""

from __future__ import annotations

import re

import pytest

from accel_dse.design_files import load_preset
from rtl_gen.tools import synth


@pytest.fixture
def fake_yosys(monkeypatch):
    calls: list[str] = []

    def synthesiser(build, name):  # noqa: ANN001, ANN202
        def run():  # noqa: ANN202
            calls.append(name)
            return {"cells": 1, "flops": 0, "transistors": 4, "seconds": 0.0}

        return run

    monkeypatch.setattr(synth, "_synthesiser", synthesiser)
    return calls


def test_each_piece_not_in_the_cache_is_announced_with_the_time_left(fake_yosys, tmp_path):
    lines: list[str] = []
    synth.synth_stats(load_preset("tiny"), cache_dir=tmp_path, progress=lines.append)
    assert len(lines) == len(fake_yosys) > 3
    n = len(lines)
    assert re.fullmatch(rf"Yosys: synthesising pe \(piece 1 of {n}; seconds to a minute a piece on 2 cores\)",
                        lines[0])
    assert all(re.fullmatch(rf"Yosys: synthesising \w+ \(piece {i + 1} of {n}; at most about \d+ s left at \d+ s "
                            r"a piece\)", line) for i, line in enumerate(lines[1:], 1)), lines
    again: list[str] = []
    synth.synth_stats(load_preset("tiny"), cache_dir=tmp_path, progress=again.append)
    assert again == []  # all cached: nothing to wait for, nothing said


def test_rtl_synth_prints_the_progress_to_stderr(fake_yosys, run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code, out, err = run_cli("rtl", "synth", "tiny", "--no-cache")
    assert code == 0, out + err
    assert "accel-dse rtl synth: Yosys: synthesising pe (piece 1 of" in err
    assert "Yosys" not in out


def test_rtl_verilog_of_a_big_design_says_how_long_it_takes(run_cli, tmp_path):
    code, out, err = run_cli("rtl", "verilog", "edge", "-o", str(tmp_path / "edge.v"))
    assert code == 0, out + err
    assert re.search(r"generating the Verilog of the 16x16 design: about \d+ s on 2 cores", err), err
    code, out, err = run_cli("rtl", "verilog", "tiny", "-o", str(tmp_path / "tiny.v"))
    assert code == 0 and "generating the Verilog" not in err  # a few seconds: nothing to announce
