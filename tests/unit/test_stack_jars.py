"""The jar cache check: a manifest of names, sizes and sha256 finds every kind of breakage."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from agentledger.errors import StackError
from agentledger.stack.config import KAFKA_VERSION, REQUIRED_JARS
from agentledger.stack.jars import (
    JarManifest,
    build_manifest,
    jar_problems,
    read_manifest,
    zip_problem,
)


def _jar(path: Path, payload: bytes = b"class bytes") -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        archive.writestr("x/Y.class", payload)


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    """A jar directory holding the required jars plus one extra dependency."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in (*REQUIRED_JARS, "scala-library-2.13.16.jar"):
        _jar(lib / name, name.encode())
    return lib


def test_a_complete_set_has_no_problems(lib: Path) -> None:
    """A jar set that matches its manifest is usable as is."""
    manifest = build_manifest(lib)
    assert manifest.kafka_version == KAFKA_VERSION
    assert len(manifest.jars) == len(REQUIRED_JARS) + 1
    assert jar_problems(lib, manifest) == []


def test_no_manifest_means_fetch(lib: Path) -> None:
    """Without a manifest (fetch never finished) the set is not trusted."""
    assert jar_problems(lib, None) != []
    assert read_manifest(lib / "absent.json") is None


def test_a_missing_jar_is_found(lib: Path) -> None:
    """Deleting one jar is reported by name."""
    manifest = build_manifest(lib)
    (lib / "scala-library-2.13.16.jar").unlink()
    assert jar_problems(lib, manifest) == ["missing scala-library-2.13.16.jar"]


def test_a_corrupted_jar_is_found(lib: Path) -> None:
    """Overwriting a jar's bytes (same size) is caught by its sha256."""
    manifest = build_manifest(lib)
    victim = lib / REQUIRED_JARS[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert jar_problems(lib, manifest) == [
        f"{REQUIRED_JARS[0]} differs from its recorded size/sha256"
    ]


def test_an_unexpected_jar_is_found(lib: Path) -> None:
    """A stray jar on the classpath (e.g. a second slf4j binding) is reported."""
    manifest = build_manifest(lib)
    _jar(lib / "stray-1.0.jar")
    assert jar_problems(lib, manifest) == ["unexpected jar stray-1.0.jar"]


def test_a_manifest_of_another_version_is_refused(lib: Path) -> None:
    """A jar set recorded for another Kafka version is fetched again."""
    manifest = build_manifest(lib).model_copy(update={"kafka_version": "3.9.0"})
    assert jar_problems(lib, manifest) == [f"jar set is Kafka 3.9.0, need {KAFKA_VERSION}"]


def test_a_truncated_jar_does_not_open(lib: Path) -> None:
    """A truncated jar is not a zip; building a manifest over it fails with its name."""
    victim = lib / REQUIRED_JARS[1]
    victim.write_bytes(victim.read_bytes()[:40])
    assert zip_problem(victim) is not None
    with pytest.raises(StackError, match=REQUIRED_JARS[1]):
        build_manifest(lib)


def test_an_incomplete_download_cannot_become_a_manifest(lib: Path) -> None:
    """If Maven did not deliver a required jar, no manifest is written for the set."""
    (lib / REQUIRED_JARS[0]).unlink()
    with pytest.raises(StackError, match="did not deliver"):
        build_manifest(lib)


def test_manifest_round_trips(lib: Path, tmp_path: Path) -> None:
    """A written manifest reads back equal; a garbled one reads as absent."""
    manifest = build_manifest(lib)
    path = tmp_path / "jars.json"
    path.write_text(manifest.model_dump_json())
    assert read_manifest(path) == manifest
    path.write_text("{garbled")
    assert read_manifest(path) is None
    assert isinstance(manifest, JarManifest)
