"""A build that is not in the cache says what it builds and how long it takes, before it starts
(captured stderr of ``simulate``); a cached build says nothing of the kind."""

from __future__ import annotations

import re

from accel_dse.simulate.runner.eta import build_line, build_seconds


def test_the_estimate_matches_the_toolchain_figures():
    # TOOLCHAIN.md, 2 cores, ccache cold: 16x16 about 75 s, 128x32 about 5 minutes
    assert abs(build_seconds("verilator", 16 * 16) - 75) <= 10
    assert abs(build_seconds("verilator", 128 * 32) - 300) <= 30
    assert build_seconds("icarus", 16) < 10
    assert build_line("verilator", 128, 32).startswith("verilator build of the 128x32 design, not in the cache: "
                                                       "about 5.0 min on 2 cores")


def test_a_build_says_what_it_builds_and_how_long_before_it_starts(run_cli, tmp_path):
    argv = ("simulate", "--design", "tiny", "--workload", "gemm:m=8,k=8,n=8", "--simulator", "icarus",
            "--work-dir", str(tmp_path / "work"))
    code, out, err = run_cli(*argv)
    assert code == 0, out + err
    lines = err.splitlines()
    said = [i for i, line in enumerate(lines)
            if re.fullmatch(r"accel-dse simulate: icarus build of the 4x4 design, not in the cache: about \d+ s "
                            r"on 2 cores", line)]
    took = [i for i, line in enumerate(lines) if "build took" in line]
    assert len(said) == 1 and len(took) == 1 and said[0] < took[0], err
    code, out, err = run_cli(*argv)  # the same build again: reused, nothing to announce
    assert code == 0, out + err
    assert "not in the cache" not in err and "build reused from cache" in err
