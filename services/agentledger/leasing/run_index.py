"""The run index: which run ids were ever opened, so that opening a new run needs no log scan.

Every opener claims the run id in the index before it writes anything of the run, so a run
with events in the log has its entry. The index says ``new`` only while it is *whole*: a
sentinel key, set (``vouch``) only when the log holds no run event at all, proves that no
entry was lost since. FLUSHALL removes the sentinel with the entries, and the index says
``unsure`` until it is vouched for again: the opener then reads the log, as it always did.
The index is as durable as the lease store beside it (Redis with its AOF): a Redis restored
from an older snapshot keeps an old sentinel and loses newer entries, as it loses newer fences.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Literal

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from agentledger.coalesce import Coalescer
from agentledger.leasing.redis_store import run_tag
from agentledger.redisclient import RedisKeyspace, is_cluster

Claim = Literal["new", "known", "unsure"]

#: KEYS: the sentinel, each claimed run's entry, then (optional) one key read along; ARGV[1]:
#: the number of entries -> {EXISTS sentinel, then 1 per entry created (SET NX) else 0, then
#: the value read along}: the pipeline's replies, in its order (EXISTS, each SET NX, GET).
CLAIM_MANY = """
local n = tonumber(ARGV[1])
local out = {redis.call('EXISTS', KEYS[1])}
for i = 2, n + 1 do
  out[i] = redis.call('SET', KEYS[i], '1', 'NX') and 1 or 0
end
if #KEYS > n + 1 then
  out[n + 2] = redis.call('GET', KEYS[n + 2])
end
return out
"""


class RunIndex(ABC):
    """Claims run ids; says whether a claimed id is certainly new."""

    @abstractmethod
    async def claim(self, run_id: str) -> Claim:
        """Record ``run_id`` (idempotent) and say what the index knew of it before: ``new``
        (whole, no entry: no event of the run can be in the log), ``known`` (an entry: read
        the log), or ``unsure`` (not known to be whole: read the log)."""

    @abstractmethod
    async def vouch(self) -> None:
        """Declare the index whole. Call only when the log holds no run event at all."""


class MemoryRunIndex(RunIndex):
    """The index in a set; ``flush()`` forgets everything, sentinel included, as FLUSHALL."""

    def __init__(self, *, whole: bool = True) -> None:
        self._runs: set[str] = set()
        self._whole = whole

    def flush(self) -> None:
        """Forget every entry and the sentinel."""
        self._runs.clear()
        self._whole = False

    async def claim(self, run_id: str) -> Claim:
        """See :meth:`RunIndex.claim`."""
        known = run_id in self._runs
        self._runs.add(run_id)
        if not self._whole:
            return "unsure"
        return "known" if known else "new"

    async def vouch(self) -> None:
        """See :meth:`RunIndex.vouch`."""
        self._whole = True


class RedisRunIndex(RedisKeyspace, RunIndex):
    """``<prefix>:{RUN}:opened`` per run (no expiry) and the sentinel ``<prefix>:run-index``."""

    @property
    def sentinel(self) -> str:
        """The key whose presence says the index is whole."""
        return f"{self._prefix}:run-index"

    def key(self, run_id: str) -> str:
        """The entry of one run."""
        return f"{self._prefix}:{{{run_tag(run_id)}}}:opened"

    def __init__(self, client: Redis, **keyspace: Any) -> None:
        super().__init__(client, **keyspace)
        # the claims of runs opened together: one round trip (not on a cluster, whose pipeline
        # does not keep the sentinel's read ahead of the claims on other nodes)
        self._claims: Coalescer[str, Claim] | None = (
            None if is_cluster(client) else Coalescer(self._claim_many, name="run-claims")
        )
        # the same reads and writes in one script (not on a cluster: its keys span slots),
        # registered at the first claim
        self._script: AsyncScript | None = None
        self._along: tuple[str, Callable[[bytes | None], None]] | None = None

    def read_along(self, key: str, seen: Callable[[bytes | None], None]) -> None:
        """Read ``key`` in every claim's round trip and hand its value (None: absent) to
        ``seen``: the views' live-namespace pointer on this same Redis, which a resume's view
        read then need not read first (DESIGN.md §13, "Resume, session 19"). A read, after the
        claims in the same script: what the index answers is unchanged. Not on a Redis
        Cluster (the key is in another slot; the claims are not batched there either)."""
        if is_cluster(self._client):
            msg = "a claim reads no key along on a Redis Cluster"
            raise ValueError(msg)
        self._along = (key, seen)

    async def claim(self, run_id: str) -> Claim:
        """One round trip: is the sentinel there, and was the entry absent (SET NX)?

        Not atomic across the two keys, and it need not be: the sentinel read first means the
        index was whole at that moment, and ``new`` is a statement about the log, which a later
        wipe of Redis does not change. Runs claimed together share the round trip: one
        script reads the sentinel, then sets each entry, in that order (a pipeline on a Redis
        Cluster, one claim at a time).
        """
        if self._claims is not None:
            return await self._claims(run_id)
        return (await self._claim_many([run_id]))[0]

    async def _claim_many(self, run_ids: Sequence[str]) -> list[Claim]:
        along = self._along

        async def ask() -> list[Any]:
            if self._claims is not None:  # not a cluster
                # one call for every claim: a pipeline's replies are parsed one by one in
                # Python, ~15 µs a claim of the worker's CPU (DESIGN.md §13, session 20)
                script = self._script
                if script is None:
                    script = self._script = self._client.register_script(CLAIM_MANY)
                keys = [self.sentinel, *(self.key(run_id) for run_id in run_ids)]
                if along is not None:
                    keys.append(along[0])
                answer: list[Any] = await script(keys=keys, args=[len(run_ids)])
                return answer
            pipe = self._client.pipeline(transaction=False)
            pipe.exists(self.sentinel)
            for run_id in run_ids:
                pipe.set(self.key(run_id), b"1", nx=True)
            if along is not None:
                pipe.get(along[0])
            result: list[Any] = await pipe.execute()
            return result

        replies = await self._guarded(ask)
        if along is not None:
            along[1](replies.pop())
        if int(replies[0]) != 1:
            return ["unsure" for _ in run_ids]
        return ["new" if created else "known" for created in replies[1:]]

    async def vouch(self) -> None:
        """Set the sentinel (kept if already there)."""
        await self._guarded(lambda: self._client.set(self.sentinel, b"1", nx=True))
