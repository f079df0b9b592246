"""Seeded fuzzing of every input format through the commands that read it.

Each format's example input (ONNX, StableHLO text, SCALE-Sim CSV, Timeloop YAML, design TOML
also with the newer fields, space TOML, system TOML, pod space TOML) and its known-hostile
inputs (:data:`HOSTILE`: issue 24's and issue 48's cases) are run, then mutated :data:`CASES`
times with a fixed seed (byte flips, cut and repeated spans, deep brackets, control characters,
huge, negative, full-width and underscored numbers, YAML aliases; for ONNX also edits of the
graph: dims, names, op types). Every command that
takes the input must then: exit 0 or 2; on exit 2 print exactly one line (no traceback); print
at most :func:`_bound` bytes; and write nothing outside its own target directory where the test
watches: the input's folder, the working directory, ``HOME`` and the temporary folder (the last two
fresh folders of the test's, through ``HOME``, ``XDG_*_HOME``, ``TMPDIR`` and ``tempfile.tempdir``),
snapshotted before and after every case. Commands run in-process (``run_cli``): a native crash
would take the test run down with it.
"""

from __future__ import annotations

import random
import re
import tempfile
from pathlib import Path

import pytest
from hostile_testlib import ERROR_PREFIX, snapshot

SEED = 24
CASES = 24

CSV = "layer, M, N, K\nfc1, 64, 32, 128\nfc2, 16, 64, 32\n"
CONV_CSV = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
            "conv1, 32, 32, 3, 3, 3, 16, 1,\nDP_conv2, 30, 30, 3, 3, 16, 1, 1,\n")
YAML = ("problem:\n  shape:\n    name: CNN-Layer\n    dimensions: [C, M, R, S, N, P, Q]\n"
        "  instance: {C: 16, M: 32, R: 3, S: 3, N: 1, P: 14, Q: 14, Hstride: 1, Wstride: 1}\n")
MLIR = """\
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x16xi8>, %arg1: tensor<16x4xi8>) -> (tensor<8x4xi32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
        : (tensor<8x16xi8>, tensor<16x4xi8>) -> tensor<8x4xi32> loc(#loc1)
    %1 = stablehlo.convert %0 : tensor<8x4xi32>
    return %1 : tensor<8x4xi32>
  }
}
#loc1 = loc("fc/dot_general")
"""
REPO = Path(__file__).resolve().parents[2]
DESIGN = (REPO / "accel_dse" / "presets" / "tiny.toml").read_text()
SPACE = (REPO / "accel_dse" / "spaces" / "edge-int8.toml").read_text().replace('spec = "resnet18"',
                                                                               'spec = "gemm:m=64,k=64,n=64"')
#: The newer design fields: a memory part, the checksum column, operand formats with packed int4.
DESIGN_NEW = DESIGN + ('dram = "lpddr5-x32"\nchecksum = "detect"\nweight_format = "int4"\nact_format = "int8"\n'
                       "pack_int4 = true\n")
#: And the vector unit with the checksum column.
DESIGN_VECTOR = DESIGN + 'vector_unit = true\ndram = "lpddr5-x32"\nchecksum = "detect"\n'
#: A system file (accel_dse.pod_files): the chip, a 2 x 2 torus, a split.
SYSTEM = DESIGN + """
[system]
name = "small-pod"
cores = 4
topology = "torus2d"
dims = [2, 2]
wraparound = true
link_gb_per_s = 82.0
link_latency_us = 1.0
hbm_gib = 32.0
pods = 1
dcn_gb_per_s = 3.3
dcn_latency_us = 10.0

[system.split]
dp = 2
tp = 2
"""
#: A pod space: chip, system and split searched together for an LLM job.
POD_SPACE = (REPO / "accel_dse" / "spaces" / "pod-llama70b.toml").read_text()

#: Pieces inserted or swapped in: nesting, control characters, numbers beyond every range,
#: non-ASCII digits, YAML and TOML syntax, invalid UTF-8.
TOKENS = [b"[" * 20000, b"{" * 400, b"(" * 300, b"<" * 300, b"\x1b[31m", b"\n", b"\x00", b"\r", b"\x07",
          b"99999999999999999999", b"9" * 5000, b"-1", b"0", b"1_000", "\uff18".encode(), b"1e309", b"nan",
          b"&a [1, 2]", b"*a", b"'", b'"', b"\xff\xfe", b"x" * 5000, b"[[", b"]]", b"=", b",", b":", b"#"]
