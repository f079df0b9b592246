"""The README's ``[design]`` example is exactly the defaults it claims: every line (``rows``/``cols``
aside: required) shows that field's default, none is marked as differing from it, and the example names
every field once."""

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
    for key, value, comment in lines:
        if key in ("rows", "cols"):
            assert "required" in comment
            continue
        default = defaults[key]
        assert "[default" not in comment, f"{key}: the example claims to be the defaults, not to differ"
        assert value == getattr(default, "value", default), f"{key} = {value!r} is not the default {default!r}"
    # the text under the example names the default part (the one docs/physical.md chooses)
    assert dict((k, v) for k, v, _ in lines)["dram"] == "lpddr5-x32"
    assert "`lpddr5-x32`" in README.read_text("utf-8")
    assert parse_design_toml("\n".join(["[design]"] + [f"{k} = {v!r}".replace("True", "true").replace(
        "False", "false").replace("'", '"') for k, v, _ in lines]))  # and the example is a valid design
