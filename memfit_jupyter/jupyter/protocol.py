"""What the kernel and the JupyterLab extension say to each other, as types.

The live run widget (``widget.py``) sends ``BatchMessage`` and ``DeltaMessage`` and
keeps ``Controls`` as synced state; the front end's buttons send ``ActionMessage``.
The run view's "Fork from here" form sends ``{"action": "fork", "fork": ForkRequest}``; the
forks of the run are ``Controls.forks`` while it is live and ``RunOutputMeta.forks`` (each with
its trace) in the saved output.  The memory ranking panel's payload is ``MemoryPayload``
(``application/vnd.memfit.memory+json``), a comparison's ``ComparePayload``
(``application/vnd.memfit.compare+json``).  ``labextension/src/protocol-types.ts`` is
generated from this module (``python -m memfit_jupyter.schema --write``); a test fails
when the two differ, or when what the widget really sends has other keys than these.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, get_args

#: The actions the front end may ask for (``{"action": name, ...}``), in the widget's order.
ActionName = Literal["sync", "step", "continue", "abort", "approve", "reject", "override", "choose",
                     "more_trials", "open_diary", "stop", "fork"]
ACTIONS: tuple[str, ...] = get_args(ActionName)
#: The figures of ``run.estimate()`` (``llm/estimate.py``) that the view shows.
ESTIMATE_KEYS = ("model", "priced", "iteration_cost_usd", "iteration_worst_case_usd", "calls_per_iteration",
                 "prompt_tokens", "iterations_affordable", "budget_left_usd")


class Estimate(TypedDict, total=False):
    """What the next iteration is expected to cost (``run.estimate()``), or why that is unknown
    (``error`` alone).  ``priced`` is False when the model has no known price."""

    model: str
    priced: bool
    iteration_cost_usd: float
    iteration_worst_case_usd: float
    calls_per_iteration: int
    prompt_tokens: int
    iterations_affordable: int | None
    budget_left_usd: float
    error: str


class Approval(TypedDict):
    """The tool call waiting for the person's approval."""

    tool: str
    params: dict[str, Any]
    thought: str


class Choice(TypedDict):
    """One alternative of a diverse synthesis the person may choose."""

    index: int
    answer: str


class Diary(TypedDict):
    """The failure diary's lessons, once the person asked for them."""

    lessons: list[str]
    past: list[str]


class PromptMessage(TypedDict):
    """One message of the prompt the next action call will send (step mode)."""

    role: str
    content: str


class CompareRow(TypedDict):
    """One row of a comparison: ``kind`` says how to show the two values (text, count, money, seconds)."""

    label: str
    kind: str
    values: list[Any]


class Diverged(TypedDict):
    """The first iteration whose action differs, and the two actions."""

    iteration: int
    a: str
    b: str


class ForkRequest(TypedDict, total=False):
    """What the "Fork from here" form asks for: the step ``at`` and the changes there (fields
    left empty are left out).  ``params`` is the JSON text typed for ``tool``'s parameters."""

    at: int
    guidance: str
    observation: str
    tool: str
    params: str
    model: str
    reflection: str
    spin_threshold: int
    max_iterations: int


class ForkCompare(TypedDict):
    """``compare(parent, child)`` without the two runs (the view has both)."""

    labels: list[str]
    rows: list[CompareRow]
    diverged: Diverged | None


class ForkEntry(TypedDict):
    """One fork of the run, for the run view's tree: the step it forked at, its changes, how it
    ended, the live widget that streams it (None when none does) and its comparison with the run."""

    run: str
    at: int
    changes: dict[str, Any]
    status: str
    answer: str | None
    cost_usd: float
    iterations: int
    exact: bool
    live_widget: str | None
    compare: ForkCompare | None


class SavedFork(ForkEntry):
    """A fork as the parent's saved output keeps it: the entry and the child's trace."""

    trace: dict[str, Any]


class RunOutputMeta(TypedDict):
    """The metadata of a run's output (``application/vnd.memfit.run+json``): the live widget that
    streams the run (None: none), whether it is quiet, and its forks with their traces."""

    version: Any
    live_widget: str | None
    quiet: bool
    forks: list[SavedFork]


class Controls(TypedDict):
    """The controls of a live run (the widget's synced ``controls``): status, the buttons to show
    by action name, what waits for the person, and the estimate of the next iteration."""

    status: str
    busy: bool
    buttons: list[ActionName]
    approval: Approval | None
    choices: list[Choice]
    override_cost: float | None
    extra_trials: int
    diary: Diary | None
    prompt: list[PromptMessage] | None
    count: int
    max_cards: int
    estimate: Estimate | None
    #: What the run is waiting for when it is not the model ("loading the model client"), or None.
    note: str | None
    #: The forks of the run made in this kernel, oldest first.
    forks: list[ForkEntry]
    #: Why the last "Fork from here" made nothing (one line), or None.
    fork_error: str | None


class ActionMessage(TypedDict, total=False):
    """A button of the front end: ``have`` with sync (the events it holds), ``max_cost_usd``
    with override, ``index`` with choose, ``fork`` with fork."""

    action: ActionName
    have: int
    max_cost_usd: float
    index: int
    fork: ForkRequest


class BatchMessage(TypedDict, total=False):
    """Events from ``start`` on, and the trace's head (the trace without its events) when it changed."""

    kind: Literal["batch"]
    start: int
    events: list[dict[str, Any]]
    head: dict[str, Any]


class DeltaMessage(TypedDict):
    """A piece of a reply as it streams in (a ``model_delta`` event)."""

    kind: Literal["delta"]
    event: dict[str, Any]


class MemoryResult(TypedDict):
    """One ranked memory: the C.O.R.E. P.A.C.T. ``breakdown`` ends in ``final``, which ``score`` equals."""

    rank: int
    id: str
    content: str
    tags: list[str]
    score: float
    breakdown: dict[str, float]


class MemoryPayload(TypedDict):
    """``application/vnd.memfit.memory+json``: a ranking of memories for a query."""

    version: int
    query: str
    bytes_limit: int | None
    bytes: int
    dimensions: list[str]
    results: list[MemoryResult]
    #: What ``score`` is: "final score" (a search's ranking) or "stored score" (a list's).
    score_label: str
    #: The most a memory sharing no word with the query can score (``ranking.relevance_floor``);
    #: None for a list.
    floor: float | None
    #: Every result is at or under ``floor``: nothing relevant was found.
    nothing_relevant: bool


class ComparePayload(TypedDict):
    """``application/vnd.memfit.compare+json``: two runs (each a ``Trace``) side by side."""

    version: int
    labels: list[str]
    runs: list[dict[str, Any]]
    rows: list[CompareRow]
    diverged: Diverged | None


#: The types written to TypeScript, in order.
TYPES = (Estimate, Approval, Choice, Diary, PromptMessage, CompareRow, Diverged, ForkRequest, ForkCompare, ForkEntry,
         SavedFork, RunOutputMeta, Controls, ActionMessage, BatchMessage, DeltaMessage, MemoryResult, MemoryPayload,
         ComparePayload)
