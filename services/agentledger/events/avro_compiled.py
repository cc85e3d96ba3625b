"""The fast Avro readers compiled to C with mypyc: built by ``make venv``, used only when current.

``python -m agentledger.events.avro_compiled`` writes every current schema's reader (the text
:func:`~agentledger.events.avro_fast.reader_source` generates, after
:data:`~agentledger.events.avro_fast.PRELUDE`) as one module, compiles it with mypyc into
``_avro_readers*.so`` beside this file, and deletes the text. That module maps the hash of each
reader's text to its compiled function. At start-up the codec generates the texts as it always
did and takes a compiled function only under the hash of the very same text: a reader whose
text changed since the build (a schema, a model or the generator edited) has no entry and is
exec'd as before, so a stale build is never used. No build (no compiler, or
``make venv NATIVE=0``) means every reader is exec'd, with one log line.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.machinery
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import structlog

from agentledger.events.avro_fast import PRELUDE, Reader, reader_name, reader_source, source_hash
from agentledger.events.codec import HEADER_LEN
from agentledger.events.models import EVENT_BY_NAME
from agentledger.events.schemas import default_schema_set

MODULE = "agentledger.events._avro_readers"

_log = structlog.get_logger(__name__)


def _sources() -> dict[str, str]:
    """Each current event's reader text by event name (events without a fast reader left out)."""
    schemas = default_schema_set()
    found: dict[str, str] = {}
    for name, model in sorted(EVENT_BY_NAME.items()):
        source = reader_source(model, schemas.current[name], HEADER_LEN)
        if source is not None:
            found[name] = source
    return found


def module_source() -> str:
    """The text of the module mypyc compiles: the prelude, every reader, the table by hash."""
    sources = _sources()
    table = "".join(
        f"    {source_hash(src)!r}: {reader_name(EVENT_BY_NAME[name])},\n"
        for name, src in sources.items()
    )
    readers = "".join(sources.values())
    return f"{PRELUDE}{readers}\n\nREADERS: dict[str, Any] = {{\n{table}}}\n"


@functools.cache
def readers() -> dict[str, Reader]:
    """The compiled readers by the hash of their text; empty (one log line) when not built."""
    try:
        module = importlib.import_module(MODULE)
    except ImportError as e:
        _log.info("avro_readers_interpreted", reason=str(e))
        return {}
    where = str(getattr(module, "__file__", ""))
    table = getattr(module, "READERS", None)
    if not where.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)) or not isinstance(
        table, dict
    ):
        _log.info("avro_readers_interpreted", reason=f"{where} is not a compiled module")
        return {}
    return dict(table)


def build() -> Path:
    """Compile the readers with mypyc into ``_avro_readers*.so`` beside this file; its path."""
    from mypyc.build import mypycify  # noqa: PLC0415 - a build-time (dev) dependency

    distribution: Any = importlib.import_module("setuptools").Distribution  # no stubs: Any

    package = Path(__file__).resolve().parent
    root = package.parent.parent  # the directory holding the agentledger package
    source = package / "_avro_readers.py"
    for old in package.glob("_avro_readers*"):
        old.unlink()
    source.write_text(module_source())
    try:
        with tempfile.TemporaryDirectory() as tmp:
            here = Path.cwd()
            os.chdir(tmp)  # no project config: mypyc checks the text with its own defaults
            try:
                modules = mypycify([str(source)], opt_level="3", target_dir=str(Path(tmp, "c")))
                dist = distribution({"name": "agentledger-readers", "ext_modules": modules})
                cmd: Any = dist.get_command_obj("build_ext")
                cmd.inplace = False
                cmd.build_lib = str(root)
                cmd.build_temp = str(Path(tmp, "obj"))
                dist.run_command("build_ext")
            finally:
                os.chdir(here)
    finally:
        source.unlink(missing_ok=True)
    built = sorted(package.glob("_avro_readers*.so"))
    if not built:
        msg = f"mypyc built no _avro_readers module in {package}"
        raise RuntimeError(msg)
    return built[0]


def main(argv: list[str] | None = None) -> int:
    """Build (default) or check that every current reader is served compiled (``--check``)."""
    p = argparse.ArgumentParser(prog="python -m agentledger.events.avro_compiled")
    p.add_argument("--check", action="store_true", help="fail unless every reader is compiled")
    a = p.parse_args(argv)
    if a.check:
        table = readers()
        missing = sorted(n for n, s in _sources().items() if source_hash(s) not in table)
        if missing:
            sys.stderr.write(f"avro readers not compiled (or stale): {', '.join(missing)}\n")
            return 1
        sys.stdout.write(f"{len(table)} compiled avro readers\n")
        return 0
    sys.stdout.write(f"built {build()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
