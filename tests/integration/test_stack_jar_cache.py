"""A broken Kafka jar cache is detected and fetched again from Maven."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentledger.stack import StackPaths, ensure_jars
from agentledger.stack.jars import jar_problems, read_manifest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


async def test_corrupt_and_missing_jars_are_refetched(
    tmp_path: Path, kafka_jar_cache: StackPaths
) -> None:
    """A jar with flipped bytes and a deleted jar are both reported and the set is restored."""
    paths = StackPaths(tmp_path / "state")
    paths.kafka.mkdir(parents=True)
    shutil.copytree(kafka_jar_cache.jars, paths.jars)
    shutil.copy2(kafka_jar_cache.jar_manifest, paths.jar_manifest)
    corrupt, missing = sorted(paths.jars.glob("kafka-*.jar"))[:2]
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 3] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    missing.unlink()

    result = await ensure_jars(paths)

    assert result.fetched
    assert f"missing {missing.name}" in result.problems
    assert any(corrupt.name in p for p in result.problems)
    assert jar_problems(paths.jars, read_manifest(paths.jar_manifest)) == []
    assert result.manifest == read_manifest(kafka_jar_cache.jar_manifest)
    again = await ensure_jars(paths)
    assert not again.fetched
