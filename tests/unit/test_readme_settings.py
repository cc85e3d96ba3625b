"""README's configuration table names every setting agentledger reads, and nothing else."""

from __future__ import annotations

from pathlib import Path

from agentledger.cli import build_parser
from agentledger.settings import declared_fields
from agentledger.variables import VARIABLES, documented_defaults, documented_variables

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_table_lists_every_setting() -> None:
    """Each variable of VARIABLES (kept equal to the settings classes) has a row in README's
    Configuration table."""
    documented = set(documented_variables(README.read_text(encoding="utf-8")))
    missing = sorted(VARIABLES - documented)
    assert missing == [], (
        "add these to README's configuration table "
        "(`python -m agentledger.settings_doc --markdown --missing-from README.md` drafts the rows)"
    )


def test_the_readme_table_names_no_setting_that_does_not_exist() -> None:
    """Every variable the Configuration table names is one a settings class reads (a renamed
    or removed setting fails here)."""
    documented = documented_variables(README.read_text(encoding="utf-8"))
    assert sorted(set(documented) - VARIABLES) == []


def test_each_setting_has_one_row() -> None:
    """No variable is described twice in the table (two rows could say different things)."""
    documented = documented_variables(README.read_text(encoding="utf-8"))
    assert sorted({n for n in documented if documented.count(n) > 1}) == []


def test_the_table_reader_finds_short_names_and_only_the_configuration_table() -> None:
    """``..._X`` in a row stands for AGENTLEDGER_X, and variables named in other sections'
    tables or in prose are not counted as documented."""
    text = (
        "# t\n\n## Other\n\n| `AGENTLEDGER_NOT_HERE` | x |\n\n## Configuration\n\n"
        "Set `AGENTLEDGER_IN_PROSE` to ...\n\n| variable | default | meaning |\n|---|---|---|\n"
        "| `AGENTLEDGER_A_PORT`, `..._A_HOST` | `1` | the A |\n| `AGENTLEDGER_B` | unset | b |\n\n"
        "## Next\n\n| `AGENTLEDGER_AFTER` | x |\n"
    )
    assert documented_variables(text) == [
        "AGENTLEDGER_A_PORT",
        "AGENTLEDGER_A_HOST",
        "AGENTLEDGER_B",
    ]


def test_the_table_gives_each_numeric_setting_its_real_default() -> None:
    """A number in the table's default column equals the settings field's default (a default
    changed in code and not in README fails here)."""
    build_parser()  # imports every command's settings
    fields = declared_fields()
    wrong = {}
    for name, shown in documented_defaults(README.read_text(encoding="utf-8")).items():
        info = fields.get(name)
        default = None if info is None else info.default
        if isinstance(default, bool) or not isinstance(default, int | float):
            continue
        try:
            matches = float(shown) == float(default)
        except ValueError:
            matches = False
        if not matches:
            wrong[name] = (shown, default)
    assert wrong == {}


def test_the_default_reader_pairs_values_with_variables_in_order() -> None:
    """The k-th backticked value of a row's default cell is the k-th variable's default, and a
    variable without one ("unset") has none."""
    text = (
        "# t\n\n## Configuration\n\n| variable | default | meaning |\n|---|---|---|\n"
        "| `AGENTLEDGER_A_PORT`, `..._A_HOST` | `1`, `h` | the A |\n"
        "| `AGENTLEDGER_B` | unset | b |\n"
    )
    assert documented_defaults(text) == {"AGENTLEDGER_A_PORT": "1", "AGENTLEDGER_A_HOST": "h"}
