"""Limits before the work for what is not a builtin's options: files, traced functions, designs, programs.

A builtin's options are checked before it is traced (``test_hostile_limits.py``). A workload file
(SCALE-Sim CSV, Timeloop YAML, ONNX, StableHLO) or a user's JAX function has no options: its ops
are checked as they are read or traced, before a reference run, a simulation or a compile
allocates anything for them. Before, each case below was read as a legal workload (``workloads
show`` printed it) and left to the commands after it. All cases run in one child under
``prlimit --as`` (2 GB), one in-process CLI call each. So do the generated designs whose Verilog
would be huge: refused before anything is generated. And a transformer block whose one program
cannot fit the 32-bit DRAM address space is found so before compiling (it took minutes).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hostile_testlib import cli_under_prlimit

REPO = Path(__file__).resolve().parents[2]
ELEMENTS_RULE = "beyond the 4,294,967,296 (2**32) a tensor may have in the accelerator's 32-bit DRAM address space"

BIG_FUNCTION = """import jax.numpy as jnp


def f():
    x = jnp.ones((2**20, 2**13), jnp.int8)
    return x @ jnp.ones((2**13, 4), jnp.int8)
"""

BIG_MLIR = """module @jit_f {
  func.func public @main(%arg0: tensor<1048576x8192xi8>, %arg1: tensor<8192x4xi8>) -> (tensor<1048576x4xi32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
        : (tensor<1048576x8192xi8>, tensor<8192x4xi8>) -> tensor<1048576x4xi32>
    return %0 : tensor<1048576x4xi32>
  }
}
"""

BIG_YAML = """problem:
  shape:
    name: CNN-Layer
    dimensions: [C, M, R, S, N, P, Q]
  instance: {C: 64, M: 64, R: 1, S: 1, N: 1, P: 65536, Q: 4096}
