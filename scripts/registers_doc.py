"""Regenerate the register table in docs/registers.md from ``rtl_gen.CONTROL_REGMAP``.

Usage: ``python scripts/registers_doc.py`` (rewrite the table between the markers) or
``python scripts/registers_doc.py --check`` (exit 1 when the doc is stale).
``tests/rtl_gen/test_regmap.py`` fails when the doc and the map disagree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rtl_gen import CONTROL_REGMAP, markdown_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "registers.md"
BEGIN, END = "<!-- BEGIN generated register table -->", "<!-- END generated register table -->"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the doc is up to date")
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        print(f"registers_doc: error: {DOC} must hold the markers {BEGIN!r} and {END!r} once each", file=sys.stderr)
        return 2
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    new = f"{head}{BEGIN}\n{markdown_table(CONTROL_REGMAP)}{END}{tail}"
    if args.check:
        if new != text:
            print(f"registers_doc: {DOC} is stale: run python scripts/registers_doc.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        tmp = DOC.with_suffix(".md.tmp")
        tmp.write_text(new, encoding="utf-8")
        tmp.replace(DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main())
