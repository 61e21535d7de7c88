"""Memories as polars DataFrames (what ``%memfit_memory search`` and ``list`` return)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .entity import DIMENSIONS, MemoryEntity, ScoredMemory

if TYPE_CHECKING:  # polars is imported at first use
    import polars as pl
    from polars.datatypes import DataType, DataTypeClass

#: Score columns in the order of their weights (MECHANISMS.md §3.4), then what ranking adds.
RANK_COLUMNS = ("r", "c", "t", "a", "p", "o", "e", "keyword_bonus", "semantic", "lexical", "relevance", "final")


def results_frame(results: Iterable[ScoredMemory]) -> pl.DataFrame:
    """One row per search result: rank, id, content, tags, one column per dimension, bonus, final."""
    import polars as pl

    rows = [{"rank": i + 1, "id": m.id, "content": m.content, "tags": list(m.tags),
             **{c: float(m.breakdown.get(c, 0.0)) for c in RANK_COLUMNS}} for i, m in enumerate(results)]
    schema: dict[str, DataType | DataTypeClass] = {
        "rank": pl.Int64, "id": pl.Utf8, "content": pl.Utf8, "tags": pl.List(pl.Utf8),
        **{c: pl.Float64 for c in RANK_COLUMNS}}
    return pl.DataFrame(rows, schema=schema)


def entities_frame(entities: Iterable[MemoryEntity]) -> pl.DataFrame:
    """One row per memory: id, content, tags, questions, created_at and the seven scores."""
    import polars as pl

    rows = [{"id": e.id, "content": e.content, "tags": list(e.tags),
             "potential_questions": list(e.potential_questions), "created_at": e.created_at,
             **{k: float(getattr(e, f"{k}_score")) for k in DIMENSIONS}} for e in entities]
    schema: dict[str, DataType | DataTypeClass] = {
        "id": pl.Utf8, "content": pl.Utf8, "tags": pl.List(pl.Utf8),
        "potential_questions": pl.List(pl.Utf8), "created_at": pl.Utf8,
        **{k: pl.Float64 for k in DIMENSIONS}}
    return pl.DataFrame(rows, schema=schema)
