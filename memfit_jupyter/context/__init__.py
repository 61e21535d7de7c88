"""Context tiers, long-horizon plans and the failure diary: one extension of the loop.

- ``tiers``: the MemGPT main context (memory blocks + FIFO queue), recall and
  archival, with the 70 % / 100 % watermarks and the recursive summary;
- ``memtools``: the five memory tools the agent pages with;
- ``longhorizon``: ``plan=`` / ``progress=`` files that a crashed run resumes from;
- ``diary``: ``oracle=`` / ``max_trials=``, the Reflexion trial loop.

How they fit the stepwise loop: when a plan or an oracle is set, the extension
provides its own ``finish`` tool.  ``finish`` runs the oracle (a failure is a
failed action), and with a plan marks the current feature as passing and moves
on to the next one instead of ending the run.  ``after_action`` then turns a
failed oracle into a lesson (or ends the run as escalated), and the next
``before_iteration`` gives the new trial or feature a fresh queue (the old one
goes to recall).  Everything stays one ``Run``, with ``trial`` and ``context``
events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..errors import Escalated, Finished, RunFailed
from ..extension import Hooks
from ..llm.client import DEFAULT_MAX_TOKENS
from ..records import ActionRecord, RunResult, ToolResult
from ..tools import Param, Tool, ToolContext
from .diary import FailureDiary, failures
from .longhorizon import LongHorizon, PlanError
from .memtools import memory_tools, store_of, wants_heartbeat
from .tiers import ContextConfig, TieredContext

if TYPE_CHECKING:
    from ..protocols import RunView

__all__ = ["ContextConfig", "ContextExtension", "TieredContext", "extension_for", "failures",
           "wants_heartbeat"]


def extension_for(run: RunView) -> ContextExtension:
    """The context extension of ``run`` (every run has one: the memory tools are always there)."""
    return ContextExtension(run)


class ContextExtension(Hooks):
    """Hooks of the tiered context, the long-horizon plan and the failure diary for one run;
    provides ``context`` (itself: the widget reads the gauge and the summary from it)."""

    def __init__(self, run: RunView):
        agent = run.agent
        self.run = run
        self.tiers = TieredContext(getattr(agent, "context_config", None) or ContextConfig())
        self.plan = LongHorizon(agent.workdir, agent.plan, agent.progress) \
            if (agent.plan or agent.progress) else None
        self.diary = FailureDiary(agent) if agent.oracle is not None else None
        self._reset_note: str | None = None
        if self.plan is not None:
            self.tiers.on_flush.append(self.plan.note_flush)

    def provides(self) -> dict[str, Any]:
        return {"context": self}

    # --- hooks ------------------------------------------------------------------------
    def tools(self) -> list[Tool]:
        tools = memory_tools(self.tiers, self.run)
        if self.diary is not None or (self.plan is not None and self.plan.plan_path is not None):
            tools.append(Tool("finish", self._finish_description(), {"answer": Param()}, self._finish))
        return tools

    def on_start(self, run: RunView) -> None:
        self.tiers.window, self.tiers._counter = _window(run), _counter(run)
        if self.tiers.window and not run.agent.model.startswith("memfit/"):
            # A real model's server refuses a prompt over its window, and the reply must fit
            # beside the prompt: flush early enough to leave it room, and learn from the
            # prompt sizes the provider reports how far the counter is off (its tokenizer).
            cap = run.llm.max_output_tokens or DEFAULT_MAX_TOKENS
            self.tiers.reserve = min(cap, self.tiers.window // 4)
            run.subscribe(self._calibrate, ev.ModelCall)
        if self.plan is None:
            return
        try:
            self.plan.load()
        except PlanError as exc:
            raise RunFailed(str(exc)) from None
        if self.plan.plan_path is not None and self.plan.current is None:
            raise Finished(f"every feature of {self.plan.plan_path.name} already passes",
                           answer=f"All {len(self.plan.features)} feature(s) already pass; nothing to do.")
        note = self.plan.resume_note()
        if note:
            run.emit(ev.Note(text=note, timeline="append"))

    def before_iteration(self, run: RunView) -> None:
        if self.diary is not None and not self.diary.retrieved:
            self.diary.retrieve(run, store_of(run))
        if self._reset_note is not None:
            self._fresh_queue(run, self._reset_note)
            self._reset_note = None
        self.tiers.check(run)

    def system_sections(self, run: RunView) -> list[str]:
        section = self.tiers.section(run.tools)
        sections = [section] if section else []
        if self.plan is not None:
            sections.append(self.plan.section())
        if self.diary is not None:
            sections.append(self.diary.section())
        return sections

    def after_action(self, run: RunView, record: ActionRecord) -> None:
        block = self.tiers.blocks.get(record.data.get("block", "")) if record.ok else None
        if block is not None:  # the edit travels in the record, so a replay edits the block too
            block.value = str(record.data.get("block_value", block.value))
        if record.tool != "finish":
            return
        verdict = record.data.get("oracle")
        if verdict is not None and self.diary is not None:
            self._after_oracle(run, record, verdict, self.diary)
        if record.data.get("feature_done") is not None and not record.data.get("final"):
            saved = f"committed as {record.data['commit']}" if record.data.get("commit") else "recorded"
            self._reset_note = (f"[NEXT FEATURE] {record.data['feature_done']} passes ({saved}). "
                                f"Now working on: {record.data.get('next')}.")

    def on_finish(self, run: RunView, result: RunResult) -> None:
        if self.plan is None:
            return
        if self.plan.plan_path is None:
            if result.status == "done":
                self.plan.append_progress(f"done: {run.task[:80]} — {' '.join(str(result.answer).split())[:300]}")
        elif result.status != "done" and self.plan.current is not None:
            self.plan.append_progress(f"stopped ({result.status}) during {self.plan.current['id']}: "
                                      f"{' '.join(result.reason.split())[:200]}")

    def _calibrate(self, event: ev.ModelCall) -> None:
        """After the first attempt of an action or summary call (whose prompts are known here):
        the provider's count of the prompt against the tiers' own."""
        sent = {"action": self.run.last_prompt, "summary": self.tiers.summary_messages}.get(event.purpose)
        if sent and event.attempt == 1 and event.prompt_tokens:
            self.tiers.calibrate(sent, event.prompt_tokens)

    # --- finish, the oracle and trials ------------------------------------------------
    def _finish_description(self) -> str:
        if self.diary is not None:
            return "end the attempt with the final answer; an external check (the oracle) then judges it"
        return "the current feature is done: give a one-line summary; the next feature follows"

    def _finish(self, ctx: ToolContext, answer: str) -> ToolResult:
        data: dict[str, Any] = {}
        if self.diary is not None:
            verdict = self.diary.judge(self.run)
            data["oracle"] = verdict
            if not verdict["passed"]:
                return ToolResult(output=verdict["output"], ok=False, data=data, error=(
                    f"the oracle failed trial {verdict['trial']} of {self.diary.max_trials}"))
        if self.plan is not None and self.plan.plan_path is not None:
            info = self.plan.mark_done(answer)
            data.update(info)
            if info.get("commit"):
                self.run.emit(ev.Note(text=f"checkpoint {info['commit']}: feat: {info['feature_done']}"))
            if not info["final"]:
                return ToolResult(output=f"feature {info['feature_done']} passes; next: {info['next']}",
                                  data=data)
        data["final"] = True
        return ToolResult(output=answer, data=data)

    def _after_oracle(self, run: RunView, record: ActionRecord, verdict: dict[str, Any], diary: FailureDiary) -> None:
        fields = {"trial": verdict["trial"], "max_trials": diary.max_trials, "passed": verdict["passed"],
                  "oracle_output": verdict["output"]}
        if verdict["passed"]:
            run.emit(ev.Trial(**fields, lesson=None))
            diary.trial = 1  # a plan's next feature gets its own trials
            return
        if verdict.get("not_found"):  # no trial can pass: no lesson drawn, no trial spent on it
            run.emit(ev.Trial(**fields, lesson=None))
            raise Escalated(f"the oracle command could not be run ({verdict['not_found']}); fix the oracle and "
                            "run again", answer=record.params.get("answer"))
        lesson = diary.reflect(run, verdict["output"])
        diary.lessons.append(lesson)
        diary.store(run, store_of(run), lesson, verdict["output"])
        run.emit(ev.Trial(**fields, lesson=lesson))
        if diary.trial >= diary.max_trials:
            raise Escalated(f"the oracle still fails after {diary.max_trials} trial(s); a person should decide "
                            f"what to do. Last lesson: {lesson}", answer=record.params.get("answer"))
        diary.trial += 1
        self._reset_note = (f"[TRIAL {diary.trial}/{diary.max_trials}] The previous attempt failed the oracle. "
                            f"Lesson: {lesson}")

    def more_trials(self, run: RunView, extra: int) -> int:
        """Give an escalated run ``extra`` more trials and reopen it (``step()``/``run()`` go on).

        The choice is a ``escalation`` event; returns the new ``max_trials``.
        """
        if self.diary is None or run.status != "escalated":
            raise RuntimeError("only a run that the failure diary escalated can get more trials")
        if isinstance(extra, bool) or not isinstance(extra, int) or extra < 1:
            raise ValueError(f"extra trials must be a positive integer, got {extra!r}")
        diary = self.diary
        diary.max_trials += extra
        diary.trial += 1
        run.emit(ev.Escalation(choice="more_trials", extra_trials=extra, max_trials=diary.max_trials))
        lesson = diary.lessons[-1] if diary.lessons else "none yet"
        self._reset_note = (f"[TRIAL {diary.trial}/{diary.max_trials}] The person allowed {extra} more trial(s) "
                            f"after the oracle kept failing. Lesson: {lesson}")
        run.reopen()  # step() goes on from where the run stopped
        return diary.max_trials

    def _fresh_queue(self, run: RunView, note: str) -> None:
        """A new trial or feature: the old queue goes to recall; the task and a note remain."""
        self.tiers.recall.extend(run.timeline.queue())
        self.tiers.summary, self.tiers.warned = None, False
        run.emit(ev.Note(text=note, timeline="reset"))


def _window(run: RunView) -> int | None:
    """The model's context window: ``context_window=``, else the backend's figure (a scenario's,
    the model's server's at a custom api_base, litellm's); a live model with none refuses to start."""
    window = run.agent.context_window
    if window is not None:
        if int(window) < 1:
            raise RunFailed(f"context_window must be a positive number of tokens, got {window}")
        return int(window)
    model = run.agent.model
    if not model.startswith("memfit/"):  # litellm's figure: imported under the run's time budget
        from ..reliability.guarantees import load_model_library

        load_model_library(run)
    try:
        window = run.backend.context_window(model)
    except Exception:
        window = None
    if not window and model.startswith("memfit/"):  # a replay backend does not know scenarios
        from ..llm.scenarios import load_scenario

        window = load_scenario(model.split("/", 1)[1]).context_window
    from ..llm.backend import LiteLLMBackend

    if not window and isinstance(run.backend, LiteLLMBackend):
        from ..errors import UnknownModelError
        from ..llm.backend import check_model

        try:  # a model no provider serves is that, before its window is a question
            check_model(model)
        except UnknownModelError as exc:
            raise RunFailed(str(exc).splitlines()[0]) from None
        base = run.backend.model_options.get(model, {}).get("api_base")
        if base:
            from ..llm.served import reachable

            if not reachable(str(base)):
                # Nothing to ask: the first call says the server is unreachable, and a fallback
                # tier (whose window is asked then) can still answer.
                return None
        where = f"its server at {base} does not say" if base else "no api_base server to ask"
        raise RunFailed(f"the context window of {model} is unknown (litellm has no entry for it, {where}): "
                        "give it with --context-window N (context_window=N), in tokens")
    return window or None


def _counter(run: RunView) -> Callable[[str], int]:
    from .tiers import litellm_counter

    return litellm_counter(run.agent.model)
