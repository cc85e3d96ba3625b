"""How a service bench's ``main`` ends: run the measurement, print its JSON report."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from agentledger.cli import configure_logging


def print_report(
    measure: Callable[[], Coroutine[Any, Any, Mapping[str, Any]]], json_path: Path | None
) -> None:
    """Run ``measure()`` with warnings-only logs (on stderr), print its report as indented JSON
    on stdout and, when ``json_path`` is given, write the same text there too."""
    configure_logging("WARNING")
    report = asyncio.run(measure())
    text = json.dumps(report, indent=2)
    if json_path is not None:
        json_path.write_text(text + "\n")
    sys.stdout.write(text + "\n")
