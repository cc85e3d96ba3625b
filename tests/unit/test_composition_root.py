"""Every process that writes runs builds its Kafka log, leases and views in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import agentledger
from tests.sources import parse

PACKAGE = Path(agentledger.__file__).parent
ROOT = PACKAGE / "_core" / "ports.py"
DEFINED = PACKAGE / "bus" / "kafka.py"
#: The classes only the composition root may instantiate (bus/kafka.py defines the log).
WIRED = {"KafkaEventLog"}


def constructions(source: str) -> set[str]:
    """The names of WIRED classes that ``source`` calls."""
    found: set[str] = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in WIRED:
                found.add(name)
    return found


def test_only_the_core_ports_build_the_fenced_event_log() -> None:
    """No module but _core/ports.py constructs a KafkaEventLog: the worker, the saver, the fleet,
    the operator's ledger, the demo and the reconciler all get theirs from Ports."""
    offenders = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path not in (ROOT, DEFINED) and constructions(path.read_text(encoding="utf-8"))
    )
    assert offenders == []
    assert constructions(ROOT.read_text(encoding="utf-8")) == WIRED


def test_the_scan_sees_a_construction() -> None:
    """The scan finds a KafkaEventLog built by name or through a module attribute."""
    assert constructions("log = KafkaEventLog(s, transactional_id='x')") == WIRED
    assert constructions("log = kafka.KafkaEventLog(s)") == WIRED
    assert constructions("log = Ports(s, transactional_id='x').log") == set()