NUMBERS = [b"0", b"-7", b"2147483648", b"9223372036854775808", b"99999999999999999999", "\uff18".encode(),
           b"1_0", b"3.5", b"", b"1e3"]


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 3)):
        n = len(data)
        at = rng.randrange(n + 1)
        op = rng.randrange(6)
        if op == 0 and n:
            data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
        elif op == 1 and n:
            data = data[:at] + data[at + rng.randint(1, 40):]
        elif op == 2 and n:
            span = data[at:at + rng.randint(1, 60)]
            data = data[:at] + span * rng.randint(2, 40) + data[at:]
        elif op == 3:
            data = data[:at] + rng.choice(TOKENS) + data[at:]
        elif op == 4:
            numbers = list(re.finditer(rb"\d+", data))
            if numbers:
                m = rng.choice(numbers)
                data = data[:m.start()] + rng.choice(NUMBERS) + data[m.end():]
        else:
            data = data[:at]
    return data


def _mutate_onnx(data: bytes, rng: random.Random) -> bytes:
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(data)
    graph = model.graph
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        node = rng.choice(graph.node)
        if op == 0:
            dim = rng.choice(graph.input[0].type.tensor_type.shape.dim)
            if rng.random() < 0.5:
                dim.dim_value = rng.choice([0, 1, 2**31, 2**62, 2**63 - 1])
            else:
                dim.dim_param = rng.choice(["N", "a\nb\x1b[0m", "z" * 3000, ""])
        elif op == 1:
            node.name = rng.choice(["\x1b]0;pwned\x07", "n" * 10000, "a\nb", ""])
        elif op == 2:
            node.op_type = rng.choice(["Conv", "Einsum", "If", "MatMul", "Gemm", "ConvTranspose", "\x00", "X" * 500])
        elif op == 3:
            node.attribute.append(onnx.helper.make_attribute(rng.choice(["group", "strides", "pads", "auto_pad"]),
                                                             rng.choice([0, -1, [0, 0], [2**40] * 4, "BAD"])))
        elif op == 4 and graph.initializer:
            init = rng.choice(graph.initializer)
            init.dims[rng.randrange(len(init.dims))] = rng.choice([0, -3, 2**40])
        else:
            return _mutate_bytes(model.SerializeToString(), rng)
    return model.SerializeToString()


def _example_onnx() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], [0.0] * 216)
    v = helper.make_tensor("v", TensorProto.FLOAT, [14, 5], [0.0] * 70)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1", strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "v"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "g", [x], [y], [w, v])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def _workload_commands(path: str, target: Path) -> list[tuple[str, ...]]:
    spec = f"{path}:N=2" if path.endswith(".onnx") else path
    commands = [("workloads", "show", spec), ("workloads", "show", "--json", spec),
                ("evaluate", "--design", "tiny", "--workload", spec)]
    if path.endswith(".onnx"):
        commands.append(("workloads", "show", "--json", f"{path}:N=99999999999999999999"))
    return commands


def _design_commands(path: str, target: Path) -> list[tuple[str, ...]]:
    return [("design", "check", path), ("evaluate", "--design", path, "--workload", "gemm:m=16,k=16,n=16", "--json")]


def _system_commands(path: str, target: Path) -> list[tuple[str, ...]]:
    job = ("--model", "llama7b:layers=2", "--batch", "8", "--seq", "256")
    return [("design", "check", path), ("system", "evaluate", "--system", path, *job, "--json"),
            ("system", "evaluate", "--system", path, *job, "--mode", "serve", "--gen", "8")]


def _space_commands(path: str, target: Path) -> list[tuple[str, ...]]:
    return [("sweep", "--space", path, "--trials", "1", "--sampler", "random", "--quiet", "--out-dir",
             str(target / "run"), "--storage", f"journal:{target / 'study.journal'}")]


def _renamed_onnx() -> bytes:
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(_example_onnx())
    model.graph.node[0].name = "conv\x1b]0;title\x07\n" + "n" * 5000
    return model.SerializeToString()


NESTED = b"[" * 20_000 + b"]" * 20_000
ALIASES = b"".join(b"%c: &%c [%s]\n" % (97 + i, 97 + i, b", ".join([b"*%c" % (96 + i) if i else b"lol"] * 9))
                   for i in range(7))

