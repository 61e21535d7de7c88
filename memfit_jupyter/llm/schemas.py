"""One pydantic schema per purpose of a model call.

A reply that does not validate against its purpose's schema is repaired or
asked for again (see ``client.LLMClient``); it is never silently dropped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator


class NextAction(BaseModel):
    thought: str = ""
    action_type: str = Field(description="a short verb for the kind of action, e.g. explore, compute, answer")
    tool: str
    params: dict[str, Any] = Field(default_factory=dict)
    #: An optional reflection level the model asks for on this action.
    reflection: str | None = None


class Impact(BaseModel):
    state_changes: list[str] = Field(default_factory=list)
    side_effects: list[str] = Field(default_factory=list)
    positive_effects: list[str] = Field(default_factory=list)
    negative_effects: list[str] = Field(default_factory=list)


class ReflectionReply(BaseModel):
    summary: str = ""
    suggestions: list[str] = Field(default_factory=list)
    impact: Impact = Field(default_factory=Impact)
    is_spinning: bool = False
    spin_reason: str = ""
    #: The step check (reliability/guards.py): does the action do what its thought says, and
    #: does it work toward the task?
    matches_thought: bool = True
    mismatch_reason: str = ""
    serves_task: bool = True
    derailment_reason: str = ""


class SpinAnalysis(BaseModel):
    is_spinning: bool
    reason: str = ""
    suggestions: list[str] = Field(default_factory=list)
    next_actions: list[str] = Field(default_factory=list)
    is_task_progressing: bool = False


class Scores(BaseModel):
    c: float = 0.5
    o: float = 0.5
    r: float = 0.5
    e: float = 0.0
    p: float = 0.0
    a: float = 0.5
    t: float = 0.5

    @field_validator("*")
    @classmethod
    def _unit(cls, v: float) -> float:
        return min(1.0, max(0.0, float(v)))


class TriageEntity(BaseModel):
    content: str
    tags: list[str] = Field(default_factory=list)
    potential_questions: list[str] = Field(default_factory=list)
    scores: Scores = Field(default_factory=Scores)


class MemoryTriage(BaseModel):
    entities: list[TriageEntity] = Field(default_factory=list)


class TagSelection(BaseModel):
    tags: list[str] = Field(default_factory=list)


class SynthesisSample(BaseModel):
    answer: str
    confidence: float | None = None
    reasoning: list[str] = Field(default_factory=list)


class Summary(BaseModel):
    summary: str


class Lesson(BaseModel):
    lesson: str


SCHEMAS: dict[str, type[BaseModel]] = {
    "action": NextAction,
    "reflection": ReflectionReply,
    "spin": SpinAnalysis,
    "triage": MemoryTriage,
    "tags": TagSelection,
    "sample": SynthesisSample,
    "summary": Summary,
    "lesson": Lesson,
}

