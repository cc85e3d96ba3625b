"""The decorators keep the functions' types: mypy sees the parameters and return types."""

from __future__ import annotations

from pathlib import Path

from mypy import api

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
from typing import assert_type

import agentledger


@agentledger.activity
async def ask(order: str) -> agentledger.Metered[int]:
    return agentledger.Metered(25, tokens=1)


@agentledger.step(accept=lambda amount: amount > 0)
async def decide(order: str, *, cap: int = 100) -> int:
    return min(await ask(order), cap)


@agentledger.effect(provider="payments")
def refund(order: str, amount: int) -> agentledger.EffectRequest:
    return agentledger.EffectRequest(kind="refunds", identity={"order": order, "amount": amount})


@agentledger.agent
async def refund_agent(order: str) -> dict[str, str | None]:
    amount = await decide(order, cap=50)
    assert_type(amount, int)
    assert_type(await ask(order), int)  # the recorded value, not the Metered wrapper
    done = await refund(order, amount)
    assert_type(done, agentledger.EffectResult)
    return {"ref": done.external_ref}


async def main(ledger: agentledger.Connection) -> None:
    result = await ledger.run("r1", refund_agent, "o-7")
    assert_type(result, dict[str, str | None])
    await ledger.run("r1", refund_agent, 7)  # E: wrong argument type
    await decide("o-7", cap="no")  # E: wrong argument type
"""


def _errors(source: str, tmp_path: Path) -> list[str]:
    """mypy --strict's error lines for ``source`` (checked with the package's own config)."""
    path = tmp_path / "program.py"
    path.write_text(source, encoding="utf-8")
    out, _, _ = api.run(
        [
            "--config-file", str(REPO / "pyproject.toml"),
            "--cache-dir", str(REPO / ".mypy_cache"),
            "--no-error-summary", "--hide-error-context",
            str(path),
        ]
    )  # fmt: skip
    return [line for line in out.splitlines() if ": error:" in line]


def test_decorated_functions_keep_their_signatures_and_return_types(tmp_path: Path) -> None:
    """Steps, activities, effects and agents keep their parameters (ParamSpec) and results:
    the only errors mypy reports are the two calls with a wrong argument type."""
    errors = _errors(PROGRAM, tmp_path)
    lines = {int(line.split(":")[1]) for line in errors}
    expected = {n for n, text in enumerate(PROGRAM.splitlines(), 1) if "# E:" in text}
    assert lines == expected, errors
