"""The package layering: no import cycle between packages; applications meet only in the core
and the other libraries, or through each other's package ``__init__``."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.sources import parse

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "agentledger"

# Every package (or top-level module) of agentledger is one of these; a new one must be added.
# Applications: each its own modules, private to it; another package may import only its
# package ``__init__`` (``from agentledger.worker import Ledger``), never a module inside it.
APPLICATIONS = frozenset(
    {"worker", "fleet", "reconciler", "integrations", "demo", "console", "projector"}
)
# Libraries: shared building blocks below the applications (the core among them); their
# modules are theirs to share, and they import no application.
LIBRARIES = frozenset(
    {
        "_core", "alerts", "bus", "errors", "events", "kafkaclient", "leases", "leasing",
        "logdefaults", "providers", "redaction", "redisclient", "settings", "stack", "telemetry",
        "netprobe", "outage", "tasks", "variables", "views", "coalesce", "zstd_batches",
    }
)  # fmt: skip
# Entry points above everything: the package root re-exports the public surface (pinned by
# test_public_surface) from wherever it lives; the CLI, ``python -m`` modules and the shipped
# testing module compose.
ENTRY_POINTS = frozenset({"agentledger", "cli", "__main__", "testing", "settings_doc"})


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
        for node in ast.walk(parse(path.read_text(encoding="utf-8"))):
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
    """The package a module belongs to in the layering (``__main__`` modules are their own)."""
    parts = module.split(".")
    if parts[-1] == "__main__":
        return "__main__"  # a `python -m` entry point, wherever it sits
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


def test_every_package_has_a_place_in_the_layering() -> None:
    """Each package of agentledger is an application, a library or an entry point, once."""
    packages = {_package(module) for module in _imports()}
    assert packages == APPLICATIONS | LIBRARIES | ENTRY_POINTS
    assert not APPLICATIONS & LIBRARIES
    assert not (APPLICATIONS | LIBRARIES) & ENTRY_POINTS


def _private_crossings(imports: dict[str, set[str]]) -> list[str]:
    """Imports of a module inside an application from outside it (its ``__init__`` is fine)."""
    return sorted(
        f"{source} -> {target}"
        for source, targets in imports.items()
        for target in targets
        if _package(target) in APPLICATIONS
        and _package(source) not in {_package(target), "agentledger"}
        and target != f"agentledger.{_package(target)}"
    )


def test_private_crossing_finder_sees_one() -> None:
    """The rule below reports a console module importing a fleet module (so it can fail)."""
    found = _private_crossings(
        {"agentledger.console.reads": {"agentledger.fleet.listing", "agentledger.fleet"}}
    )
    assert found == ["agentledger.console.reads -> agentledger.fleet.listing"]


def test_no_package_imports_an_applications_modules() -> None:
    """No package imports a module inside an application other than its own: the console,
    the SDK, fleet, reconciler, integrations, demo and projector meet through package
    ``__init__``s and the core."""
    assert _private_crossings(_imports()) == []


def test_libraries_import_no_application() -> None:
    """The core and the other libraries are below every application: they import none of
    them, nor the entry points."""
    graph = _package_graph()
    reaching = {lib: sorted(graph[lib] & (APPLICATIONS | ENTRY_POINTS)) for lib in LIBRARIES}
    assert {lib: up for lib, up in reaching.items() if up} == {}


def test_views_do_not_import_bus_or_leasing() -> None:
    """The views (fold and stores) know events and Redis, not the bus or lease internals."""
    assert _package_graph()["views"].isdisjoint({"bus", "leasing", "leases"})
