"""``python -m bench [--quick] [--json out.json] [--plots DIR] [--peers a,b]``: agentledger next
to LangGraph's checkpointers, DBOS and the one-round-trip floor, on this machine, in one run."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path

from agentledger.settings import CommonSettings
from bench.peers import FULL_ONLY, OPT_IN, OURS, PEERS
from bench.runner import run_bench


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, build the settings at this edge and run the bench."""
    args_list = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--quick", action="store_true", help="under 5 minutes; bytes stop at 1,000 steps"
    )
    p.add_argument("--json", type=Path, help="write every figure and raw sample to this file")
    p.add_argument("--plots", type=Path, help="write PNG plots into this directory")
    p.add_argument(
        "--peers",
        help=f"comma-separated subset of: {', '.join(PEERS)} (default: "
        f"all but {', '.join(sorted(OPT_IN))}; --quick also leaves out "
        f"{', '.join(sorted(FULL_ONLY))})",
    )
    a = p.parse_args(args_list)
    if a.peers:
        peers = [x.strip() for x in a.peers.split(",") if x.strip()]
    else:
        peers = [x for x in PEERS if x not in OPT_IN and not (a.quick and x in FULL_ONLY)]
    unknown = [x for x in peers if x not in PEERS]
    if unknown:
        p.error(f"unknown peers: {', '.join(unknown)}")
    if OURS in peers:  # ours first: the ratio columns read left to right
        peers.remove(OURS)
        peers.insert(0, OURS)

    settings = CommonSettings()
    command = "python -m bench " + " ".join(shlex.quote(x) for x in args_list)
    asyncio.run(
        run_bench(
            settings,
            quick=a.quick,
            peers=peers,
            command=command.strip(),
            json_out=a.json,
            plots_dir=a.plots,
        )
    )


if __name__ == "__main__":
    main()