#: Known-hostile inputs (issue 24's cases) the mutations also start from: nesting that overflowed
#: MLIR's native parser, a YAML alias bomb, malformed Timeloop dimensions, names with escapes.
HOSTILE = {
    "stablehlo": [MLIR.encode().replace(b"mhlo.num_replicas = 1 : i32", b"mhlo.x = " + NESTED)],
    "timeloop": [ALIASES + YAML.encode().replace(b"name: CNN-Layer", b"name: *g"),
                 YAML.encode().replace(b"[C, M, R, S, N, P, Q]", b"7"),
                 YAML.encode().replace(b"[C, M, R, S, N, P, Q]", b"[[C, M], R, S, N, P, Q]")],
    "csv": [CSV.encode().replace(b"fc1", b"fc\x1b[2J\x07" + b"x" * 5000)],
    "onnx": [_renamed_onnx()],
    "design": [DESIGN.replace("rows = 4", "rows = " + "9" * 5000).encode()],  # past Python's int digits
    "design-new": [DESIGN_VECTOR.encode()],
    "system": [SYSTEM.replace("hbm_gib = 32.0", "hbm_gib = 1e308").encode(),
               SYSTEM.replace("dims = [2, 2]", "dims = [2147483647, 2147483647]").encode()],
}

FORMATS = {
    "onnx": ("model.onnx", _example_onnx, _mutate_onnx, _workload_commands),
    "stablehlo": ("model.mlir", lambda: MLIR.encode(), _mutate_bytes, _workload_commands),
    "csv": ("layers.csv", lambda: CSV.encode(), _mutate_bytes, _workload_commands),
    "conv-csv": ("conv.csv", lambda: CONV_CSV.encode(), _mutate_bytes, _workload_commands),
    "timeloop": ("layer.yaml", lambda: YAML.encode(), _mutate_bytes, _workload_commands),
    "design": ("design.toml", lambda: DESIGN.encode(), _mutate_bytes, _design_commands),
    "space": ("space.toml", lambda: SPACE.encode(), _mutate_bytes, _space_commands),
    "design-new": ("design.toml", lambda: DESIGN_NEW.encode(), _mutate_bytes, _design_commands),
    "system": ("system.toml", lambda: SYSTEM.encode(), _mutate_bytes, _system_commands),
    "pod-space": ("space.toml", lambda: POD_SPACE.encode(), _mutate_bytes, _space_commands),
}


def _bound(input_size: int) -> int:
    """Most bytes a command may print for an input of ``input_size`` bytes (no amplification)."""
    return 64 * 1024 + 16 * input_size


def _check(code: int, out: str, err: str, input_size: int, argv: tuple[str, ...]) -> None:
    where = f"{argv}: exit {code}, stderr {err[:300]!r}"
    assert code in (0, 2), where
    assert "Traceback" not in out and "Traceback" not in err, where
    assert len(out.encode()) + len(err.encode()) <= _bound(input_size), where
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        if "--json" in argv:
            assert len(lines) == 1 and lines[0].startswith("{"), where
        else:  # one line per error; only a design file names every problem it holds, each on its own line
            assert len(lines) == 1 or argv[:2] == ("design", "check"), where
            assert lines and all(line.startswith(ERROR_PREFIX) for line in lines), where


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_mutated_inputs_keep_the_bad_input_contract(run_cli, tmp_path, monkeypatch, fmt):
    name, example, mutate, commands = FORMATS[fmt]
    inputs, target, cwd = tmp_path / "inputs", tmp_path / "target", tmp_path / "cwd"
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    for folder in (inputs, target, cwd, home, tmp):
        folder.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(name, str(home / name.lower()))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    watched = (inputs, cwd, home, tmp)
    rng = random.Random(f"{SEED}-{fmt}")
    hostile = HOSTILE.get(fmt, [])
    starts = [example(), *hostile]
    exits = {0: 0, 2: 0}
    for case in range(len(hostile) + CASES):
        data = hostile[case] if case < len(hostile) else mutate(rng.choice(starts), rng)
        path = inputs / name
        path.write_bytes(data)
        before = snapshot(*watched)
        for argv in commands(str(path), target):
            code, out, err = run_cli(*argv)
            _check(code, out, err, len(data), (*argv, f"case {case}"))
            exits[code] += 1
        after = snapshot(*watched)
        changed = sorted(after.items() ^ before.items())[:3]
        assert after == before, f"case {case}: a command wrote outside its target: {changed}"
    assert exits[2], f"no mutation of {fmt} was refused: the fuzzing does not reach the checks"
