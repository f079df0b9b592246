"""A YoWASP tool's first run in each process happens alone (rtl_gen/tools/yowasp.py).

The stand-in tool logs when each run starts and ends; three processes ask for its command twice
each, at once. Without the lock the runs overlap (on a cold YoWASP cache that is the SIGBUS of
two first runs); without the per-process memo each process runs it twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

_FAKE = """\
#!{python}
import os, sys, time
log = os.environ["FAKE_TOOL_LOG"]
with open(log, "a") as f:
    f.write(f"start {{os.getpid()}} {{' '.join(sys.argv[1:])}}\\n")
time.sleep(0.4)
with open(log, "a") as f:
    f.write(f"end {{os.getpid()}}\\n")
"""


def test_first_runs_of_a_yowasp_tool_never_overlap_and_run_once_per_process(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "yowasp-fake-tool"
    tool.write_text(_FAKE.format(python=sys.executable))
    tool.chmod(0o755)
    log = tmp_path / "runs.log"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "YOWASP_CACHE_DIR": str(tmp_path / "cache"),
        "FAKE_TOOL_LOG": str(log),
    }
    code = textwrap.dedent("""
        from rtl_gen.tools.yowasp import tool_command
        first = tool_command("yowasp-fake-tool")
        assert tool_command("yowasp-fake-tool") == first
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, cwd=Path(__file__).resolve().parents[2])
             for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    lines = log.read_text().splitlines()
    kinds = [line.split()[0] for line in lines]
    assert kinds == ["start", "end"] * 3, lines
    pids = [line.split()[1] for line in lines]
    assert pids[0::2] == pids[1::2]  # each run ends before the next one starts
    assert len(set(pids)) == 3
    assert all(line.endswith("--version") for line in lines[0::2])
