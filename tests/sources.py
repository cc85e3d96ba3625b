"""Parsing Python source in tests that scan the code base.

CPython 3.11's ``ast.parse`` can fail with ``SystemError: AST constructor recursion depth
mismatch`` when the garbage collector runs finalizers of objects other tests left behind (aiokafka
connections, futures) while it builds the tree; it was seen after the Kafka event-log tests in
one session. Parsing with the collector paused makes the scans independent of what ran before.
"""

from __future__ import annotations

import ast
import gc


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source)`` with the garbage collector paused while it runs."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, filename)
    finally:
        if enabled:
            gc.enable()
