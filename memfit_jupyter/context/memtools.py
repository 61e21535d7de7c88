"""The MemGPT memory tools: the agent pages its own memory in and out.

Every tool takes an optional ``request_heartbeat``.  In MemGPT a tool call
without a heartbeat yields control until the next outside event; here the
loop is stepwise and ``run.run()`` keeps going until ``finish`` anyway, so a
heartbeat matters when a person steps the run: the record carries
``data["heartbeat"] = True`` and ``wants_heartbeat(record)`` tells the caller
(the Step button, a notebook loop) to take the next step at once instead of
waiting for the next click.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..records import ActionRecord, ToolResult
from ..secrets import redact
from ..tools import Param, Tool, ToolContext

if TYPE_CHECKING:
    from ..protocols import RunView
    from .tiers import TieredContext

ARCHIVAL_OFF = ("archival memory is off: this run has no memory store "
                "(pass memory=MemoryStore(path), or drop --no-memory)")
HEARTBEAT = Param("bool", "true: take the next step at once", required=False)
ARCHIVAL_TAG = "archival"


def wants_heartbeat(record: ActionRecord | None) -> bool:
    """True when the action asked for another step at once (``request_heartbeat``)."""
    return bool(getattr(record, "data", {}).get("heartbeat"))


def _done(output: str, heartbeat: bool, **data: Any) -> ToolResult:
    if heartbeat:
        data["heartbeat"] = True
        output += "\n(heartbeat requested: continuing at once)"
    return ToolResult(output=output, data=data)


def _excerpt(text: str, query: str, limit: int = 400) -> str:
    """The lines of ``text`` that hold a word of ``query`` (the start of it when none does)."""
    terms = {t for t in re.findall(r"\w+", query.lower()) if len(t) > 1}
    scored = [(len(terms & set(re.findall(r"\w+", ln.lower()))), i, ln) for i, ln in enumerate(text.splitlines())]
    lines = [ln for hits, _, ln in sorted(scored, key=lambda t: (-t[0], t[1])) if hits]
    return (" | ".join(lines) if lines else text)[:limit]


def store_of(run: RunView) -> Any:
    """The run's long-term memory store, or None: ``run.memory`` (set by the memory extension),
    else the agent's ``memory`` when it is a store object."""
    store = getattr(run, "memory", None)
    if store is None:
        candidate = getattr(run.agent, "memory", None)
        if hasattr(candidate, "search") and hasattr(candidate, "add"):
            store = candidate
    return store


def memory_tools(tiers: TieredContext, run: RunView) -> list[Tool]:
    """The five memory tools, bound to one run's tiers."""

    def core_memory_append(ctx: ToolContext, label: str, content: str, request_heartbeat: bool = False) -> ToolResult:
        block = tiers.blocks.get(label)
        if block is None:
            return ToolResult(ok=False, error=f"no memory block {label!r}; blocks: {', '.join(tiers.blocks)}")
        new = (block.value + "\n" + content).strip() if block.value else content.strip()
        if len(new) > block.limit:
            return ToolResult(ok=False, error=(
                f"block {label!r} would hold {len(new)} characters; its limit is {block.limit}: "
                "shorten it with core_memory_replace first"))
        block.value = redact(new)
        return _done(f"appended to {label} ({len(block.value)}/{block.limit} characters)", request_heartbeat,
                     block=label, block_value=block.value)

    def core_memory_replace(ctx: ToolContext, label: str, old_content: str, new_content: str,
                            request_heartbeat: bool = False) -> ToolResult:
        block = tiers.blocks.get(label)
        if block is None:
            return ToolResult(ok=False, error=f"no memory block {label!r}; blocks: {', '.join(tiers.blocks)}")
        if not old_content or old_content not in block.value:
            return ToolResult(ok=False, error=f"block {label!r} does not contain the text to replace")
        new = block.value.replace(old_content, new_content, 1)
        if len(new) > block.limit:
            return ToolResult(ok=False, error=(
                f"block {label!r} would hold {len(new)} characters; its limit is {block.limit}"))
        block.value = redact(new)
        return _done(f"replaced text in {label} ({len(block.value)}/{block.limit} characters)",
                     request_heartbeat, block=label, block_value=block.value)

    def conversation_search(ctx: ToolContext, query: str, request_heartbeat: bool = False) -> ToolResult:
        found = tiers.search_recall(query, run.timeline.entries)
        if not found:
            return _done(f"nothing in recall or the current conversation matches {query!r}", request_heartbeat)
        lines = [f"[{e.kind} #{e.iteration}] {_excerpt(e.content, query)}" for e in found]
        return _done("\n".join(lines), request_heartbeat, matches=len(found))

    def archival_memory_insert(ctx: ToolContext, content: str, request_heartbeat: bool = False) -> ToolResult:
        store = store_of(run)
        if store is None:
            return ToolResult(ok=False, error=ARCHIVAL_OFF)
        memory_id = store.add(redact(content), tags=(ARCHIVAL_TAG,))
        if memory_id is None:
            return _done("already in archival memory (a duplicate was not added)", request_heartbeat)
        return _done(f"saved to archival memory as {memory_id}", request_heartbeat, memory_id=memory_id)

    def archival_memory_search(ctx: ToolContext, query: str, request_heartbeat: bool = False) -> ToolResult:
        store = store_of(run)
        if store is None:
            return ToolResult(ok=False, error=ARCHIVAL_OFF)
        results = list(store.search(query, k=5))
        if not results:
            return _done(f"nothing in archival memory matches {query!r}", request_heartbeat)
        lines = [f"- ({getattr(r, 'score', 0.0):.2f}) {r.content[:500]}" for r in results]
        return _done("\n".join(lines), request_heartbeat, matches=len(results))

    return [
        Tool("core_memory_append", "append a line to a core memory block (persona, task_notes)",
             {"label": Param(), "content": Param(), "request_heartbeat": HEARTBEAT}, core_memory_append),
        Tool("core_memory_replace", "replace text in a core memory block",
             {"label": Param(), "old_content": Param(), "new_content": Param(),
              "request_heartbeat": HEARTBEAT}, core_memory_replace),
        Tool("conversation_search", "search recall: earlier messages moved out of view",
             {"query": Param(), "request_heartbeat": HEARTBEAT}, conversation_search),
        Tool("archival_memory_insert", "save a fact to long-term archival memory",
             {"content": Param(), "request_heartbeat": HEARTBEAT}, archival_memory_insert),
        Tool("archival_memory_search", "search long-term archival memory",
             {"query": Param(), "request_heartbeat": HEARTBEAT}, archival_memory_search),
    ]
