"""The run tree from saved traces alone: ``memfit_jupyter.family(*sources)``.

A fork's trace names its parent (``parent: {run, at, changes}``) and a run's trace lists the
forks made of it in its process (``forks``: each one's step, changes and outcome).  ``family``
reads those fields of every trace it is given, from trace files, folders holding them,
notebooks whose outputs show runs (and keep their forks' traces), trace dicts and runs in hand,
and joins them into trees: a run, its forks, their forks.  A file is read for its top-level
fields only (its events are skipped, not parsed: ``Trace.read_header``), so a folder of long
runs is read fast.  In a terminal: ``python -m memfit_jupyter tree PATH...``.

>>> fam = family("runs/")            # doctest: +SKIP
>>> print(fam)                        # doctest: +SKIP
eb8298146881  done  3 steps  $0.0041  memfit/premature-finish  runs/parent.json
└── at 3 guidance='read east.txt too' → 21d3818e4776  done  3 steps  $0.0041  runs/child.json
    └── at 3 observation='x' → 3f0c5e1a9b72  done  3 steps  $0.0041  runs/grand.json
>>> fam.frame                         # doctest: +SKIP
>>> compare(fam.trace("eb8298146881"), fam.trace("21d3818e4776"))   # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from ..secrets import redact_obj
from ..trace import MAX_DEPTH, RUN_MIME, Trace, TraceError, payload_of, too_deep

#: The file names ``family`` reads in a folder: traces and notebooks.
SUFFIXES = (".json", ".ipynb")


@dataclass
class Member:
    """One run of a family, as its trace (or its parent's list of forks) tells it."""

    run: str
    #: The run it is a fork of, and the step it forked at (None for a run that is no fork).
    parent: str | None = None
    at: int | None = None
    #: What the fork changed at its step (redacted: a person typed it).
    changes: dict[str, Any] = field(default_factory=dict)
    status: str = ""
    answer: str | None = None
    cost_usd: float | None = None
    iterations: int | None = None
    model: str = ""
    #: Where its trace was read (a file, "<dict>", "<run>"); None for a run known only from its
    #: parent's list of forks, or from its forks' ``parent`` (its own trace was not among the sources).
    source: str | None = None
    #: Its whole trace, when it came whole (a dict, a run, a notebook's output); a file's is read
    #: again when asked for (``Family.trace``).
    whole: dict[str, Any] | None = field(default=None, repr=False)


@dataclass
class Family:
    """The runs read, by run id, joined into trees by their ``parent`` fields."""

    members: dict[str, Member]
    #: What could not be read, one line each (a damaged trace, a second trace of one run).
    problems: list[str] = field(default_factory=list)
    _kids: dict[str, list[Member]] | None = field(default=None, init=False, repr=False)

    def children(self, run: str) -> list[Member]:
        """The forks of ``run`` among the members, by the step they forked at."""
        if self._kids is None:
            self._kids = {}
            for m in self.members.values():
                if m.parent is not None and m.parent != m.run:
                    self._kids.setdefault(m.parent, []).append(m)
            for kids in self._kids.values():
                kids.sort(key=lambda m: (m.at if m.at is not None else 0, m.run))
        return list(self._kids.get(run, ()))

    def roots(self) -> list[Member]:
        """The runs whose parent is not among the members (a parent not given, or no fork at
        all), and one run of each loop of parents (traces made up to point at each other)."""
        found = [m for m in self.members.values() if m.parent is None or m.parent not in self.members]
        reached = {m.run for m, _ in self._walk(found)}
        for m in self.members.values():  # what no root reaches is in a loop: break it at one run
            if m.run not in reached:
                found.append(m)
                reached |= {r.run for r, _ in self._walk([m])}
        return found

    def _walk(self, roots: Iterable[Member]) -> Iterator[tuple[Member, tuple[bool, ...]]]:
        """Each member under ``roots``, depth first, every run once, with where it stands: for
        each level below its root, whether it (or its ancestor there) is the last of its kin."""
        seen: set[str] = set()
        todo: list[tuple[Member, tuple[bool, ...]]] = [(m, ()) for m in reversed(list(roots))]
        while todo:
            member, lasts = todo.pop()
            if member.run in seen:
                continue
            seen.add(member.run)
            yield member, lasts
            kids = [kid for kid in self.children(member.run) if kid.run not in seen]
            todo += [(kid, (*lasts, i == len(kids) - 1)) for i, kid in reversed(list(enumerate(kids)))]

    def walk(self) -> Iterator[tuple[Member, int]]:
        """Every member with its depth in its tree, depth first (a run, then each fork in turn)."""
        return ((m, len(lasts)) for m, lasts in self._walk(self.roots()))

    @property
    def frame(self) -> Any:
        """One row a run, in tree order: run, parent, at, depth, changes, status, answer,
        cost_usd, iterations, model, source."""
        import polars as pl

        rows = [{"run": m.run, "parent": m.parent, "at": m.at, "depth": depth,
                 "changes": _changes_text(m.changes) if m.parent else "", "status": m.status, "answer": m.answer,
                 "cost_usd": m.cost_usd, "iterations": m.iterations, "model": m.model, "source": m.source}
                for m, depth in self.walk()]
        schema = {"run": pl.Utf8, "parent": pl.Utf8, "at": pl.Int64, "depth": pl.Int64, "changes": pl.Utf8,
                  "status": pl.Utf8, "answer": pl.Utf8, "cost_usd": pl.Float64, "iterations": pl.Int64,
                  "model": pl.Utf8, "source": pl.Utf8}
        return pl.DataFrame(rows, schema=schema)

    def trace(self, run: str) -> dict[str, Any]:
        """The whole trace of member ``run`` (to compare, replay or fork it)."""
        member = self.members.get(run)
        if member is None:
            raise KeyError(f"no run {run!r} in this family: {', '.join(self.members) or 'it is empty'}")
        if member.whole is not None:
            return member.whole
        if member.source is None:
            raise KeyError(f"run {run} is known only from the traces of its family: its own was not given")
        return Trace.load(Path(member.source)).data

    def lines(self) -> list[str]:
        """The tree as text, a line a run."""
        out = []
        for m, lasts in self._walk(self.roots()):
            indent = "".join("    " if last else "│   " for last in lasts[:-1])
            branch = ("└── " if lasts[-1] else "├── ") if lasts else ""
            head = f"at {m.at} {_changes_text(m.changes)} → " if m.parent else ""
            above = self.members.get(m.parent) if m.parent else None
            out.append(f"{indent}{branch}{head}{_summary(m, above.model if lasts and above else None)}")
        return out

    def __str__(self) -> str:
        text = "\n".join(self.lines()) or "no memfit run"
        return text + "".join(f"\n(not read: {p})" for p in self.problems)

    def __repr__(self) -> str:
        trees = len(self.roots())
        return f"<Family {len(self.members)} run(s) in {trees} tree(s){f', {len(self.problems)} not read' if self.problems else ''}>"

    def _repr_html_(self) -> str:
        problems = "".join(f"<div style='color:#a33'>not read: {escape(p)}</div>" for p in self.problems)
        return (f"<div class='memfit-family'><b>{escape(repr(self))}</b>"
                f"<pre style='margin:4px 0'>{escape(chr(10).join(self.lines()))}</pre>{problems}</div>")


def family(*sources: Any) -> Family:
    """The run tree of ``sources``: trace files, folders (their ``.json`` traces and ``.ipynb``
    notebooks, below them too), notebooks, trace dicts, saved outputs and ``Run`` objects (with
    the forks made of them in this process).  A file or folder named that does not exist, or a
    source of another kind, is one line of ``TraceError``; a file in a folder that is not a
    memfit trace is passed over, and a damaged one is named in ``problems``."""
    from ..run import Run

    members: dict[str, Member] = {}
    problems: list[str] = []
    todo = list(sources)
    while todo:
        source = todo.pop(0)
        if isinstance(source, Run):
            todo += list(source.forks)
            _take(members, problems, source.trace(), "<run>", whole=True)  # redacted as it is made
        elif isinstance(source, dict):
            for data, where in _traces_in(source, "<dict>"):
                _take(members, problems, data, where, whole=True)
        elif isinstance(source, str | Path):
            path = Path(source).expanduser()
            if path.is_dir():
                for file in _files_in(path):
                    _read_file(file, members, problems, quiet=True)
            elif path.is_file():
                _read_file(path, members, problems, quiet=False)
            else:
                raise TraceError(f"no such file or folder: {path}")
        else:
            raise TraceError(f"family() takes trace files, folders, trace dicts and runs, got {type(source).__name__}")
    for member in list(members.values()):  # a parent named by its forks only: their tree's root
        if member.parent and member.parent not in members:
            members[member.parent] = Member(run=member.parent)
    return Family(members, problems)


def _read_file(path: Path, members: dict[str, Member], problems: list[str], *, quiet: bool) -> None:
    """The runs of one file: a trace (its header only) or a notebook (its outputs' runs)."""
    try:
        if path.suffix == ".ipynb":
            notebook = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
                raise TraceError(f"{path} is not a notebook")
            for data, where in _traces_in(notebook, str(path)):
                _take(members, problems, data, where, whole=True)
            return
        if quiet and not _looks_like_trace(path):  # a folder's other JSON (a package.json): not read whole
            return
        header = Trace.read_header(path)
    except (TraceError, OSError, ValueError, RecursionError) as exc:
        if not quiet or _looks_like_trace(path):
            problems.append(f"{path}: {str(exc)[:200]}")
        return
    if "task" not in header or not isinstance(header.get("events"), int):
        if not quiet:
            problems.append(f"{path} is not a memfit trace: a JSON object with 'task' and 'events' is expected")
        return
    _take(members, problems, header, str(path), whole=False)


def _files_in(folder: Path) -> list[Path]:
    """The traces and notebooks below ``folder``, but for hidden folders (a fork's ``.memfit``,
    ``.ipynb_checkpoints``: copies of what is read already)."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(top, f) for f in sorted(files) if Path(f).suffix in SUFFIXES]
    return found


def _looks_like_trace(path: Path) -> bool:
    """Whether a file in a folder is meant as a trace (so it is read, and named if it cannot be):
    its first bytes hold a memfit trace's first fields."""
    try:
        with path.open("rb") as f:
            start = f.read(4096)
    except OSError:
        return True
    return b'"run_id"' in start or (b'"version"' in start and b'"task"' in start)


def _traces_in(obj: dict[str, Any], where: str) -> Iterator[tuple[dict[str, Any], str]]:
    """The traces in a dict: itself, a saved output's, or each run output of a notebook with the
    forks its metadata keeps (their traces)."""
    if isinstance(obj.get("cells"), list) and "nbformat" in obj:
        for n, cell in enumerate(obj["cells"]):
            outputs = cell.get("outputs") if isinstance(cell, dict) else None
            for out in outputs if isinstance(outputs, list) else ():
                data = out.get("data") if isinstance(out, dict) else None
                if not isinstance(data, dict) or not isinstance(data.get(RUN_MIME), dict):
                    continue
                yield data[RUN_MIME], f"{where} (cell {n + 1})"
                meta = (out.get("metadata") or {}).get(RUN_MIME) or {}
                for fork in meta.get("forks") or () if isinstance(meta, dict) else ():
                    if isinstance(fork, dict) and isinstance(fork.get("trace"), dict):
                        yield fork["trace"], f"{where} (cell {n + 1}, a fork)"
        return
    try:
        data = payload_of(obj, where)
    except TraceError:
        return
    if isinstance(data, dict):
        yield data, where


def _member(data: dict[str, Any], where: str, *, whole: bool) -> list[Member]:
    """The member a trace (or its header) tells of, and the forks its list names."""
    if not isinstance(data, dict) or not data.get("run_id"):
        return []
    if too_deep(data):  # as Trace.load refuses it (a value 5,000 levels deep is no trace's)
        raise TraceError(f"it nests more than {MAX_DEPTH} levels deep")
    parent, totals = _dict(data.get("parent")), _dict(data.get("totals"))
    me = Member(run=str(data["run_id"]), parent=str(parent["run"]) if parent.get("run") else None,
                at=_int(parent.get("at")), changes=_changes(parent.get("changes")), status=str(data.get("status") or ""),
                answer=_text(data.get("answer")), cost_usd=_float(totals.get("cost_usd")),
                iterations=_int(totals.get("iterations")), model=str(data.get("model") or ""), source=where,
                whole=data if whole else None)
    kids = [Member(run=str(f["run"]), parent=me.run, at=_int(f.get("at")), changes=_changes(f.get("changes")),
                   status=str(f.get("status") or ""), answer=_text(f.get("answer")), cost_usd=_float(f.get("cost_usd")),
                   iterations=_int(f.get("iterations")), model=me.model)
            for f in data.get("forks") or () if isinstance(f, dict) and f.get("run")]
    return [me, *kids]


def _take(members: dict[str, Member], problems: list[str], data: Any, where: str, *, whole: bool) -> None:
    """Add the runs one trace tells of, or name it in ``problems`` when it cannot be read."""
    try:
        found = _member(data, where, whole=whole)
    except TraceError as exc:
        problems.append(f"{where}: {exc}")
        return
    _add(members, problems, found)


def _add(members: dict[str, Member], problems: list[str], found: list[Member]) -> None:
    """Add what one trace tells: its own run (a second trace of a run already read is named,
    not read: a replay keeps its run's id) and the forks it lists that no trace gave yet."""
    if not found:
        return
    me, *kids = found
    known = members.get(me.run)
    if known is not None and known.source is not None:
        problems.append(f"{me.source}: run {me.run} again (read from {known.source}); the first is kept")
    else:  # new, or known from its parent's list of forks only: its own trace says more
        members[me.run] = me
    for kid in kids:
        members.setdefault(kid.run, kid)


def _summary(m: Member, parents_model: str | None) -> str:
    """Its id, outcome, steps, cost, model (a fork's only when its parent's differs) and source."""
    parts = [m.run, *([m.status] if m.status else [])]
    if m.iterations is not None:
        parts.append(f"{m.iterations} step{'s' if m.iterations != 1 else ''}")
    if m.cost_usd is not None:
        parts.append(f"${m.cost_usd:.4f}")
    if m.model and m.model != parents_model:
        parts.append(m.model)
    parts.append(m.source if m.source is not None else "(no trace given)")
    return "  ".join(parts)


def _changes_text(changes: dict[str, Any]) -> str:
    """``name=value`` of each change, each value cut to 40 characters (and one line)."""
    said = []
    for name, value in changes.items():
        if name == "action" and isinstance(value, dict) and value.get("tool"):  # as the run view writes an action
            params: dict[str, Any] = value["params"] if isinstance(value.get("params"), dict) else {}
            value = f"{value['tool']}(" + ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, default=str)}"
                                                    for k, v in params.items()) + ")"
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        text = " ".join(str(text).split())
        said.append(f"{name}={text[:40]!r}" if len(text) <= 40 else f"{name}={text[:39] + '…'!r}")
    return " ".join(said) or "(no change)"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _changes(value: Any) -> dict[str, Any]:
    """A fork's changes, redacted: a person typed them."""
    return redact_obj(dict(value)) if isinstance(value, dict) else {}
