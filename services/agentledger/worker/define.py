"""Agents, steps, activities and effects as decorated functions (``@agentledger.step`` …).

A decorated function keeps its signature (``ParamSpec``) and its return type. It finds the run
or the step it runs in through context variables set by the SDK, so an agent is plain Python:

    @agentledger.step(accept=lambda amount: amount > 0)
    async def decide(order: str) -> int: ...

An activity or an effect called directly in the agent's body (outside any step) is a step of
its own, named after it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

from agentledger._core.agent import Agent
from agentledger._core.keys import check_name
from agentledger._core.spec import EffectResult, Limits, Metered, RunSpec
from agentledger._core.versions import Policy
from agentledger.errors import ConfigurationError, RunClosedError, UsageError
from agentledger.events.models import FINISHED_STATUSES
from agentledger.providers.protocol import EffectRequest
from agentledger.views import Versions
from agentledger.worker.run import Accept, Run
from agentledger.worker.step import Step

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_RUN: ContextVar[Run | None] = ContextVar("agentledger_run", default=None)
_STEP: ContextVar[Step | None] = ContextVar("agentledger_step", default=None)


def current_run(what: str) -> Run:
    """The run the calling agent body runs in; UsageError outside one."""
    run = _RUN.get()
    if run is None:
        msg = (
            f"{what} was called outside a run: call it from an @agentledger.agent function "
            "started with ledger.run(run_id, agent, ...)"
        )
        raise ConfigurationError(msg)
    return run


class _Invocation:
    """One call of a decorated function as a step body (``body(step)``), with its arguments."""

    def __init__(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs

    async def __call__(self, step: Step) -> Any:
        token = _STEP.set(step)
        try:
            pending = self.fn(*self.args, **self.kwargs)
            if not inspect.isawaitable(pending):
                msg = (
                    f"step {step.name!r} returned {type(pending).__name__}, not an awaitable: "
                    "make its function an `async def`"
                )
                raise UsageError(msg, run_id=step.run_id, step=step.index)
            return await pending
        finally:
            _STEP.reset(token)


def _name_of(fn: Callable[..., Any], name: str | None, what: str) -> str:
    chosen = name or fn.__name__
    check_name(what, chosen)
    return chosen


def _must_be_async(fn: Callable[..., Any], what: str, name: str) -> None:
    if not inspect.iscoroutinefunction(fn):
        msg = (
            f"{what} {name!r} is not an `async def`: the SDK awaits it (run blocking code inside "
            "it with `await asyncio.to_thread(...)`)"
        )
        raise ConfigurationError(msg)


# --- steps ----------------------------------------------------------------------------------


class StepFn(Generic[P, R]):
    """A step: each call is the run's next step, checkpointed once ``accept`` passes."""

    def __init__(
        self,
        fn: Callable[P, Awaitable[R]],
        *,
        name: str | None = None,
        accept: Accept | None = None,
        attempts: int = 1,
    ) -> None:
        self.fn = fn
        self.name = _name_of(fn, name, "step")
        _must_be_async(fn, "step", self.name)
        self.accept = accept
        self.attempts = attempts
        functools.update_wrapper(self, fn)

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run (or replay) this step with these arguments; return its recorded result."""
        run = current_run(f"step {self.name!r}")
        body = _Invocation(self.fn, args, kwargs)
        value = await run.step(self.name, body, accept=self.accept, attempts=self.attempts)
        return cast(R, value)


@overload
def step(fn: Callable[P, Awaitable[R]], /) -> StepFn[P, R]: ...


@overload
def step(
    *, name: str | None = None, accept: Accept | None = None, attempts: int = 1
) -> Callable[[Callable[P, Awaitable[R]]], StepFn[P, R]]: ...


def step(
    fn: Callable[P, Awaitable[R]] | None = None,
    /,
    *,
    name: str | None = None,
    accept: Accept | None = None,
    attempts: int = 1,
) -> StepFn[P, R] | Callable[[Callable[P, Awaitable[R]]], StepFn[P, R]]:
    """``@step`` or ``@step(accept=…, attempts=…, name=…)``: a step of the run.

    ``accept(result)`` returns a bool, a :class:`~agentledger.Check` or a list of them; a failed
    check is recorded and the step tried again, up to ``attempts`` attempts.
    """

    def wrap(f: Callable[P, Awaitable[R]]) -> StepFn[P, R]:
        return StepFn(f, name=name, accept=accept, attempts=attempts)

    return wrap(fn) if fn is not None else wrap


# --- activities -----------------------------------------------------------------------------


class ActivityFn(Generic[P, T]):
    """An activity (a model call, a tool): recorded once per step attempt, with its cost."""

    def __init__(
        self,
        fn: Callable[P, Awaitable[T | Metered[T]]],
        *,
        name: str | None = None,
        kind: str = "model",
        durable: bool = True,
    ) -> None:
        self.fn = fn
        self.name = _name_of(fn, name, "activity")
        _must_be_async(fn, "activity", self.name)
        self.kind = kind
        self.durable = durable
        functools.update_wrapper(self, fn)

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T:
        """The recorded result (``fn`` runs only when this attempt has no record of it)."""
        current = _STEP.get()
        if current is None:  # called by the agent itself: a step of its own
            run = current_run(f"activity {self.name!r}")
            return cast(T, await run.step(self.name, _Invocation(self, args, kwargs)))
        call = functools.partial(self.fn, *args, **kwargs)
        return cast(
            T, await current.activity(self.name, call, kind=self.kind, durable=self.durable)
        )


@overload
def activity(fn: Callable[P, Awaitable[Metered[T]]], /) -> ActivityFn[P, T]: ...


@overload
def activity(fn: Callable[P, Awaitable[T]], /) -> ActivityFn[P, T]: ...


@overload
def activity(
    *, name: str | None = None, kind: str = "model", durable: bool = True
) -> Callable[[Callable[P, Awaitable[T]]], ActivityFn[P, T]]: ...


def activity(
    fn: Callable[P, Awaitable[Any]] | None = None,
    /,
    *,
    name: str | None = None,
    kind: str = "model",
    durable: bool = True,
) -> ActivityFn[P, Any] | Callable[[Callable[P, Awaitable[Any]]], ActivityFn[P, Any]]:
    """``@activity`` or ``@activity(kind=…, durable=…)``: a recorded call; return a
    :class:`~agentledger.Metered` to charge tokens and dollars to the run's budget."""

    def wrap(f: Callable[P, Awaitable[Any]]) -> ActivityFn[P, Any]:
        return ActivityFn(f, name=name, kind=kind, durable=durable)

    return wrap(fn) if fn is not None else wrap


