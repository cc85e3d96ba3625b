"""Alert codes come from the one registry: emitters pass an AlertCode, old spellings decode."""

from __future__ import annotations

import ast
from pathlib import Path

from agentledger.alerts.codes import (
    ALERT_CODES,
    EFFECT_UNKNOWN,
    LEGACY_CODES,
    AlertCode,
    canonical,
    code_of,
)
from agentledger.events.codec import EventCodec
from agentledger.events.models import Alert
from tests.sources import parse

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "agentledger"
REGISTRY = PACKAGE / "alerts" / "codes.py"
# The functions that take an alert's code as a positional argument, and its position.
CODE_ARGUMENT = {"alert": 0, "_refuse": 2, "lease_lost_alert": 0}


def _literal(node: ast.expr | None) -> bool:
    """A string written in place (a literal or an f-string), not a registered code."""
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _a_code(node: ast.expr) -> bool:
    """``X.code`` (a registered AlertCode's string) or a variable named ``code`` holding one."""
    return (isinstance(node, ast.Attribute) and node.attr == "code") or (
        isinstance(node, ast.Name) and node.id == "code"
    )


def _string_codes(tree: ast.AST) -> list[int]:
    """Lines where an alert gets a code not from the registry: Alert(code="…"), .alert("…", …)."""
    lines: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name in {"Alert", "AlertCondition"}:
            lines += [
                kw.value.lineno
                for kw in node.keywords
                if kw.arg == "code" and not _a_code(kw.value)
            ]
        at = CODE_ARGUMENT.get(name)
        if at is not None and len(node.args) > at and _literal(node.args[at]):
            lines.append(node.args[at].lineno)
    return lines


def test_every_code_is_registered_once_with_severity_title_and_action() -> None:
    """Each registered code is dotted lower case, with a severity, a title and an action."""
    assert len(ALERT_CODES) == len({c.code for c in ALERT_CODES.values()})
    for code, entry in ALERT_CODES.items():
        assert code == entry.code
        assert code == code.lower(), code
        assert "." in code, code
        assert entry.severity in {"info", "warning", "critical"}
        assert entry.title
        assert entry.action


def test_old_spellings_map_to_registered_codes_and_decode_as_them() -> None:
    """An alert written with an old snake_case code still decodes from the log, and is read
    (relayed, routed) as the registered code."""
    for old, new in LEGACY_CODES.items():
        assert old not in ALERT_CODES
        assert ALERT_CODES[new.code] is new
        assert code_of(old) is new
    codec = EventCodec()
    old_alert = Alert(
        alert_id="effect_unknown:r1:k",
        code="effect_unknown",
        severity="critical",
        summary="run r1: outcome unknown",
        source="worker",
        run_id="r1",
        occurred_at=1,
    )
    decoded = codec.decode(codec.encode(old_alert))
    assert isinstance(decoded, Alert)
    assert canonical(decoded).code == EFFECT_UNKNOWN.code
    assert canonical(decoded).alert_id == old_alert.alert_id


def test_no_emitter_passes_a_string_code() -> None:
    """No module of the package gives an alert a code as a string literal or f-string."""
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != REGISTRY and (lines := _string_codes(parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}


def test_the_scan_finds_a_string_code() -> None:
    """The scan itself flags Alert(code="x") and writer.alert(f"x_{y}", …) (so it can fail)."""
    source = (
        'Alert(code="x.y")\nwriter.alert(f"approval_{s}", "summary")\nwriter.alert(CODE, "s")\n'
        "Alert(code=FENCE_STALE)\nAlert(code=FENCE_STALE.code)\n"
    )
    assert _string_codes(parse(source)) == [1, 2, 4]


def test_a_code_is_an_alert_code() -> None:
    """The registry's values are AlertCode instances (what emitters are typed to take)."""
    assert all(isinstance(c, AlertCode) for c in ALERT_CODES.values())
