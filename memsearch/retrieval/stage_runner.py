"""The LLM stages of one search: which run, within what latency budget, and the trace of each.

Every call goes through `StageRunner.ask`, which never raises: a stage that cannot run (no endpoint,
the budget, a failure of the endpoint) is recorded as skipped with its reason, and the search goes
on without it. `--max-ms` plans first: the LLM calls are expected to take the endpoint's measured
latency each (nothing when the answer is cached), and while they would not fit HyDE is dropped,
then re-ranking, then expansion (intent and synthesis); each call's timeout is also cut to what is
left of the budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # imported by a search that asks an endpoint (most have none configured)
    from memsearch.llm import LLM, Message

T = TypeVar("T")

# Budget order: what `--max-ms` gives up first.
SKIP_ORDER = ("hyde", "rerank", "expansion")
STAGE_GROUP = {"intent": "expansion", "synthesis": "expansion", "hyde": "hyde", "rerank": "rerank"}
MAX_TOKENS = {"intent": 120, "synthesis": 200, "hyde": 200, "rerank": 300}


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class StageTrace:
    """What one LLM stage did in a search (the trace --explain shows)."""

    stage: str  # intent | synthesis | hyde | rerank | diverse
    status: str  # ran | cached | skipped
    reason: str | None = None
    ms: float | None = None
    output: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "status": self.status, "reason": self.reason, "ms": self.ms, "output": self.output}

    def line(self) -> str:
        """`expansion: skipped (timeout after 2.0 s)` as the explain trace shows it."""
        if self.status == "skipped":
            return f"{self.stage}: skipped ({self.reason})"
        timing = "cached" if self.status == "cached" else f"{self.ms:.0f} ms" if self.ms is not None else "ran"
        return f"{self.stage}: {timing}" + (f" ({self.reason})" if self.reason else "")


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class StageRunner:
    """Runs a search's LLM stages against the time budget, recording each one's trace."""

    llm: LLM | None
    stages: Sequence[str]  # the LLM stages the profile and request want, in order
    max_ms: int | None = None
    trace: list[StageTrace] = field(default_factory=list)
    skipped_groups: dict[str, str] = field(default_factory=dict)  # group → reason (from the plan)
    endpoint_failure: str | None = None  # once the endpoint failed, later stages do not wait on it again
    started: float = field(default_factory=time.perf_counter)

    def plan(self, cached: Callable[[str], bool]) -> None:
        """With a budget, drop what would not fit (see the module doc); `cached(stage)` says
        whether that stage's answer is known to be cached already."""
        if self.llm is None or self.max_ms is None:
            return
        estimate = self.llm.estimate_ms()
        cost = {stage: 0.0 if cached(stage) else estimate for stage in self.stages}
        groups = {STAGE_GROUP[s] for s in self.stages}
        for group in SKIP_ORDER:
            total = sum(c for s, c in cost.items() if STAGE_GROUP[s] not in self.skipped_groups)
            if total <= self.max_ms:
                return
            if group in groups:
                self.skipped_groups[group] = (
                    f"--max-ms {self.max_ms}: the LLM calls would take about {total:.0f} ms at {estimate:.0f} ms each"
                )

    def remaining_ms(self) -> float | None:
        if self.max_ms is None:
            return None
        return self.max_ms - (time.perf_counter() - self.started) * 1000

    def wants(self, stage: str) -> bool:
        return stage in self.stages

    def skip(self, stage: str, reason: str) -> None:
        self.trace.append(StageTrace(stage, "skipped", reason))

    def ask(self, stage: str, messages: Sequence[Message], parse: Callable[[str], T]) -> T | None:
        """The parsed answer, or None with the stage recorded as skipped and why."""
        if self.llm is None:
            self.skip(stage, "no LLM endpoint configured")
            return None
        if (reason := self.skipped_groups.get(STAGE_GROUP[stage])) is not None:
            self.skip(stage, reason)
            return None
        if self.endpoint_failure is not None:
            self.skip(stage, f"{self.endpoint_failure}, earlier in this search")
            return None
        timeout = self.llm.timeout_s
        if (left := self.remaining_ms()) is not None:
            if left <= 0 and not self.llm.is_cached(messages):
                self.skip(stage, f"--max-ms {self.max_ms}: the budget is spent")
                return None
            timeout = min(timeout, max(left, 1.0) / 1000)
        from memsearch.llm import LLMFailure, repeats_prompt

        try:
            answer = self.llm.complete(messages, max_tokens=MAX_TOKENS[stage], timeout_s=timeout)
        except LLMFailure as failure:
            self.endpoint_failure = str(failure)
            self.skip(stage, str(failure))
            return None
        try:
            if repeats_prompt(answer.text, messages):
                raise LLMFailure("malformed reply (repeats the prompt)")
            value = parse(answer.text)
        except LLMFailure as failure:  # this answer only: the next stage may well parse
            self.skip(stage, str(failure))
            return None
        self.trace.append(StageTrace(stage, "cached" if answer.cached else "ran", None, answer.ms, _shown(value)))
        return value

    def note(self, stage: str, reason: str, output: Any = None) -> None:
        """A stage that ran without the LLM (deterministic re-ranking, diverse assembly)."""
        self.trace.append(StageTrace(stage, "ran", reason, None, output))


def _shown(value: Any) -> Any:
    """A parsed answer as JSON."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return list(value)
    return value
