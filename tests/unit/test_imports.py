"""The package layering: no import cycle between packages, front ends only meet in the core."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "agentledger"

# Each depends on the core; none may reach into another's modules (its package's public
# ``__init__`` is fine, e.g. ``from agentledger.worker import Ledger``).
FRONT_ENDS = ("worker", "fleet", "reconciler", "integrations", "demo")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """Every agentledger module -> the agentledger modules it imports (anywhere in its body)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    target = ".".join([*base, *(node.module or "").split(".")]).rstrip(".")
                else:
                    target = node.module or ""
                targets.add(target)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        found[name] = {t for t in targets if t.split(".")[0] == "agentledger"}
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agentledger"


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, targets in _imports().items():
        for target in targets:
            if _package(source) != _package(target):
                graph[_package(source)].add(_package(target))
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle in ``graph`` as a path that starts and ends at the same node, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt, [*path, node])
            if found is not None:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found is not None:
            return found
    return None


def test_cycle_finder_sees_a_cycle() -> None:
    """The cycle check itself reports a two-package loop (so the real check can fail)."""
    assert _cycle({"worker": {"testing"}, "testing": {"worker"}}) == [
        "testing",
        "worker",
        "testing",
    ]
    assert _cycle({"worker": {"_core"}, "_core": set()}) is None


def test_no_import_cycle_between_packages() -> None:
    """No chain of imports leads from a package of agentledger back to itself."""
    assert _cycle(_package_graph()) is None


def test_front_ends_do_not_import_each_others_modules() -> None:
    """The SDK, fleet, reconciler, integrations and demo import each other only by package."""
    crossings = sorted(
        f"{source} -> {target}"
        for source, targets in _imports().items()
        for target in targets
        if _package(source) in FRONT_ENDS
        and _package(target) in FRONT_ENDS
        and _package(source) != _package(target)
        and target != f"agentledger.{_package(target)}"
    )
    assert crossings == []


def test_core_imports_no_front_end() -> None:
    """The core is below every front end: it imports none of them, nor the testing helpers."""
    assert _package_graph()["_core"].isdisjoint({*FRONT_ENDS, "testing"})


def test_views_do_not_import_bus_or_leasing() -> None:
    """The views (fold and stores) know events and Redis, not the bus or lease internals."""
    assert _package_graph()["views"].isdisjoint({"bus", "leasing", "leases"})
