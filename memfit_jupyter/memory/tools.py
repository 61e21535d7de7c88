"""The agent's memory tools: ``memory_search`` and ``memory_insert``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..records import ToolResult
from ..tools import Param, Tool, ToolContext
from .entity import result_dicts

if TYPE_CHECKING:
    from .retrieval import MemoryBackend


class Bound(Protocol):
    """What the tools use of the memory extension (``MemoryExtension``): its run, store and config."""

    run: Any
    store: MemoryBackend
    config: Any


def memory_tools(ext: Bound) -> list[Tool]:
    """The two tools bound to one run's memory extension."""
    # The field's default (``MemoryConfig.tool_search_bytes``, the package's TOOL_SEARCH_BYTES).
    default_bytes: int = type(ext.config).tool_search_bytes

    def memory_search(ctx: ToolContext, query: str, bytes_limit: int = default_bytes) -> ToolResult:
        if bytes_limit < 1:
            return ToolResult(ok=False, error="bytes_limit must be positive")
        run = ext.run
        found = ext.store.search(query, k=None, bytes_limit=bytes_limit, llm=run.llm, iteration=run.iteration)
        run.emit("memory", op="search", query=query, results=result_dicts(found), added=[],
                 bytes=found.content_bytes)
        if not found:
            return ToolResult(output=f"no memory matches {query!r}", data={"matches": 0})
        lines = [f"- [{m.id}] ({m.score:.2f}) {m.content}" for m in found]
        return ToolResult(output="\n".join(lines), data={"matches": len(found)})

    def memory_insert(ctx: ToolContext, content: str, tags: list[str] | None = None,
                      questions: list[str] | None = None) -> ToolResult:
        run = ext.run
        try:
            new_id = ext.store.add(content, tags=tags or (), questions=questions or ())
        except ValueError as exc:
            return ToolResult(ok=False, error=str(exc))
        run.emit("memory", op="insert", query="", results=[], added=[new_id] if new_id else [], bytes=0)
        if new_id is None:
            return ToolResult(output="not stored: it duplicates a memory already kept", data={"duplicate": True})
        return ToolResult(output=f"stored as memory {new_id}", data={"memory_id": new_id})

    return [
        # Short descriptions: every action prompt of every run repeats them.
        Tool("memory_search", "search long-term memory",
             {"query": Param(), "bytes_limit": Param("int", required=False)}, memory_search),
        Tool("memory_insert", "keep a lesson or fact for later tasks",
             {"content": Param(), "tags": Param("list", required=False),
              "questions": Param("list", required=False)}, memory_insert),
    ]
