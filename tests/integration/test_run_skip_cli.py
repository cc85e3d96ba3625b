"""The operator's way out of one undecodable record in a run's log, on the real stack."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import pytest
from aiokafka import AIOKafkaProducer

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.partitioning import run_key
from agentledger.errors import RunLogCorruptError
from agentledger.events import topic_names
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import isolated_projector, sample_run, settings_env
from tests.conftest import StackUnderTest

pytestmark = pytest.mark.integration


async def agentledger(settings: ProjectorSettings, *args: str) -> tuple[int, str]:
    """``agentledger <args>`` as a child process on ``settings``; (exit code, stdout+stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(settings_env(settings))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentledger.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_skip_record_makes_a_run_with_a_poison_record_readable(
    stack: StackUnderTest,
) -> None:
    """A record nobody can decode under a run's key makes the run unreadable; `runs skip-record`
    at its position (refused at a decodable record's) makes the run's log read without it."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        run_id = f"skip-{uuid.uuid4().hex[:6]}"
        events = sample_run(run_id, steps=1, finish=False)
        steps = topic_names(settings).steps
        assert settings.kafka_bootstrap is not None
        async with KafkaEventLog(settings, transactional_id=f"sk-{run_id}") as log:
            await log.publish(events)
            producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
            await producer.start()
            try:
                meta = await producer.send_and_wait(steps, b"\xffnot avro", key=run_key(run_id))
            finally:
                await producer.stop()
            with pytest.raises(RunLogCorruptError):
                await log.read_run(run_id)
            where = ["--topic", steps, "--partition", str(meta.partition)]
            code, out = await agentledger(
                settings, "runs", "skip-record", run_id, *where, "--offset", "0", "--reason", "x"
            )
            assert code == 2
            assert "only an undecodable record can be skipped" in out
            code, out = await agentledger(
                settings,
                "runs",
                "skip-record",
                run_id,
                *where,
                "--offset",
                str(meta.offset),
                "--reason",
                "truncated by a broken producer",
            )
            assert code == 0, out
            assert [e.seq for e in await log.read_run(run_id)] == [e.seq for e in events]
