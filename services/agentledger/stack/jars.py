"""The broker's jar set: fetched from Maven Central, verified against a sha256 manifest."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from agentledger.errors import StackError
from agentledger.stack.config import (
    KAFKA_VERSION,
    REQUIRED_JARS,
    StackPaths,
    maven_command,
    render_pom,
)
from agentledger.stack.procs import last_lines, run_to_end

log = structlog.get_logger(__name__)

MAVEN_TIMEOUT_S = 900.0


class JarEntry(BaseModel):
    """One jar of the set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    size: int
    sha256: str


class JarManifest(BaseModel):
    """The verified jar set of one Kafka version."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kafka_version: str
    jars: tuple[JarEntry, ...]

    @property
    def total_bytes(self) -> int:
        """Size of the whole set."""
        return sum(jar.size for jar in self.jars)


@dataclass(frozen=True)
class JarSet:
    """The result of ensuring the jars: the manifest, and whether (and why) they were fetched."""

    manifest: JarManifest
    fetched: bool
    problems: tuple[str, ...]


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def zip_problem(path: Path) -> str | None:
    """Why ``path`` is not a readable jar, or None when it opens and every entry's CRC holds."""
    try:
        with zipfile.ZipFile(path) as archive:
            if not archive.namelist():
                return f"{path.name} is an empty archive"
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as e:
        return f"{path.name} does not open as a jar ({e})"
    return None if bad is None else f"{path.name} has a corrupt entry {bad}"


def jar_problems(lib: Path, manifest: JarManifest | None) -> list[str]:
    """Everything wrong with the jar directory against its manifest (empty list = usable)."""
    if manifest is None:
        return ["no jar manifest (never fetched, or the fetch did not finish)"]
    problems: list[str] = []
    if manifest.kafka_version != KAFKA_VERSION:
        problems.append(f"jar set is Kafka {manifest.kafka_version}, need {KAFKA_VERSION}")
    listed = {jar.name for jar in manifest.jars}
    problems.extend(f"manifest lacks {name}" for name in REQUIRED_JARS if name not in listed)
    present = {p.name for p in lib.glob("*.jar")} if lib.is_dir() else set()
    problems.extend(f"unexpected jar {name}" for name in sorted(present - listed))
    for jar in manifest.jars:
        path = lib / jar.name
        if jar.name not in present:
            problems.append(f"missing {jar.name}")
        elif path.stat().st_size != jar.size or sha256_of(path) != jar.sha256:
            problems.append(f"{jar.name} differs from its recorded size/sha256")
    return problems


def build_manifest(lib: Path) -> JarManifest:
    """A manifest of the jars now in ``lib``, after checking each opens and the set is complete."""
    problems = [p for jar in sorted(lib.glob("*.jar")) if (p := zip_problem(jar)) is not None]
    names = {p.name for p in lib.glob("*.jar")}
    problems.extend(f"Maven did not deliver {name}" for name in REQUIRED_JARS if name not in names)
    if problems:
        msg = "fetched Kafka jars are unusable: " + "; ".join(problems)
        raise StackError(msg)
    entries = tuple(
        JarEntry(name=jar.name, size=jar.stat().st_size, sha256=sha256_of(jar))
        for jar in sorted(lib.glob("*.jar"))
    )
    return JarManifest(kafka_version=KAFKA_VERSION, jars=entries)


def read_manifest(path: Path) -> JarManifest | None:
    """The stored manifest, or None when absent or unreadable (both mean: fetch again)."""
    try:
        return JarManifest.model_validate(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, ValidationError):
        return None


async def _run_maven(paths: StackPaths, repo_local: Path | None) -> None:
    """Run Maven's copy-dependencies into an emptied jar directory."""
    if shutil.which("mvn") is None:
        msg = "Maven (mvn) is needed to fetch the Kafka jars: run `apt-get install -y maven`"
        raise StackError(msg)
    shutil.rmtree(paths.jars, ignore_errors=True)
    paths.jars.mkdir(parents=True)
    paths.pom.write_text(render_pom())
    argv = maven_command(paths, repo_local)
    log.info("stack_jars_fetching", kafka=KAFKA_VERSION, repo_local=str(repo_local or "~/.m2"))
    try:
        code, out = await run_to_end(argv, MAVEN_TIMEOUT_S)
    except TimeoutError as e:
        msg = f"Maven did not finish fetching the Kafka jars within {MAVEN_TIMEOUT_S:.0f}s"
        raise StackError(msg) from e
    if code != 0:
        msg = f"Maven failed to fetch the Kafka jars (exit {code}):\n{last_lines(out)}"
        raise StackError(msg)


async def fetch_jars(paths: StackPaths) -> JarManifest:
    """Fetch and verify the jar set; if the local Maven cache hands out broken jars, bypass it."""
    paths.kafka.mkdir(parents=True, exist_ok=True)
    paths.jar_manifest.unlink(missing_ok=True)
    await _run_maven(paths, None)
    try:
        manifest = build_manifest(paths.jars)
    except StackError as first:
        # A corrupt jar in ~/.m2 is copied again as is; download into a private repository.
        log.warning("stack_jars_maven_cache_broken", reason=str(first))
        private = paths.kafka / "m2"
        shutil.rmtree(private, ignore_errors=True)
        await _run_maven(paths, private)
        manifest = build_manifest(paths.jars)
    paths.jar_manifest.write_text(manifest.model_dump_json(indent=2) + "\n")
    log.info("stack_jars_ready", jars=len(manifest.jars), bytes=manifest.total_bytes)
    return manifest


async def ensure_jars(paths: StackPaths) -> JarSet:
    """Use the cached jar set if it matches its manifest, otherwise (re)fetch it."""
    manifest = read_manifest(paths.jar_manifest)
    problems = await asyncio.to_thread(jar_problems, paths.jars, manifest)
    if not problems and manifest is not None:
        return JarSet(manifest=manifest, fetched=False, problems=())
    if manifest is not None:
        log.warning("stack_jars_broken", problems=problems)
    fetched = await fetch_jars(paths)
    return JarSet(manifest=fetched, fetched=True, problems=tuple(problems))
