"""Entry point drafting README's configuration table from the settings classes.

``python -m agentledger.settings_doc --markdown [--missing-from README.md]`` prints one row (name,
default, the field's description and range) for every ``AGENTLEDGER_*`` variable, or only for
those README's table lacks (``tests/unit/test_readme_settings.py`` fails until each has one).
"""

from __future__ import annotations

import argparse
from typing import Any

from agentledger.cli import build_parser
from agentledger.settings import declared_fields
from agentledger.variables import VARIABLES, documented_variables


def _default(info: Any) -> str:
    if info.default_factory is not None:
        return "computed"
    value = info.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _range(info: Any) -> str:
    bounds = {
        b: getattr(m, b) for m in info.metadata for b in ("ge", "gt", "le", "lt") if hasattr(m, b)
    }
    if "ge" in bounds and "le" in bounds:
        return f"{bounds['ge']}-{bounds['le']}"
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return ", ".join(f"{signs[b]} {v}" for b, v in bounds.items() if v is not None)


def markdown_rows(names: list[str]) -> list[str]:
    """One configuration-table row per variable: name, default, description and range."""
    build_parser()  # imports every command's settings
    fields = declared_fields()
    rows = []
    for name in names:
        info = fields.get(name)
        if info is None:  # a class the CLI does not import (the LangGraph saver's): by hand
            rows.append(f"| `{name}` | ? | (its settings class is not imported here) |")
            continue
        meaning = "; ".join(p for p in (info.description or "", _range(info)) if p)
        rows.append(f"| `{name}` | {_default(info)} | {meaning} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    """Print configuration-table rows for README."""
    parser = argparse.ArgumentParser(prog="python -m agentledger.settings_doc")
    parser.add_argument("--markdown", action="store_true", required=True, help="table rows")
    parser.add_argument("--missing-from", metavar="README", help="only what README lacks")
    args = parser.parse_args(argv)
    names = sorted(VARIABLES)
    if args.missing_from is not None:
        with open(args.missing_from, encoding="utf-8") as handle:
            present = set(documented_variables(handle.read()))
        names = [n for n in names if n not in present]
    print("\n".join(markdown_rows(names)))  # noqa: T201 - the tool's output


if __name__ == "__main__":
    main()
