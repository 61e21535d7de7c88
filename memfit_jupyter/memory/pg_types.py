"""What the PostgreSQL store uses of a psycopg connection and its cursors.

psycopg is an optional extra: these protocols say the calls the store makes (psycopg 3's
``Connection`` and ``Cursor`` have them), so that the store's code is checked the same way
whether or not psycopg is installed.  Rows are plain tuples (psycopg's default row factory).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

#: One result row.
Row = tuple[Any, ...]


class Copy(Protocol):
    """A ``COPY ... FROM STDIN`` in progress."""

    def write_row(self, row: Sequence[Any]) -> None: ...


class Cursor(Protocol):
    rowcount: int
    #: Rows a server-side (named) cursor fetches at a time.
    itersize: int

    def execute(self, query: str, params: Sequence[Any] | None = None) -> Cursor: ...

    def executemany(self, query: str, params_seq: Iterable[Sequence[Any]], *, returning: bool = False) -> None: ...

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...

    def nextset(self) -> bool | None: ...

    def copy(self, statement: str) -> AbstractContextManager[Copy]: ...

    def __iter__(self) -> Iterator[Row]: ...

    def __enter__(self) -> Cursor: ...

    def __exit__(self, *exc: object) -> None: ...


class Conn(Protocol):
    """An open connection (autocommit: a transaction is ``with conn.transaction()``)."""

    def execute(self, query: str, params: Sequence[Any] | None = None) -> Cursor: ...

    def cursor(self, name: str = "", *, binary: bool | None = None) -> Cursor: ...

    def transaction(self) -> AbstractContextManager[object]: ...

    def close(self) -> None: ...
