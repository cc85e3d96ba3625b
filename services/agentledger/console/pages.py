"""The console's HTML: one Jinja environment with autoescaping on, and its filters."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jinja2

from agentledger.events.models import now_ms

_PRETTY_LIMIT = 4000


def ago(ms: int | None) -> str:
    """``12s ago`` / ``in 5s`` for a time in ms since the epoch, ``-`` for none."""
    if not ms:
        return "-"
    seconds = (now_ms() - ms) / 1000
    return f"{seconds:.0f}s ago" if seconds >= 0 else f"in {-seconds:.0f}s"


def pretty(text: str | None) -> str:
    """JSON text indented for reading (clipped); other text as it is. Escaped by the template."""
    if text is None:
        return ""
    try:
        shown = json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False)
    except ValueError:
        shown = text
    return shown if len(shown) <= _PRETTY_LIMIT else shown[:_PRETTY_LIMIT] + "\n…"


def environment() -> jinja2.Environment:
    """Templates shipped in the package; every value is HTML-escaped unless marked safe."""
    folder = resources.files("agentledger.console") / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ago"] = ago
    env.filters["pretty"] = pretty
    return env


def static_file(name: str) -> bytes:
    """A file of the package's ``static`` folder."""
    return (resources.files("agentledger.console") / "static" / name).read_bytes()


def render(env: jinja2.Environment, template: str, **context: Any) -> str:
    """``template`` rendered with ``context``."""
    return env.get_template(template).render(**context)
