"""Export and import of a store as JSON Lines: one memory per line, no vectors (an import
re-embeds with the target store's embedder).  Works on any store with ``list``, ``get`` and
``add_many``."""

from __future__ import annotations

import builtins
import errno
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .entity import MemoryEntity


class Transferable(Protocol):
    """What export and import use of a store (the SQLite and the PostgreSQL store have it)."""

    def list(self) -> builtins.list[MemoryEntity]: ...

    def get(self, id: str) -> MemoryEntity | None: ...

    def add_many(self, items: Iterable[dict[str, Any]]) -> builtins.list[str | None]: ...


def export_jsonl(store: Transferable, path: str | os.PathLike[str]) -> int:
    """Write every memory of ``store``, oldest first, to ``path`` (atomically: a write that fails
    leaves neither the file nor its temporary). Returns the count."""
    target = Path(path).expanduser().resolve()  # "." and "dir/.." name a folder, not a file
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "it is a folder; give a file name", str(path))
    tmp = target.with_name(f".{target.name}.tmp")
    n = 0
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for m in reversed(store.list()):
                fh.write(json.dumps(m.to_dict(), ensure_ascii=False) + "\n")
                n += 1
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The memories of an export; a bad line raises ``ValueError`` naming the file and line."""
    items: list[dict[str, Any]] = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or "content" not in data:
            raise ValueError(f"{path}:{lineno}: a memory needs a content field")
        items.append(data)
    return items


def import_jsonl(store: Transferable, path: str | os.PathLike[str]) -> dict[str, int]:
    """Add the memories of an export to ``store`` (ids kept when free); duplicates are skipped.
    Nothing is added when any line is bad."""
    items = [{**d, "id": None} if d.get("id") and store.get(str(d["id"])) is not None else d
             for d in read_jsonl(path)]
    ids = store.add_many(items) if items else []
    added = sum(1 for i in ids if i)
    return {"added": added, "duplicates": len(ids) - added}
