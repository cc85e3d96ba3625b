"""In process, no I/O, collector paused: µs of CPU a record of each phase of a rebuild's share
on the bench's records (one partition number's worth): decode alone, event_digest alone,
PartitionFold.add (decode + plain fold), the stored encoding; least of REPEATS passes."""

from __future__ import annotations

import gc
import json
import os
import sys
import time

from agentledger._core.gc_tuning import collector_paused
from agentledger.events.codec import EventCodec
from agentledger.projector.applier import decode_records
from agentledger.projector.bulk import BulkCounts, PartitionFold
from agentledger.views.fold import event_digest

sys.path.insert(0, os.path.dirname(__file__))
from partcpu import records  # type: ignore[import-not-found]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 12_500
    codec = EventCodec()
    recs = records(codec, runs)
    n = len(recs)
    chunks = [recs[i : i + 50_000] for i in range(0, n, 50_000)]
    spent: dict[str, list[float]] = {"decode": [], "digest": [], "add": [], "encode": []}
    for _ in range(int(os.environ.get("REPEATS", "5"))):
        gc.collect()
        with collector_paused():
            t0 = time.process_time()
            decoded = [decode_records(codec, c, located=False) for c in chunks]
            t1 = time.process_time()
            for d in decoded:
                for evs in d.runs.values():
                    for e in evs:
                        event_digest(e)
            t2 = time.process_time()
            del decoded
            part = PartitionFold(codec, BulkCounts(), None, number=0)
            t3 = time.process_time()
            for c in chunks:
                part.add(c)
            t4 = time.process_time()
            for _ in part.fresh_slices(500):
                pass
            t5 = time.process_time()
        spent["decode"].append(t1 - t0)
        spent["digest"].append(t2 - t1)
        spent["add"].append(t4 - t3)
        spent["encode"].append(t5 - t4)
    out: dict[str, object] = {k: round(min(v) / n * 1e6, 2) for k, v in spent.items()}
    out["fold_without_decode"] = round((min(spent["add"]) - min(spent["decode"])) / n * 1e6, 2)
    out["records"] = n
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
