"""The public surface of ``agentledger``: one pinned ``__all__``, every name importable."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentledger
from tests.sources import parse

INIT = Path(agentledger.__file__)

# Changing this list changes the public API: add a name here only on purpose.
PUBLIC = [
    "DEFAULT_REDACTOR",
    "Agent",
    "AgentLedgerError",
    "ApprovalError",
    "BlobStore",
    "BudgetExceededError",
    "Check",
    "ConfigurationError",
    "Connection",
    "EffectFailedError",
    "EffectRequest",
    "EffectResult",
    "EffectUnknownError",
    "FileBlobStore",
    "HttpProvider",
    "IdentityMismatchError",
    "LeaseHeldError",
    "Ledger",
    "Limits",
    "Metered",
    "Payloads",
    "Provider",
    "Redactor",
    "ReplayMismatchError",
    "Rule",
    "Run",
    "RunClosedError",
    "RunPausedError",
    "RunSpec",
    "Step",
    "StepRejectedError",
    "UsageError",
    "VersionDriftError",
    "Versions",
    "WorkerSettings",
    "__version__",
    "activity",
    "agent",
    "connect",
    "effect",
    "effect_key",
    "intent_hash",
    "step",
]


def _type_checking_imports() -> set[str]:
    """The names imported under ``if TYPE_CHECKING:`` in ``agentledger/__init__.py``."""
    tree = parse(INIT.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(node, ast.If) and isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in stmt.names)
    return names


def test_all_is_the_pinned_public_surface() -> None:
    """``agentledger.__all__`` is exactly the pinned list, and ``dir()`` shows only it."""
    assert agentledger.__all__ == PUBLIC
    assert dir(agentledger) == sorted(PUBLIC)


def test_every_public_name_resolves_to_a_non_module_value() -> None:
    """Each name of ``__all__`` is importable from ``agentledger`` (none is a submodule)."""
    for name in agentledger.__all__:
        value = getattr(agentledger, name)
        assert value is not None, name
        assert type(value).__name__ != "module", name


def test_type_checkers_see_the_same_names_as_all() -> None:
    """The imports for type checkers name exactly ``__all__`` (minus ``__version__``)."""
    assert _type_checking_imports() == set(PUBLIC) - {"__version__"}


def test_other_names_are_not_public() -> None:
    """A name outside ``__all__`` is an AttributeError, not a silent deep import."""
    with pytest.raises(AttributeError, match="no attribute 'MemoryProvider'"):
        agentledger.MemoryProvider  # noqa: B018
