"""The README's agent programs run as written, on the real stack, in processes of their own."""

from __future__ import annotations

import ast
import asyncio
import os
import re
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from agentledger.settings import CommonSettings
from tests.sources import parse

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
# The rule: every ```python block of the README is a complete program, and is run here.
# Anything that is not (shell commands, settings, output) is fenced as something else.


def section(title: str) -> str:
    """The text of the README's ``## title`` section."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match is not None, f"README has no '## {title}' section"
    return match.group(1)


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of ``text``."""
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def program_sections() -> list[str]:
    """The titles of the README's ``##`` sections that hold a python block, in order."""
    text = README.read_text(encoding="utf-8")
    titles = re.findall(r"^## (.+)$", text, re.M)
    return [title for title in titles if python_blocks(section(title))]


async def run_program(
    path: Path, settings: CommonSettings, state_dir: Path, **extra: str
) -> tuple[int, str, str]:
    """Run ``path`` with the test's topics, keys and state dir; its exit code, stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(
        AGENTLEDGER_KAFKA_BOOTSTRAP=str(settings.kafka_bootstrap),
        AGENTLEDGER_REDIS_URL=str(settings.redis_url),
        AGENTLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        AGENTLEDGER_KEY_PREFIX=settings.key_prefix,
        AGENTLEDGER_STATE_DIR=str(state_dir),
        # A killed run's lease lapses sooner than the default 15 s (the resume waits for it),
        # still long after the next process has started.
        AGENTLEDGER_LEASE_TTL_MS="10000",
        **extra,
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(path), cwd=path.parent, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=240)
    return proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode()


def sandbox_effects(state_dir: Path) -> list[tuple[str, str]]:
    """(kind, idempotency key) of every effect the embedded sandbox performed."""
    with sqlite3.connect(state_dir / "sandbox" / "payments.db") as db:
        return list(db.execute("SELECT kind, idempotency_key FROM effects ORDER BY seq"))


def test_quickstart_is_short_and_imports_only_agentledger() -> None:
    """The Quickstart's first python block has at most 20 non-blank lines and imports nothing
    but the standard library and the top-level ``agentledger`` package."""
    (program, *_) = python_blocks(section("Quickstart"))
    lines = [line for line in program.splitlines() if line.strip()]
    assert len(lines) <= 20, len(lines)
    imported: set[str] = set()
    for node in ast.walk(parse(program)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert "agentledger" in imported
    assert {name for name in imported if name not in sys.stdlib_module_names} == {"agentledger"}


async def test_quickstart_killed_after_its_effect_prints_the_same_result_and_pays_once(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """SIGKILLed right after the sandbox performed the refund, the Quickstart run again waits
    for the dead lease (one log line), finds the refund by lookup and prints its result; a
    third run prints the same line and nothing more is performed."""
    (program, *_) = python_blocks(section("Quickstart"))
    path = tmp_path / "refund.py"
    path.write_text(program, encoding="utf-8")
    state = tmp_path / "state"
    code, out, err = await run_program(
        path, ledger_settings, state, AGENTLEDGER_KILL_POINT="after_provider_commit"
    )
    assert code == -signal.SIGKILL, err[-3000:]
    assert out == ""
    assert len(sandbox_effects(state)) == 1
    code, second, err = await run_program(path, ledger_settings, state)
    assert code == 0, err[-3000:]
    assert err.count("lease_wait") == 1
    assert re.fullmatch(r"refunded o-7: re_\w+\n", second), second
    code, third, err = await run_program(path, ledger_settings, state)
    assert code == 0, err[-3000:]
    assert third == second
    assert len(sandbox_effects(state)) == 1


def test_every_agent_section_has_its_program_under_the_rule() -> None:
    """The sections whose examples are programs are found by the rule (a python fence), so the
    Quickstart, Writing an agent, LangGraph and Pydantic AI examples are all run below."""
    assert program_sections() == [
        "Quickstart",
        "Writing an agent",
        "Using agentledger with LangGraph",
        "Using agentledger with Pydantic AI",
    ]


@pytest.mark.parametrize("title", program_sections())
async def test_readme_programs_run_as_written_and_again_print_the_same(
    title: str, ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """Every python block of the README runs to exit code 0 and prints; run again on the same
    stack and state (its run ids are fixed), it prints the same and performs nothing new."""
    blocks = python_blocks(section(title))
    assert blocks
    for number, program in enumerate(blocks):
        path = tmp_path / f"block{number}.py"
        path.write_text(program, encoding="utf-8")
        state = tmp_path / f"state{number}"
        code, out, err = await run_program(path, ledger_settings, state)
        assert code == 0, err[-3000:]
        assert out.strip(), err[-3000:]
        performed = sandbox_effects_anywhere(state)
        assert performed, "the program performed no effect at the sandbox"
        code, again, err = await run_program(path, ledger_settings, state)
        assert code == 0, err[-3000:]
        assert again == out
        assert sandbox_effects_anywhere(state) == performed


def sandbox_effects_anywhere(state_dir: Path) -> list[tuple[str, str]]:
    """(kind, idempotency key) of every effect any embedded sandbox under ``state_dir`` did."""
    found: list[tuple[str, str]] = []
    for db in sorted((state_dir / "sandbox").glob("*.db")):
        with sqlite3.connect(db) as conn:
            found += list(conn.execute("SELECT kind, idempotency_key FROM effects ORDER BY seq"))
    return found
