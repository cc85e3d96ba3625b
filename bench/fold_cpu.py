"""``python -m bench.fold_cpu``: CPU per event of the projector's in-process work, no I/O.

What the projector, the rebuild and the SDK share, measured alone with ``time.process_time``:
Avro decode of run-topic records (``decode_records``), the pure fold (admission, digest, apply),
and the encoding of every touched run, step and effect as a view store writes them; then the
rebuild's plain fold of the same batches and its one encoding of each run (``bulk_*``). Runs of
8 events (``sample_run(steps=1)``) arrive in two chunks, as the bench's two transactions per
run: the second chunk folds into the view the first one left (the projector's cache). JSON on
stdout: the least microseconds of CPU per event of each phase over ``--repeats`` passes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

from agentledger.events.codec import EventCodec
from agentledger.projector.applier import Decoded, decode_records
from agentledger.projector.ports import Record
from agentledger.projector.testing import sample_run
from agentledger.views.bulk_fold import PlainRun
from agentledger.views.fold import FoldResult, fold
from agentledger.views.layout import encode_effect, encode_run, encode_step
from agentledger.views.model import RunView


def _records(codec: EventCodec, runs: int, chunk_runs: int) -> list[list[Record]]:
    """Chunks of records: each run's first four events in one chunk, the rest in the next."""
    chunks: list[list[Record]] = []
    for start in range(0, runs, chunk_runs):
        first: list[Record] = []
        second: list[Record] = []
        for n in range(start, min(runs, start + chunk_runs)):
            run_id = f"b{n:07d}"
            events = sample_run(run_id, steps=1)
            for i, event in enumerate(events):
                rec = Record("runs.steps", 0, i, run_id.encode(), codec.encode(event))
                (first if i < 4 else second).append(rec)
        chunks += [first, second]
    return chunks


def _fold_all(batches: list[Decoded]) -> list[FoldResult]:
    """Fold every batch into views born empty (the second chunk of a run into its first's)."""
    views: dict[str, RunView] = {}
    results: list[FoldResult] = []
    for batch in batches:
        for run_id, evs in batch.runs.items():
            view = views.get(run_id) or RunView(run_id=run_id)
            result = fold(view, evs, in_place=True)
            views[run_id] = result.view
            results.append(result)
    return results


def _encode_all(results: list[FoldResult]) -> None:
    """Encode what each fold touched, as a view store writes it."""
    for result in results:
        v = result.view
        encode_run(v, 0, 0)
        for i in result.touched_steps:
            encode_step(v.steps[i])
        for k in result.touched_effects:
            encode_effect(v.effects[k])


def _bulk_fold_all(batches: list[Decoded]) -> list[PlainRun]:
    """The rebuild's plain fold of every batch (views/bulk_fold.py), runs born empty."""
    runs: dict[str, PlainRun] = {}
    for batch in batches:
        for run_id, evs in batch.runs.items():
            run = runs.get(run_id)
            if run is None:
                run = runs[run_id] = PlainRun(run_id)
            run.fold(evs)
    return list(runs.values())


def _bulk_encode_all(runs: list[PlainRun]) -> None:
    """Each run's stored form, as a rebuild writes it once."""
    for run in runs:
        run.stored(0, 0)
        run.index_facts()


def _least(seconds: list[float]) -> float:
    """The least CPU time of the repeats: what the work costs when nothing else interferes."""
    return min(seconds)


def bench(events: int, chunk_runs: int, repeats: int) -> dict[str, float]:
    """Decode, fold and encode ``events`` events ``repeats`` times; the least CPU microseconds
    per event of each phase (on a shared machine the least is the stable figure)."""
    codec = EventCodec()
    chunks = _records(codec, max(1, events // 8), chunk_runs)
    total = sum(len(c) for c in chunks)
    spent: dict[str, list[float]] = {
        "decode": [],
        "fold": [],
        "encode": [],
        "bulk_fold": [],
        "bulk_encode": [],
    }
    for _ in range(repeats):
        gc.collect()  # each pass starts with the same heap, not the last pass's garbage
        t0 = time.process_time()
        batches = [decode_records(codec, chunk) for chunk in chunks]
        t1 = time.process_time()
        results = _fold_all(batches)
        t2 = time.process_time()
        _encode_all(results)
        t3 = time.process_time()
        spent["decode"].append(t1 - t0)
        spent["fold"].append(t2 - t1)
        spent["encode"].append(t3 - t2)
        del results
        gc.collect()
        t4 = time.process_time()
        runs = _bulk_fold_all(batches)
        t5 = time.process_time()
        _bulk_encode_all(runs)
        t6 = time.process_time()
        spent["bulk_fold"].append(t5 - t4)
        spent["bulk_encode"].append(t6 - t5)
    out: dict[str, float] = {"events": total, "repeats": repeats}
    for phase, seconds in spent.items():
        out[f"{phase}_cpu_us_per_event"] = round(_least(seconds) / total * 1e6, 2)
    live = sum(_least(spent[p]) for p in ("decode", "fold", "encode"))
    out["total_cpu_us_per_event"] = round(live / total * 1e6, 2)
    bulk = sum(_least(spent[p]) for p in ("decode", "bulk_fold", "bulk_encode"))
    out["bulk_total_cpu_us_per_event"] = round(bulk / total * 1e6, 2)
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.fold_cpu", description=__doc__)
    p.add_argument("--events", type=int, default=80_000)
    p.add_argument("--chunk-runs", type=int, default=500)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args(argv)
    sys.stdout.write(json.dumps(bench(a.events, a.chunk_runs, a.repeats)) + "\n")


if __name__ == "__main__":
    main()
