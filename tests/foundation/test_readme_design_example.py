"""The README's ``[design]`` example is exactly the defaults it claims: a line marked ``[default X]``
names the value a file without the field gets, every other line (``rows``/``cols`` aside: required)
shows that field's default, and the example names every field once."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from accel_dse.design_files import parse_design_toml
from accel_spec.config import FIELD_NAMES, ArrayConfig

README = Path(__file__).resolve().parents[2] / "README.md"
_LINE = re.compile(r"^(\w+) = (.+?)\s+#(.*)$")


def _example() -> list[tuple[str, object, str]]:
    text = README.read_text("utf-8")
    block = re.search(r"```toml\n(\[design\]\n.*?)```", text, re.S)
    assert block, "the README has a [design] example"
    out = []
    for line in block.group(1).splitlines()[1:]:
        if not line.startswith(("#", " ")) and line.strip():
            match = _LINE.match(line)
            assert match, f"a README example line reads 'key = value  # comment': {line!r}"
            out.append((match.group(1), tomllib.loads(f"v = {match.group(2)}")["v"], match.group(3)))
    return out


def test_the_readme_example_claims_only_the_real_defaults():
    defaults = {f.name: f.default for f in dataclasses.fields(ArrayConfig)}
    lines = _example()
    assert [k for k, _, _ in lines] == list(FIELD_NAMES)  # every field, once, in the dataclass order
    marked = 0
    for key, value, comment in lines:
        if key in ("rows", "cols"):
            assert "required" in comment
            continue
        default = defaults[key]
        claim = re.search(r"\[default (.+?)\]", comment)
        if claim:
            marked += 1
            claimed = tomllib.loads(f"v = {claim.group(1)}")["v"]
            assert claimed == getattr(default, "value", default), key
            assert value != claimed, f"{key}: a [default] mark on a line that shows the default"
        else:
            assert value == getattr(default, "value", default), f"{key} = {value!r} is not the default {default!r}"
    assert marked >= 2  # the example's dram and tech_nm are not the defaults, and say so
    assert parse_design_toml("\n".join(["[design]"] + [f"{k} = {v!r}".replace("True", "true").replace(
        "False", "false").replace("'", '"') for k, v, _ in lines]))  # and the example is a valid design
