"""The instrumentation hooks (tracing) as the hot paths call them.

Each hook is looked up once, and only if some loaded plugin implements it: without such a
plugin a send, an enqueue, a job's try or a processor's start checks one attribute and
goes on, as if the hooks did not exist. Loading another plugin looks them up again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runnel.plugins import manager

if TYPE_CHECKING:
    from runnel.interfaces import Middleware
    from runnel.plugins.hookspecs import StreamProcessor

Done = Callable[[Any, BaseException | None], None]


@dataclass(frozen=True, slots=True)
class Instruments:
    """The hook callers of the instrumentation hooks, None for those nobody implements."""

    middleware: Any = None
    sending: Any = None
    enqueuing: Any = None
    job_running: Any = None


_NONE = Instruments()
_current: Instruments | None = None
_generation = -1


def instruments() -> Instruments:
    """The instrumentation hooks some loaded plugin implements (looked up once)."""
    global _current, _generation
    found = _current
    if found is not None and _generation == manager.generation:
        return found
    hook = manager.plugin_manager().hook
    callers = {
        name: _caller(hook_caller)
        for name, hook_caller in (
            ("middleware", hook.runnel_processor_middleware),
            ("sending", hook.runnel_sending),
            ("enqueuing", hook.runnel_enqueuing),
            ("job_running", hook.runnel_job_running),
        )
    }
    found = Instruments(**callers) if any(callers.values()) else _NONE
    _current, _generation = found, manager.generation
    return found


def _caller(hook_caller: Any) -> Any:
    """None if no plugin implements the hook; else a function called as the hook is (by
    keyword, each implementation newest first, the answers other than None in a list),
    without pluggy's machinery per call: these run for every job, send and enqueue.
    Wrappers keep pluggy's caller."""
    impls = hook_caller.get_hookimpls()
    if not impls:
        return None
    if any(impl.wrapper or impl.hookwrapper for impl in impls):
        return hook_caller
    every = tuple(hook_caller.spec.argnames) if hook_caller.spec is not None else ()
    calls = [
        (impl.function, None if tuple(impl.argnames) == every else tuple(impl.argnames))
        for impl in reversed(impls)
    ]  # None: it takes every argument, passed on as they came

    def call(**kwargs: Any) -> list[Any]:
        answers = []
        for function, names in calls:
            if names is None:
                answer = function(**kwargs)
            else:
                answer = function(*[kwargs[name] for name in names])
            if answer is not None:
                answers.append(answer)
        return answers

    return call


def plugin_middleware(processor: StreamProcessor) -> list[Middleware]:
    """What plugins put in front of ``processor``'s own middleware (usually nothing)."""
    caller = instruments().middleware
    if caller is None:
        return []
    return list(caller(processor=processor))


def finish(callbacks: list[Done], result: Any, error: BaseException | None) -> None:
    """Call each plugin's end-of-operation callback, newest plugin first."""
    for done in callbacks:
        done(result, error)
