"""In process, no I/O: one partition number's worth of bench records through PartitionFold
(decode + plain fold) and fresh_slices (stored encoding), collector paused as a share runs.
Prints µs of CPU a record per phase (least of repeats); ``--profile`` prints cProfile's top."""

from __future__ import annotations

import cProfile
import gc
import json
import os
import pstats
import sys
import time

from agentledger._core.gc_tuning import collector_paused
from agentledger.events import RunEvent
from agentledger.events.codec import EventCodec
from agentledger.events.models import AcceptanceEvaluated, EffectIntended, EffectRecorded
from agentledger.projector.bulk import BulkCounts, PartitionFold
from agentledger.projector.ports import Record
from agentledger.projector.testing import sample_run

EFFECTS = (EffectIntended, EffectRecorded)


def records(codec: EventCodec, runs: int) -> list[Record]:
    steps: list[RunEvent] = []
    effects: list[RunEvent] = []
    acc: list[RunEvent] = []
    for n in range(runs):
        rid = f"b{n:07d}"
        for ev in sample_run(rid, steps=1):
            topic = (
                effects
                if isinstance(ev, EFFECTS)
                else acc
                if isinstance(ev, AcceptanceEvaluated)
                else steps
            )
            topic.append(ev)
    out = []
    for name, evs in (("runs.steps", steps), ("runs.effects", effects), ("runs.acceptance", acc)):
        for i, ev in enumerate(evs):
            out.append(Record(name, 0, i, ev.run_id.encode(), codec.encode(ev)))
    return out


def once(codec: EventCodec, recs: list[Record], chunk: int) -> tuple[float, float]:
    counts = BulkCounts()
    part = PartitionFold(codec, counts, None, number=0)
    with collector_paused():
        t0 = time.process_time()
        for i in range(0, len(recs), chunk):
            part.add(recs[i : i + chunk])
        t1 = time.process_time()
        for _ in part.fresh_slices(500):
            pass
        t2 = time.process_time()
    return t1 - t0, t2 - t1


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 12_500
    codec = EventCodec()
    recs = records(codec, runs)
    # interleave like a chunked reader of three topic partitions: keep topic order per chunk
    n = len(recs)
    if "--profile" in sys.argv:
        pr = cProfile.Profile()
        pr.enable()
        once(codec, recs, 50_000)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(30)
        return
    fold, enc = [], []
    for _ in range(int(os.environ.get("REPEATS", "5"))):
        gc.collect()
        a, b = once(codec, recs, 50_000)
        fold.append(a)
        enc.append(b)
    print(
        json.dumps(
            {
                "records": n,
                "decode_fold_us": round(min(fold) / n * 1e6, 2),
                "encode_us": round(min(enc) / n * 1e6, 2),
                "total_us": round((min(fold) + min(enc)) / n * 1e6, 2),
                "load": os.getloadavg(),
            }
        )
    )


if __name__ == "__main__":
    main()
