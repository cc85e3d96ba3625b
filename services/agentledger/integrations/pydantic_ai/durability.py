"""``AgentLedgerDurability``: the Pydantic AI capability that records an agent's run in agentledger.

It is built on Pydantic AI's durable-execution extension point (the base its Temporal, DBOS and
Prefect integrations use): the base routes every model request and tool call through a
:class:`~pydantic_ai.durable_exec.CallableOperationBackend`, whose ``execute`` here runs each one
as a step of the agentledger run opened by :func:`~agentledger.integrations.pydantic_ai.run_agent`.
Outside such a run the agent behaves as if the capability were not there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    DurableOperationBackend,
    DurableOperationId,
    JournalCallableOperationBackend,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
    ToolsetValidateToolArgumentsId,
)
from pydantic_ai.tools import AgentDepsT

from agentledger.errors import ConfigurationError
from agentledger.integrations.pydantic_ai.units import Price, current_run

ENGINE = "agentledger"


class LedgerOperationBackend(JournalCallableOperationBackend[None]):
    """Runs each durable unit of a Pydantic AI run as the run's next agentledger step."""

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: None,
    ) -> object:
        """Model requests and tool calls become steps; argument validation runs in place."""
        del cache_key, config
        units = current_run()
        if units is None:
            msg = "a durable unit ran outside an agentledger run (run the agent with run_agent)"
            raise ConfigurationError(msg)
        if isinstance(operation_id, ToolsetValidateToolArgumentsId):
            return await body()  # pure and cheap: validating again on replay is the same answer
        if isinstance(operation_id, ModelRequestId):
            return await units.model(name, body)
        if isinstance(operation_id, ToolsetCallToolId):
            return await units.tool(name, name.rpartition(":")[2], body)
        return await units.other(name, body)


@dataclass(init=False, kw_only=True)
class AgentLedgerDurability(BaseDurabilityCapability[AgentDepsT]):
    """Makes an agent durable on agentledger: add it to ``Agent(capabilities=[...])``.

    Run the agent with :func:`~agentledger.integrations.pydantic_ai.run_agent`. ``price``
    turns a response's usage (``input_tokens``, ``output_tokens`` …) and model name into
    dollars for the run's USD budget; without it only tokens are charged.
    """

    engine_spec = DurabilityEngineSpec(
        engine_name=ENGINE,
        durable_unit_noun="step",
        durable_unit_plural="steps",
        durable_container_noun="run",
        codec=JSON_CODEC,  # what a step records is JSON
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=True,
        # Steps are numbered in the order units ask for them: tool calls must not interleave.
        sequential_tools_in_durable_context=True,
        tool_config_key=None,
    )

    def __init__(self, *, name: str | None = None, price: Price | None = None) -> None:
        super().__init__(name=name)
        self.price = price

    @property
    def in_durable_context(self) -> bool:
        """True while :func:`run_agent` has an agentledger run open around the agent."""
        return current_run() is not None

    def get_default_run_id(self) -> str | None:
        """The agentledger run id (one agent run is one agentledger run)."""
        units = current_run()
        return units.run.run_id if units is not None else None

    async def get_run_start_time(self, run_id: str) -> datetime | None:
        """When the run first started, so a run's timeout counts across resumes."""
        del run_id
        units = current_run()
        if units is None or not units.run.view.started_at:
            return None
        return datetime.fromtimestamp(units.run.view.started_at / 1000, tz=UTC)

    def get_durable_operation_backend(self) -> DurableOperationBackend[None]:
        """The backend that turns units into steps."""
        config: RoleBasedOperationConfig[None] = RoleBasedOperationConfig(
            model=None, event=None, capability=None, tool=None
        )
        return LedgerOperationBackend(
            agent_name=self.name, default_model_id=self.default_model_id, config=config
        )
