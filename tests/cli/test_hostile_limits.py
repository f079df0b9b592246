"""Third hostile round: legal but huge workloads cost bounded memory; options past a limit are refused first.

Each command runs in a child under ``prlimit --as`` (2 GB of address space; the refusals share one
child): a refusal must come before the work (tracing, allocating), and an answer must not need more.
Before, these ended in a ``MemoryError`` after tracing, an ``_ArrayMemoryError`` traceback from the accuracy metric, or
minutes of work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.accuracy import MAX_DEPTH, workload_sqnr_db
from workloads.ops import Gemm, Workload

REPO = Path(__file__).resolve().parents[2]
#: Address space each command may use, bytes.
MEMORY = 2 * 10**9

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(["prlimit", f"--as={MEMORY}", sys.executable, "-m", "accel_dse", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


#: Runs each ``argv`` of ``sys.argv[1]`` (a JSON list) through the CLI's ``main`` in turn, in this one
#: process, and prints ``[[exit code, stdout, stderr], ...]`` as JSON; anything ``main`` lets through
#: (a traceback) lands in that command's stderr. A refusal allocates next to nothing, so the commands
#: share the address-space limit without changing what each may use.
_DRIVER = """
import contextlib, io, json, sys, traceback
from accel_dse.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except BaseException:
            traceback.print_exc()
            code = None
    results.append([code, out.getvalue(), err.getvalue()])
sys.__stdout__.write(json.dumps(results))
"""


def _run_each(commands: list[tuple[str, ...]], cwd: Path) -> dict[tuple[str, ...], tuple[int, str, str]]:
    """Exit code, stdout and stderr of each command, all run in one child under the address-space limit
    (the start-up of a child, about 2 s of CPU, paid once, not once per command)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(["prlimit", f"--as={MEMORY}", sys.executable, "-c", _DRIVER, json.dumps(commands)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr[-2000:]
    return {tuple(argv): tuple(result) for argv, result in zip(commands, json.loads(proc.stdout), strict=True)}


HUGE = [
    ("bert_base:seq=2147483647", "seq=2,147,483,647", "multiply-accumulates"),
    ("llama_decode:kv=2147483647", "kv=2,147,483,647", "attention scores"),
    ("resnet18:classes=2147483647", "classes=2,147,483,647", "output channels"),
    ("resnet18:res=2147483647", "res=2,147,483,647", "multiply-accumulates"),
    ("llama_block:seq=1000000000", "seq=1,000,000,000", "multiply-accumulates"),
    ("bert_base:seq=1000000000", "seq=1,000,000,000", "multiply-accumulates"),
    ("llama_block:seq=100000", "seq=100,000", "attention scores"),
    ("bert_base:seq=100000", "seq=100,000", "attention scores"),
    ("mlp:d_in=100000000", "d_in=100,000,000", "elements"),
    ("dlrm_mlp:dense=100000000", "dense=100,000,000", "elements"),
    ("gemm:m=1,k=1,n=16777216,requant=1", "n=16,777,216", "output channels"),
]


def _simulate_huge(work_dir: Path) -> tuple[str, ...]:
    return ("simulate", "--design", "tiny-vector", "--workload", "bert_base:seq=100000", "--max-ops", "1",
            "--simulator", "icarus", "--work-dir", str(work_dir))


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> tuple[Path, dict[tuple[str, ...], tuple[int, str, str]]]:
    """The refused commands of this module, run once in one child: ``(its folder, results by argv)``."""
    folder = tmp_path_factory.mktemp("refusals")
    commands = [("workloads", "show", spec) for spec, _, _ in HUGE] + [_simulate_huge(folder / "w")]
    return folder, _run_each(commands, folder)


@pytest.mark.parametrize("spec, option, what", HUGE)
def test_huge_options_are_refused_before_tracing(refusals, spec, option, what):
    code, out, err = refusals[1][("workloads", "show", spec)]
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and not out, err[-2000:]
    line = lines[0]
    assert line.startswith("accel-dse: error: ") and "tracing" not in line and "MemoryError" not in line, line
    assert option in line and what in line and "beyond the" in line, line


def test_simulate_refuses_a_huge_workload_before_preparing_it(refusals):
    folder, results = refusals
    code, _, err = results[_simulate_huge(folder / "w")]
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert "bert_base options seq=100,000" in lines[0] and "attention scores" in lines[0], lines[0]


def _edge_with_acc_bits(folder: Path, bits: int) -> str:
    """``edge`` as a design file with a ``bits``-bit accumulator (a million-term sum of int8 products
    needs 35, a hundred-million-term one 42)."""
    from accel_dse.design_files import load_design

    lines = ["[design]"]
    for key, value in load_design("edge").to_dict().items():
        value = bits if key == "acc_bits" else value
        lines.append(f"{key} = " + ("true" if value is True else "false" if value is False
                                      else f'"{value}"' if isinstance(value, str) else repr(value)))
    path = folder / "edge48.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("spec", ["llama_decode:kv=1000000", "gemm:m=1,k=100000000,n=1"])
def test_a_long_reduction_gets_a_bounded_answer(tmp_path, spec):
    """A realistic long context: bounded memory (under the address-space limit) and an answer, on a
    design whose accumulator holds the sums (``edge``'s 32 bits cannot: that is refused in one line)."""
    proc = _run("evaluate", "--design", _edge_with_acc_bits(tmp_path, 48), "--workload", spec, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sqnr = json.loads(proc.stdout)["accuracy"]["sqnr_db"]
    assert 20 < sqnr < 60, sqnr  # int8 x int8 on unit-size data: tens of dB, as at any depth


def test_a_long_context_on_a_narrow_accumulator_is_one_line(tmp_path):
    """``edge``'s 32-bit accumulator cannot hold a million-term sum: one line, exit 2, under the limit."""
    proc = _run("evaluate", "--design", "edge", "--workload", "llama_decode:kv=1000000", cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and not proc.stdout, proc.stderr[-2000:]
    assert "acc_bits = 32" in lines[0] and "35" in lines[0], lines[0]


def test_the_sampled_reduction_scores_a_deep_product_as_one_at_the_budget():
    """Past MAX_DEPTH the reduction is sampled: a deeper op scores as an op at the budget depth (the
    same per-term error; only the draw differs), and any depth costs the same bounded draw."""
    def sqnr(k: int) -> float:
        return workload_sqnr_db(Workload(name="w", ops=(Gemm(m=64, k=k, n=256),), counts=(1,)), "int8", "int8")

    at_budget, deep, deepest = sqnr(MAX_DEPTH), sqnr(100_000_000), sqnr(2**31 - 1)
    assert abs(deep - at_budget) < 1.0 and abs(deepest - at_budget) < 1.0, (at_budget, deep, deepest)
