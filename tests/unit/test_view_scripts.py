"""The Lua scripts of the Redis view store share their per-run index body."""

from __future__ import annotations

from agentledger.views import scripts


def test_commit_and_update_indexes_apply_index_entries_with_one_body() -> None:
    """Both scripts that write index entries carry the same fragment, exactly once each."""
    body = scripts.INDEX_ENTRIES
    assert scripts.COMMIT.count(body) == 1
    assert scripts.UPDATE_INDEXES.count(body) == 1
    assert scripts.COMMIT.count("redis.call('ZADD', parked, 'NX', now, run)") == 1
    assert scripts.UPDATE_INDEXES.count("redis.call('ZADD', parked, 'NX', now, run)") == 1
