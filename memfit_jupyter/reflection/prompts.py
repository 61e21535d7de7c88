"""The prompts of reflection and spin analysis, and the texts they put in the timeline.

The timeline wording follows the reference design (MECHANISMS.md §1.3 stage 4, §2.3, §2.5); its
Chinese spin texts are given in English with the same structure and markers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..llm.prompts import json_system
from ..records import ActionRecord, ReflectionLevel
from .records import ActionReflection, SpinDetectionResult

#: The observation of an action is clipped to this many characters in an analysis prompt.
OBSERVATION_CHARS = 1200

LEVEL_GUIDANCE = {
    ReflectionLevel.STANDARD: "Evaluate the basic impact of the action on the task.",
    ReflectionLevel.DEEP: "Analyse in detail what the action changed in its environment and what follows from it.",
    ReflectionLevel.CRITICAL: "The action failed: find the root cause and say how to avoid it.",
}

#: MECHANISMS.md §2.1: the suggestions layer 1 gives on its own.
LAYER1_SUGGESTIONS = [
    "Try a different action type",
    "Check that the goal of the task is clear",
    "Consider whether the user needs to clarify something",
]


def _params(params: dict[str, Any]) -> str:
    return json.dumps(params, ensure_ascii=False, sort_keys=True, default=str)


def _clip(text: str, limit: int = OBSERVATION_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} characters cut]"


def outcome_line(record: ActionRecord) -> str:
    # Scenario rules match on "Outcome: FAILED", so keep this wording.
    return "Outcome: SUCCEEDED" if record.ok else f"Outcome: FAILED: {record.error}"


def reflection_messages(task: str, record: ActionRecord, level: ReflectionLevel, impact: dict[str, Any],
                        memory: Sequence[str], timeline: str, spin: SpinDetectionResult | None) -> list[dict[str, str]]:
    """The prompt of a reflection call at ``level`` (STANDARD and up)."""
    system = json_system(
        "reflection",
        f"You reflect on one action that an agent just took, at reflection level {level.name}. "
        f"{LEVEL_GUIDANCE.get(level, '')} Judge its effect on the environment and on the task, and "
        "give concrete, short suggestions for the next actions.",
        "summary (one sentence), suggestions [str], impact {state_changes, side_effects, "
        "positive_effects, negative_effects} (lists of str), is_spinning (bool), spin_reason",
    )
    parts = [
        f"Task: {task}",
        f"Iteration: {record.iteration}",
        f"Action type: {record.action_type}",
        f"Tool: {record.tool}",
        *([f"Thought: {record.thought}"] if record.thought else []),
        f"Parameters: {_params(record.params)}",
        outcome_line(record),
        f"Observation:\n{_clip(record.output) or '(no output)'}",
        f"Measured impact: {json.dumps(impact, ensure_ascii=False, default=str)}",
    ]
    if spin is not None and spin.is_spinning:
        parts.append(f"Spin detected ({spin.detector}): {spin.reason}")
    if memory:
        parts.append("## Relevant memory\n" + "\n".join(f"- {m}" for m in memory))
    if timeline:
        parts.append("## Recent timeline\n" + timeline)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


def spin_messages(task: str, recent: Sequence[ActionRecord], timeline: str) -> list[dict[str, str]]:
    """Layer 2 (MECHANISMS.md §2.2): the model judges whether the last actions are a spin."""
    system = json_system(
        "spin",
        "You are an expert in analysing the behaviour of AI agents. Analyse the action history "
        "below and decide whether the agent is SPINNING.\n\nDefinition of SPIN: the agent makes the "
        "same or similar decisions again and again, and the task does not move forward.",
        "is_spinning (bool: is the agent spinning), reason (if it is, why), suggestions [str] "
        "(how to break the loop), next_actions [str] (concrete next steps), is_task_progressing "
        "(bool: the task moves forward despite the repetition)",
    )
    failed = sum(1 for r in recent if not r.ok)
    parts = [f"Task: {task}", "", "## Action history", ""]
    for n, r in enumerate(recent, 1):
        parts += [
            f"### Execution {n} (iteration {r.iteration})",
            f"- Action type: {r.action_type}",
            f"- Action name: {r.tool}",
            f"- Action parameters:\n```json\n{_params(r.params)}\n```",
            f"- {outcome_line(r)}",
            f"- Observation: {_clip(r.output, 400) or '(no output)'}",
            "",
        ]
    # Scenario rules match on this line, so keep its wording.
    parts.append(f"{failed} of the last {len(recent)} actions failed.")
    if timeline:
        parts += ["", "## Timeline context", "", timeline]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


def reflection_timeline_text(reflection: ActionReflection) -> str:
    """Stage 4: the reflection as the model will read it (the reference design's wording)."""
    if reflection.success:
        lines = [f"✓ [REFLECTION] Action '{reflection.action_type}' EXECUTED SUCCESSFULLY"]
    else:
        lines = [f"✗ [CRITICAL REFLECTION] Action '{reflection.action_type}' FAILED"]
        if reflection.error_message:
            lines.append(f"Error: {reflection.error_message}")
    if reflection.summary:
        lines.append(reflection.summary)
    if reflection.suggestions:
        lines.append("MANDATORY RECOMMENDATIONS FOR FUTURE ACTIONS:")
        lines += [f"{i}. {s}" for i, s in enumerate(reflection.suggestions, 1)]
    return "\n".join(lines)


#: The closing line of each successive warning: each one firmer than the last.
FIRMNESS = (
    "Change your approach before the next action.",
    "SECOND WARNING: you are still going round in circles. Do NOT repeat any of the recent actions; "
    "take one of the next actions above.",
    "FINAL WARNING: this is the last warning. If the next actions repeat the loop again, the run "
    "will be stopped.",
)


def firmness_line(warning: int, max_warnings: int) -> str:
    """The closing line of warning number ``warning`` (1-based): firmer each time."""
    if max_warnings and warning >= max_warnings:
        return f"{FIRMNESS[2]} (warning {warning} of {max_warnings})"
    if warning <= 1:
        return FIRMNESS[0]
    return FIRMNESS[1] + (f" (warning {warning})" if warning > 2 else "")


def spin_warning_text(results: Sequence[SpinDetectionResult], warning: int, max_warnings: int) -> str:
    """The spin warning (MECHANISMS.md §2.5): what the model reads once a spin is confirmed."""
    first = results[0]
    reasons = [r.reason for r in results if r.reason]
    suggestions: list[str] = []
    next_actions: list[str] = []
    for r in results:
        suggestions += [s for s in r.suggestions if s not in suggestions]
        next_actions += [a for a in r.next_actions if a not in next_actions]
    lines = ["⚠️ [SPIN DETECTED] The AI agent is stuck in a loop", "",
             f"**Action type**: {first.action_type}"]
    lines.append("**Reason**: " + " ".join(reasons))
    lines.append("")
    if suggestions:
        lines.append("**Suggestions**:")
        lines += [f"{i}. {s}" for i, s in enumerate(suggestions, 1)]
    if next_actions:
        lines.append("**Next actions**:")
        lines += [f"{i}. {a}" for i, a in enumerate(next_actions, 1)]
    lines += ["", firmness_line(warning, max_warnings)]
    return "\n".join(lines)


def code_spin_text(start: int, end: int, reason: str) -> str:
    """The targeted intervention (MECHANISMS.md §2.3) after small edits in the same region."""
    return f"""[CODE MODIFICATION SPIN WARNING]

{reason}

Stop and reflect: answer the following questions.

[Question 1: value of the change]
What is the goal of this change to lines {start}-{end}? Compared with the last few changes, what new value or progress does it bring?

[Question 2: other paths]
If you do not keep changing these lines, what other solutions are there?
List at least 3 strategies at different levels:
- adjust the data or the variables
- restructure the algorithm or the logic
- change how the interface or API is called
- use a different library or helper function

[Question 3: search first]
Before changing anything else, strongly consider searching for the right code pattern first...

[What to do]
Choose the strategy with the highest gain and the lowest risk, and say why.

Do not keep making small edits at the same place!"""
