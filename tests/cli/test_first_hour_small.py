"""Small frictions of the first hour (issue 54): ``export``'s prediction in engineering units, and no
README link to a file outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_export_prints_latency_and_energy_with_prefixes(run_cli, tmp_path):
    code, out, err = run_cli("export", "--design", "tiny", "--no-synth", "--out", str(tmp_path / "tiny"))
    assert code == 0, out + err
    line = next(line for line in out.splitlines() if line.startswith("predicted on "))
    assert re.search(r" cycles, \d+(\.\d+)? [munµ]?s, \d+(\.\d+)? [pnµmk]?J, ", line), line
    assert "e+" not in line and "e-" not in line and " pJ" not in line
    assert re.search(r", \d+(\.\d+)? mm², utilisation \d+\.\d %$", line), line  # the report's units


def test_the_readme_links_only_files_in_the_repository():
    text = (REPO / "README.md").read_text("utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)[^)]*\)", text) + re.findall(r"`(\.\./[^`]+)`", text)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert local, "the README links no local file (the check would check nothing)"
    missing = [t for t in local if not (REPO / t).resolve().is_relative_to(REPO) or not (REPO / t).exists()]
    assert missing == [], missing


def test_one_transpose_run_is_singular(run_cli):
    """A one-head encoder layer transposes its keys once: "1 transpose run", not "1 transpose runs"."""
    code, out, err = run_cli("evaluate", "--design", "tiny-vector",
                             "--workload", "bert_base:seq=16,d=32,heads=1,ffn=64")
    assert code == 0, err
    assert ", 1 transpose run," in out and "1 transpose runs" not in out
