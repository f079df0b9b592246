"""The exported package as a new user meets it: the README lists every file, run.py checks its
own requirements, the documented latencies and cycle formulas equal what they describe."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest


def _readme_files(text: str) -> list[str]:
    section = text[text.index("## Files"):]
    section = section[: section.index("\n## ", 3)]
    return re.findall(r"^- `([^`]+)`:", section, flags=re.MULTILINE)


def test_the_readme_lists_every_file_written(tiny_export):
    out, result = tiny_export
    listed = _readme_files((out / "README.md").read_text())
    written = sorted(p.name for p in out.iterdir() if p.name != ".accel-dse-output")  # the output marker
    assert sorted(listed) == written
    assert sorted(listed) == sorted(result.files)
    assert len(listed) == len(set(listed))


def test_every_port_meaning_is_whole(tiny_export):
    """A meaning continued on a second line of the port map is read whole (``a_stride``)."""
    out, _ = tiny_export
    ports = {p["name"]: p["meaning"] for p in json.loads((out / "design.json").read_text())["ports"]}
    assert ports["a_stride"].endswith("(x row-folds WS/OS, y column-folds IS; 0: packed)")
    for name, meaning in ports.items():
        assert meaning.count("(") == meaning.count(")"), (name, meaning)
    readme = (out / "README.md").read_text()
    assert "| a_stride | in | 24 | " + ports["a_stride"] + " |" in readme


def _run_without(out, tmp_path, present: tuple[str, ...]):
    """run.py under this Python without site-packages (``-S``), with stub packages for ``present``."""
    stubs = tmp_path / "stubs"
    for name in present:
        (stubs / name).mkdir(parents=True, exist_ok=True)
        (stubs / name / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST",)}
    env["PYTHONPATH"] = str(stubs)
    return subprocess.run([sys.executable, "-S", "run.py"], cwd=out, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize(("present", "missing"), [((), "numpy"), (("numpy",), "cocotb"),
                                                  (("numpy", "cocotb"), "cocotb_tools")])
def test_run_py_without_its_requirements_is_one_line_and_exit_2(tiny_export, tmp_path, present, missing):
    out, _ = tiny_export
    proc = _run_without(out, tmp_path, present)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"run.py needs the Python package {missing!r}, which {sys.executable} does not have" in lines[0]
    assert "pip install" in lines[0]
    assert not (out / "sim_build").exists()


def test_run_py_names_the_python_that_exported_it(tiny_export, tmp_path):
    """With another interpreter recorded as the exporter, the hint names it as the one to use."""
    out, _ = tiny_export
    copy = tmp_path / "copy"
    copy.mkdir()
    for p in out.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    design = json.loads((copy / "design.json").read_text())
    other = tmp_path / "bin" / "python-with-cocotb"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    design["runner_python"] = str(other)
    (copy / "design.json").write_text(json.dumps(design))
    proc = _run_without(copy, tmp_path, ())
    assert proc.returncode == 2
    assert f"run it with {other} run.py (the Python that exported it)" in proc.stderr


def test_export_prints_the_command_with_this_python(run_cli, tmp_path):
    import shlex

    code, out, err = run_cli("export", "--design", "tiny", "--out", str(tmp_path / "e"), "--no-synth")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("re-verify: "))
    assert f"&& {shlex.quote(sys.executable)} run.py" in line
    design = json.loads((tmp_path / "e" / "design.json").read_text())
    assert design["runner_python"] == sys.executable


def test_documented_latencies_equal_the_constants():
    """The port map's numbers are written out for readers: each must equal the constant it describes."""
    import rtl_gen
    from accel_spec.isa import OUTPUT_STAGE_LATENCY, store_read_latency

    doc = str(rtl_gen.PORT_MAP)
    qdata = re.search(r"host_qdata .* (\d+) cycles back", doc)
    assert qdata and int(qdata.group(1)) == rtl_gen.QDATA_LATENCY == store_read_latency(True)
    stated = re.search(r"QDATA_LATENCY = 1 \+ OUTPUT_STAGE_LATENCY = (\d+)", " ".join(doc.split()))
    assert stated and int(stated.group(1)) == rtl_gen.QDATA_LATENCY == 1 + OUTPUT_STAGE_LATENCY
    ofmap = re.search(r"The ofmap read has a fixed latency of (\d+) cycle", " ".join(doc.split()))
    assert ofmap and int(ofmap.group(1)) == store_read_latency(False)
    channels = re.search(r"holds ``QPARAM_CHANNELS = (\d+)`` channels", " ".join(doc.split()))
    assert channels and int(channels.group(1)) == rtl_gen.QPARAM_CHANNELS