# --- effects --------------------------------------------------------------------------------


class EffectFn(Generic[P]):
    """An effect: the function builds the :class:`~agentledger.EffectRequest`; calling it
    performs the request at most once (intent first, idempotency key, lookup on resume)."""

    def __init__(
        self,
        fn: Callable[P, EffectRequest | Awaitable[EffectRequest]],
        *,
        name: str | None = None,
        provider: str | None = None,
    ) -> None:
        self.fn = fn
        self.name = _name_of(fn, name, "effect")
        self.provider = provider
        functools.update_wrapper(self, fn)

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> EffectResult:
        """Perform (or replay) the effect; its outcome, with the provider's reference."""
        current = _STEP.get()
        if current is None:  # called by the agent itself: a step of its own
            run = current_run(f"effect {self.name!r}")
            recorded = await run.step(self.name, _Invocation(self._recorded, args, kwargs))
            return EffectResult(**recorded)
        return await self._perform(current, args, kwargs)

    async def _recorded(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        current = _STEP.get()
        if current is None:  # only ever run as a step body (_Invocation sets the step)
            raise RunClosedError("the effect's step is not open", run_id="?")
        return dataclasses.asdict(await self._perform(current, args, kwargs))

    async def _perform(self, current: Step, args: Any, kwargs: Any) -> EffectResult:
        request = self.fn(*args, **kwargs)
        if inspect.isawaitable(request):
            request = await request
        if not isinstance(request, EffectRequest):
            msg = (
                f"effect {self.name!r} of step {current.name!r} built {type(request).__name__}: "
                "its function must return an EffectRequest(kind=..., identity={...})"
            )
            raise UsageError(msg, run_id=current.run_id, step=current.index)
        return await current.effect(self.name, request, provider=self.provider)


@overload
def effect(fn: Callable[P, EffectRequest | Awaitable[EffectRequest]], /) -> EffectFn[P]: ...


@overload
def effect(
    *, name: str | None = None, provider: str | None = None
) -> Callable[[Callable[P, EffectRequest | Awaitable[EffectRequest]]], EffectFn[P]]: ...


def effect(
    fn: Callable[P, EffectRequest | Awaitable[EffectRequest]] | None = None,
    /,
    *,
    name: str | None = None,
    provider: str | None = None,
) -> EffectFn[P] | Callable[[Callable[P, EffectRequest | Awaitable[EffectRequest]]], EffectFn[P]]:
    """``@effect`` or ``@effect(provider=…)``: the function returns the request to perform;
    ``provider`` names one of the providers given to ``connect`` (optional when there is one)."""

    def wrap(f: Callable[P, EffectRequest | Awaitable[EffectRequest]]) -> EffectFn[P]:
        return EffectFn(f, name=name, provider=provider)

    return wrap(fn) if fn is not None else wrap


# --- agents ---------------------------------------------------------------------------------


def input_of(args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The run's recorded input: the agent's arguments."""
    return {"args": list(args), "kwargs": dict(kwargs)}


class AgentFn(Agent, Generic[P, R]):
    """An agent function as the one :class:`Agent` definition (a fleet can serve it too)."""

    fn: Callable[P, Awaitable[R]]
    _defaults: tuple[tuple[str, ...], Versions | None, Limits | None, Policy]

    def __init__(
        self,
        fn: Callable[P, Awaitable[R]],
        *,
        name: str | None = None,
        plan: Sequence[str] = (),
        versions: Versions | None = None,
        limits: Limits | None = None,
        version_policy: Policy = "refuse",
    ) -> None:
        chosen = name or fn.__name__
        _must_be_async(fn, "agent", chosen)
        super().__init__(name=chosen, spec=self._spec, body=self._body)
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "_defaults", (tuple(plan), versions, limits, version_policy))
        for attr in ("__module__", "__qualname__", "__doc__"):  # frozen: no update_wrapper
            object.__setattr__(self, attr, getattr(fn, attr, None))
        object.__setattr__(self, "__wrapped__", fn)

    def _spec(self, run_id: str, value: Any) -> RunSpec:
        plan, versions, limits, policy = self._defaults
        return RunSpec(
            run_id=run_id,
            agent=self.name,
            plan=plan,
            input=value,
            versions=versions or Versions(),
            limits=limits or Limits(),
            version_policy=policy,
        )

    async def _body(self, run: Run, value: Any) -> Any:
        """Call the function with the run's input; its return value finishes the run."""
        if run.status not in FINISHED_STATUSES:
            args, kwargs = _arguments(value)
            token = _RUN.set(run)
            try:
                result = await self.fn(*args, **kwargs)
            finally:
                _RUN.reset(token)
            if run.status == "running":
                await run.finish(result)
        return run.result

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Called inside another agent's run: its body, as part of that run."""
        current_run(f"agent {self.name!r}")
        return await self.fn(*args, **kwargs)


def _arguments(value: Any) -> tuple[list[Any], dict[str, Any]]:
    if isinstance(value, dict) and set(value) == {"args", "kwargs"}:
        return list(value["args"]), dict(value["kwargs"])
    return ([] if value is None else [value]), {}


@overload
def agent(fn: Callable[P, Awaitable[R]], /) -> AgentFn[P, R]: ...


@overload
def agent(
    *,
    name: str | None = None,
    plan: Sequence[str] = (),
    versions: Versions | None = None,
    limits: Limits | None = None,
    version_policy: Policy = "refuse",
) -> Callable[[Callable[P, Awaitable[R]]], AgentFn[P, R]]: ...


def agent(
    fn: Callable[P, Awaitable[R]] | None = None,
    /,
    *,
    name: str | None = None,
    plan: Sequence[str] = (),
    versions: Versions | None = None,
    limits: Limits | None = None,
    version_policy: Policy = "refuse",
) -> AgentFn[P, R] | Callable[[Callable[P, Awaitable[R]]], AgentFn[P, R]]:
    """``@agent`` or ``@agent(name=…, versions=…, limits=…)``: an agent; start or resume a run
    of it with ``await ledger.run(run_id, agent, *args)``. Its return value is the run's result.
    """

    def wrap(f: Callable[P, Awaitable[R]]) -> AgentFn[P, R]:
        return AgentFn(
            f, name=name, plan=plan, versions=versions, limits=limits, version_policy=version_policy
        )

    return wrap(fn) if fn is not None else wrap
