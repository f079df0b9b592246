"""SIGTERM and SIGINT end a command at once with 130, also inside a JAX trace and a long evaluate.

The signal used to raise ``KeyboardInterrupt`` in the handler; raised inside JAX's garbage
collection callback it was printed as "Exception ignored" and lost (a command ran on for 20 s
and more). The bound below is the 2 s of the rule plus slack for a loaded machine; it bounds a
hang, it does not time anything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The rule's 2 s, plus slack for a machine whose cores other jobs share.
BOUND_S = 2.0 + 4.0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _jax_loaded(pid: int) -> bool:
    try:
        return "jaxlib" in Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:
        return False


def _stop_while_running(argv: list[str], sig: int, tmp_path: Path, settle_s: float) -> tuple[int, str]:
    """Start ``accel-dse argv``; once JAX is loaded and ``settle_s`` more passed, send ``sig``; its (code, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "accel_dse", *argv], env=_env(), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(1200):
            if _jax_loaded(proc.pid) or proc.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(settle_s)
        assert proc.poll() is None, f"{argv} ended before the signal: {proc.stderr.read() if proc.stderr else ''}"
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{argv}: still running {BOUND_S} s after {signal.Signals(sig).name}")
        return proc.returncode, err
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see JAX loaded")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_jax_trace_ends_the_command(tmp_path, sig):
    code, err = _stop_while_running(["workloads", "show", "llama_block:seq=100000"], sig, tmp_path, settle_s=3.0)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == "accel-dse: interrupted", err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see JAX loaded")
def test_sigterm_during_a_long_evaluate_ends_it(tmp_path):
    # llama_block:seq=8192 on edge takes minutes (trace, one-program compile, walk): surely still running.
    code, err = _stop_while_running(["evaluate", "--design", "edge", "--workload", "llama_block:seq=8192", "--json"],
                                    signal.SIGTERM, tmp_path, settle_s=8.0)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == '{"error": "interrupted", "kind": "interrupted"}', err
    assert "Exception ignored" not in err and "Traceback" not in err, err


def test_a_stop_removes_the_registered_half_written_outputs(tmp_path):
    """The watcher's clean-up: a registered temporary file and directory go, others stay."""
    from accel_dse.exit_cleanup import clean_up_for_stop, removed_if_stopped

    part, folder, kept = tmp_path / ".x.part", tmp_path / ".d.tmp-1", tmp_path / "kept"
    part.write_text("half")
    folder.mkdir()
    (folder / "a").write_text("half")
    kept.write_text("mine")
    with removed_if_stopped(part), removed_if_stopped(folder):
        clean_up_for_stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    with removed_if_stopped(kept):
        pass
    clean_up_for_stop()  # registered no more: left alone
    assert kept.read_text() == "mine"