def test_the_exported_latencies_equal_the_constants(tiny_export):
    import rtl_gen
    from accel_spec.isa import store_read_latency

    out, _ = tiny_export
    design = json.loads((out / "design.json").read_text())
    assert design["qdata_read_latency"] == rtl_gen.QDATA_LATENCY
    assert design["ofmap_read_latency"] == store_read_latency(False)


def _documented_formulas() -> dict[str, str]:
    """The cycle formulas of the port map's timing paragraph, as Python expressions by case."""
    import rtl_gen

    text = " ".join(str(rtl_gen.PORT_MAP).split())
    found = re.search(r"``(1 \+ folds \* \(Ds \+ 2R \+ C\))`` without shadow registers; with them ``([^`]+)`` for "
                      r"WS and IS and ``([^`]+)`` for OS", text)
    assert found, "the timing paragraph no longer states the three formulas"

    def python(expr: str) -> str:
        return re.sub(r"(\d)([A-Z])", r"\1*\2", expr)

    return {"plain": python(found.group(1)), "shadow": python(found.group(2)), "shadow-os": python(found.group(3))}


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("shadow", [False, True])
def test_the_documented_cycle_formulas_equal_run_cycles(dataflow, shadow):
    """Including K < R on OS (the case where a formula with ``Ds`` for OS was 12 cycles short)."""
    from perf_model import timing

    formulas = _documented_formulas()
    code = timing.DATAFLOW_CODES[dataflow]
    for rows, cols, m, k, n in [(16, 8, 40, 4, 20), (4, 4, 9, 13, 7), (8, 8, 8, 8, 8), (2, 3, 1, 1, 1),
                                (16, 16, 32, 12, 32), (8, 4, 100, 3, 5)]:
        ds, dr, dc = (int(v) for v in timing.array_dims(code, m, k, n))
        folds = -(-dr // rows) * -(-dc // cols)
        key = "plain" if not shadow else ("shadow-os" if dataflow == "os" else "shadow")
        documented = eval(formulas[key], {"max": max}, {"folds": folds, "Ds": ds, "R": rows, "C": cols})  # noqa: S307
        assert documented == int(timing.run_cycles(code, rows, cols, m, k, n, shadow)), (rows, cols, m, k, n)


def test_readme_gives_the_expected_build_and_run_time(tiny_export):
    """The README's expected build times are simulate's build estimate for this array (tiny: 4x4),
    the one run.py prints before it builds (read from design.json), and the run's cycles are the
    check GEMMs' cycles."""
    from accel_dse.simulate.runner.eta import build_seconds, duration

    out, _ = tiny_export
    design = json.loads((out / "design.json").read_text())
    readme = (out / "README.md").read_text()
    for name in ("verilator", "icarus"):
        seconds = build_seconds(name, 4 * 4)
        assert design["expected"]["build_s"][name] == pytest.approx(seconds, abs=0.05)
        assert f"{name.capitalize()} about {duration(seconds)}" in readme
    cycles = sum(g["cycles"] for g in design["check"]["gemms"])
    assert f"simulates {cycles:,} compute cycles" in readme
    # the run's time at the size's estimated speed (4x4: Verilator ~1.36 M cycles/s by the fit through
    # 275,700 at 16x16 and 10,500 at 128x32, Icarus ~8,000 as measured at 4x4)
    assert f"Verilator about {duration(cycles / 275_700 / (16 / 256) ** 1.179)}" in readme
    assert f"Icarus about {duration(cycles / 8_000)}" in readme
    # run.py's own line reads design.json's figure (no second copy of the estimate in run.py)
    run_py = (out / "run.py").read_text()
    assert 'design["expected"]["build_s"][name]' in run_py and "BUILD_S" not in run_py


def test_readme_predictions_in_display_units(tiny_export):
    out, _ = tiny_export
    readme = (out / "README.md").read_text()
    section = readme[readme.index("## Predicted on"):]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    latency = re.search(r"^\| latency_s \| ([\d.,]+) ([mµn]?s) \|$", section, flags=re.MULTILINE)
    energy = re.search(r"^\| energy_pj \| ([\d.,]+) ([mµnp]?J) \|$", section, flags=re.MULTILINE)
    assert latency and energy, section
    assert "e+" not in section and "e-" not in section