"""


def _files(folder: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "workloads"))
    try:
        from onnx_graphs import resnet18
    finally:
        sys.path.pop(0)
    resnet18(folder / "resnet18.onnx")
    (folder / "big.csv").write_text("Layer, M, N, K,\nbig, 1048576, 1, 8192,\n")
    (folder / "many.csv").write_text("Layer, M, N, K,\n" + "".join(f"l{i}, 8, 8, 8,\n" for i in range(300_000)))
    (folder / "big.yaml").write_text(BIG_YAML)
    (folder / "big.mlir").write_text(BIG_MLIR)
    (folder / "bigfn.py").write_text(BIG_FUNCTION)


#: ``(workload, what the one line says)``: each is refused by ``workloads show`` and ``evaluate``.
CASES = [
    ("big.csv", "big.csv: gemm 'big' A = batch * m * k = 8,589,934,592 elements, " + ELEMENTS_RULE),
    ("many.csv", "many.csv holds 300,000 layer rows, beyond the 262,144 (2**18) a workload may have"),
    ("big.yaml", "big.yaml: conv2d 'CNN-Layer' input = n * h * w * c_in = 17,179,869,184 elements, " + ELEMENTS_RULE),
    ("big.mlir", "big.mlir: gemm"),
    ("resnet18.onnx:N=6000", "resnet18.onnx: conv2d"),
    ("bigfn:f", "workload 'bigfn:f': a value of broadcast_in_dim has shape 1,048,576 x 8,192 = 8,589,934,592 "
                "elements, " + ELEMENTS_RULE),
]


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")
def test_files_and_functions_past_a_limit_are_refused_before_the_work(tmp_path):
    _files(tmp_path)
    runs = []
    for spec, _ in CASES:
        runs += [["workloads", "show", spec], ["evaluate", "--design", "edge", "--workload", spec]]
    results = cli_under_prlimit(runs, tmp_path)
    for argv, (code, out, err) in zip(runs, results, strict=True):
        expected = dict(CASES)[argv[-1]]
        lines = err.strip().splitlines()
        assert (code, out, len(lines)) == (2, "", 1), (argv, code, err[-2000:])
        assert lines[0].startswith("accel-dse: error: " + expected), (argv, lines[0])
        assert "elements" in lines[0] or "rows" in lines[0], (argv, lines[0])


def _design(folder: Path, name: str, rows: int, cols: int) -> str:
    text = (REPO / "accel_dse" / "presets" / "tiny.toml").read_text()
    text = text.replace("rows = 4\n", f"rows = {rows}\n").replace("cols = 4\n", f"cols = {cols}\n")
    (folder / name).write_text(text)
    return name


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")
def test_a_design_whose_verilog_would_be_huge_is_refused_before_generation(tmp_path):
    from accel_dse.verilog_size import MAX_VERILOG_BYTES, verilog_bytes
    from accel_spec.config import ArrayConfig

    huge = _design(tmp_path, "huge.toml", 4096, 4096)
    flat = _design(tmp_path, "k1.toml", 1024, 1024)
    runs = [["rtl", "verilog", huge, "-o", "out.v"], ["rtl", "verilog", flat, "--flat"],
            ["export", "--design", huge, "--out", "exp", "--no-synth"],
            ["simulate", "--design", huge, "--workload", "gemm:m=4,k=4,n=4", "--work-dir", "sim"]]
    results = cli_under_prlimit(runs, tmp_path)
    for argv, (code, out, err) in zip(runs, results, strict=True):
        lines = err.strip().splitlines()
        assert (code, out, len(lines)) == (2, "", 1), (argv, code, err[-2000:])
        rows, cols = (1024, 1024) if argv[2] == flat else (4096, 4096)
        assert f"rows = {rows:,} and cols = {cols:,}" in lines[0] and "beyond the 128 MiB" in lines[0], lines[0]
        assert ("flat Verilog" in lines[0]) == (argv[2] == flat), lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["huge.toml", "k1.toml"]  # nothing written
    # The estimate against measured sizes (module docstring): tiny at 16x16, edge-sized designs pass.
    assert verilog_bytes(ArrayConfig(rows=16, cols=16)) == pytest.approx(502_493, rel=0.01)
    assert verilog_bytes(ArrayConfig(rows=256, cols=256)) < MAX_VERILOG_BYTES


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs util-linux prlimit")
def test_a_program_past_the_dram_address_space_is_found_before_compiling(tmp_path):
    import json

    # llama_block:seq=11000 (d 4096, 32 heads, FFN 11008): its GEMMs' outputs by hand, one byte an element:
    # Q, K, V, the context and the two projections back to d: 6 x 11000 x 4096; the scores 32 x 11000 x 11000;
    # gate and up 2 x 11000 x 11008. The compile took 5 min 39 s to say the block could not be built.
    outputs = 6 * 11000 * 4096 + 32 * 11000 * 11000 + 2 * 11000 * 11008
    assert outputs > 2**32
    ((code, out, err),) = cli_under_prlimit(
        [["evaluate", "--design", "edge", "--workload", "llama_block:seq=11000", "--json"]], tmp_path)
    assert code == 0 and "Traceback" not in err, err[-2000:]
    # run op by op, its attention softmax (32 heads x 11000 x 11000 scores, in and out) is one program
    # past the address space too: the design cannot run it, found from the sizes before compiling
    softmax = 2 * 32 * 11000 * 11000
    result = json.loads(out)
    assert result["reason"] == (f"vector op softmax attention/softmax: its operands and output alone take "
                                f"{softmax:,} bytes of DRAM, beyond the 4,294,967,296 (2**32) a program "
                                "addresses (dram_addr is 32 bits)"), result["reason"]
    # and the block as one program: refused from its outputs' sizes, before compiling
    import workloads
    from accel_dse.design_files import load_preset
    from perf_model.compiler.network_figures import network_figures

    reason = network_figures(load_preset("edge"), workloads.resolve("llama_block:seq=11000"))["reason"]
    assert reason == (f"its outputs alone take {outputs:,} bytes of DRAM at 8 bits an element, beyond the "
                      "4,294,967,296 (2**32) a program addresses (dram_addr is 32 bits)"), reason
