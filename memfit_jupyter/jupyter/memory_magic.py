"""``%memfit_memory``: look at and edit the long-term memory store from a notebook.

::

    %memfit_memory                                   summary: path, count, embedder, dims
    %memfit_memory search QUERY [-k N] [--bytes N] [--tags a,b] [--ranking R]
    %memfit_memory add TEXT [--tags a,b] [--question Q ...]
    %memfit_memory show ID | delete ID | list [--tag T] [--limit N]
    %memfit_memory failures [KIND]                   the failure diary
    %memfit_memory export PATH | import PATH | reindex [--embedder NAME]

    %memfit_memory --run RUN [search ... | show ID | list ... | failures [KIND]]

``search`` and ``list`` return a polars DataFrame and display the ranking panel.
The store is ``%config MemfitMagics.memory_path`` (a folder, or a PostgreSQL URL), else
``.memfit/`` in the working directory.  ``--run RUN`` reads the memory a run reads instead
(``RUN``: a Run or trace variable, a run id or a saved trace file, as for ``%memfit fork``): a
fork's is its own store over its parent's, without the rows it does not see; a saved run's is
the store its trace names.  It only reads: what writes is for a store, not a run.
"""

from __future__ import annotations

import shlex
from argparse import Namespace
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..memory.ranking import RANKING_ALIASES, RANKINGS
from .ipython import argument, magic_arguments

if TYPE_CHECKING:
    from ..memory.entity import MemoryEntity
    from ..memory.postgres import PostgresStore
    from ..memory.store import MemoryStore
    from .protocol import MemoryPayload


@magic_arguments()
@argument("query", nargs="+", help="what to look for")
@argument("-k", type=int, default=10, help="most results (default 10)")
@argument("--bytes", type=int, default=None, help="byte limit of the selection (reflection searches 2048-10240)")
@argument("--tags", default=None, help="only memories with one of these tags (comma-separated)")
@argument("--ranking", default=None, choices=RANKINGS, type=lambda name: RANKING_ALIASES.get(name, name),
          help="ranking formula")
def _search(line: str) -> None: ...


@magic_arguments()
@argument("text", nargs="+", help="the memory's content")
@argument("--tags", default="", help="comma-separated tags")
@argument("--question", action="append", default=[], help="a question this memory answers (repeatable)")
def _add(line: str) -> None: ...


@magic_arguments()
@argument("id", help="a memory id")
def _id(line: str) -> None: ...


@magic_arguments()
@argument("--tag", default=None, help="only memories with this tag")
@argument("--limit", type=int, default=50, help="most rows (default 50)")
def _list(line: str) -> None: ...


@magic_arguments()
@argument("kind", nargs="?", default=None, help="the task kind")
def _failures(line: str) -> None: ...


@magic_arguments()
@argument("path", help="a JSON Lines file")
def _path(line: str) -> None: ...


@magic_arguments()
@argument("--embedder", default=None, help="hashing, hashing-<dim>, minilm or litellm:<model>")
def _reindex(line: str) -> None: ...


def _parse(func: Any, rest: str, sub: str) -> Any:
    try:
        # shlex, not IPython's arg_split: quotes group words and are removed, as in a shell
        return func.parser.parse_args(shlex.split(rest))
    except ValueError as exc:
        raise UsageError(f"%memfit_memory {sub}: {exc}") from None
    except UsageError as exc:
        raise UsageError(f"%memfit_memory {sub}: {str(exc).strip().splitlines()[-1]}") from None
    except SystemExit:  # argparse's exit on --help: help was printed
        raise UsageError(f"%memfit_memory {sub}: see the usage above") from None


def store_for(magics: Any) -> MemoryStore | PostgresStore:
    from ..errors import StoreError
    from ..memory import DEFAULT_DIR, open_store
    from ..memory.postgres import is_url

    configured = getattr(magics, "memory_path", None)
    path: Path | str = Path(configured).expanduser() if configured else Path.cwd() / DEFAULT_DIR
    if is_url(configured):  # a PostgreSQL store: postgresql://...
        path = configured
    try:
        return open_store(path)
    except (StoreError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _tags(value: str | None) -> list[str] | None:
    if value is None:
        return None
    tags = [t.strip() for t in value.split(",") if t.strip()]
    if not tags:
        raise UsageError("--tags is empty: give tags separated by commas")
    return tags


def _show(payload: MemoryPayload, magics: Any) -> None:
    from .ipython import display
    from .memory_widget import MemoryRanking, ranking_widget

    shell = getattr(magics, "shell", None)
    if getattr(shell, "kernel", None) is not None:
        display(ranking_widget(payload))
    else:
        display(MemoryRanking(payload))


def _summary(store: MemoryStore | PostgresStore) -> None:
    from .ipython import display

    info = store.info()
    text = (f"memory store {info['path']}: {info['count']} memories, embedder {info['embedder']} "
            f"({info['dims']} dims), {info['tags']} tags, ranking {info['ranking']}")
    display({"text/plain": text,  # a store's path and metadata are text, never markup
             "text/html": f"<div style='font-family:sans-serif;font-size:12px'>{escape(text)}</div>"}, raw=True)


def memfit_memory(magics: Any, line: str) -> Any:
    """Dispatch one ``%memfit_memory`` line (see the module docstring)."""
    line = (line or "").strip()
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%memfit_memory: {exc}") from None
    store = None
    if words and words[0] == "--run":
        if len(words) < 2:
            raise UsageError("%memfit_memory --run needs a run: a Run or trace variable, a run id or a saved trace file")
        store, words = run_memory(magics, words[1]), words[2:]
        line = shlex.join(words)
        if words and words[0] in SUBCOMMANDS and words[0] not in READING:
            raise UsageError(f"%memfit_memory --run reads a run's memory; {words[0]} writes to a store: set "
                             "%config MemfitMagics.memory_path to it instead")
    if not words:
        _summary(store if store is not None else store_for(magics))
        return None
    sub, rest = words[0], line[len(line.split(None, 1)[0]):].strip()
    if sub not in SUBCOMMANDS:
        raise UsageError(f"unknown subcommand {sub!r} for %memfit_memory; valid: {', '.join(SUBCOMMANDS)}")
    command = COMMANDS[sub]
    args = _parse(command.options, rest, sub)
    args.store = store
    return command.handle(magics, args)


#: The subcommands that only read, which ``--run`` takes.
READING = ("search", "show", "list", "failures")


def run_memory(magics: Any, name: str) -> Any:
    """The memory the run ``name`` reads: a run in hand's live store (a fork's overlay), or the
    store a saved trace names (``memory_store``), opened to read."""
    from ..errors import StoreError
    from ..fork import ForkStore
    from ..memory.where import open_where
    from ..replay import RecordedStore
    from ..run import Run
    from ..trace import Trace, TraceError
    from .fork_magic import target

    found = target(magics, name)
    if isinstance(found, Run):
        store = found.memory.live if isinstance(found.memory, ForkStore) else found.memory
        if store is not None and store is not False and not isinstance(store, RecordedStore):
            return store
        found = found.trace()  # a replay opened no store: its recording says where its run's was
    try:
        trace = Trace.load(found).data
    except (TraceError, OSError) as exc:
        raise UsageError(f"%memfit_memory --run: {str(exc).splitlines()[0]}") from None
    if not trace.get("memory_store"):
        raise UsageError(f"%memfit_memory --run: run {trace.get('run_id', name)} had no memory, or its trace "
                         "does not say where its store was")
    try:
        return open_where(trace["memory_store"])
    except (StoreError, ImportError, ValueError) as exc:
        raise UsageError(f"%memfit_memory --run: the store of run {trace.get('run_id', name)} cannot be read: "
                         f"{str(exc).splitlines()[0]}") from None


def _store(magics: Any, args: Namespace) -> Any:
    """The store a subcommand works on: the run's (``--run``), else the configured one."""
    store = getattr(args, "store", None)
    return store if store is not None else store_for(magics)  # an empty store is falsy: it has a len


def handle_search(magics: Any, args: Namespace) -> Any:
    from ..memory.frames import results_frame
    from .memory_widget import ranking_payload

    if args.k < 1:
        raise UsageError(f"-k must be at least 1, got {args.k}")
    if args.bytes is not None and args.bytes < 1:
        raise UsageError(f"--bytes must be positive, got {args.bytes}")
    query = " ".join(args.query)
    results = _store(magics, args).search(query, k=args.k, bytes_limit=args.bytes, tags=_tags(args.tags),
                                       ranking=args.ranking)
    _show(ranking_payload(results, query, args.bytes), magics)
    return results_frame(results)


def handle_add(magics: Any, args: Namespace) -> Any:
    tags = (_tags(args.tags) or []) if args.tags else []
    try:
        new_id = _store(magics, args).add(" ".join(args.text), tags=tags, questions=args.question)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"stored as {new_id}" if new_id else "not stored: a duplicate of a memory already kept (2 of 3)")
    return None


def _entity_or_error(store: MemoryStore | PostgresStore, mid: str) -> MemoryEntity:
    entity = store.get(mid)
    if entity is None:
        raise UsageError(f"no memory with id {mid!r}")
    return entity


def handle_show(magics: Any, args: Namespace) -> Any:
    from .ipython import display
    from .memory_widget import MemoryRanking, ranking_payload

    entity = _entity_or_error(_store(magics, args), args.id)
    display(MemoryRanking(ranking_payload([entity])))
    return entity


def handle_delete(magics: Any, args: Namespace) -> Any:
    store = _store(magics, args)
    _entity_or_error(store, args.id)
    store.delete(args.id)
    print(f"deleted {args.id}")


def handle_list(magics: Any, args: Namespace) -> Any:
    from ..memory.frames import entities_frame
    from .memory_widget import ranking_payload

    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    entities = _store(magics, args).list(tag=args.tag, limit=args.limit)
    _show(ranking_payload(entities), magics)
    return entities_frame(entities)


def handle_failures(magics: Any, args: Namespace) -> Any:
    store = _store(magics, args)
    try:
        from ..context.diary import failures
    except ImportError:
        from ..memory.frames import entities_frame

        return entities_frame(store.failures(args.kind))
    return failures(store, args.kind)


def handle_export(magics: Any, args: Namespace) -> Any:
    try:
        n = _store(magics, args).export(Path(args.path).expanduser())
    except OSError as exc:
        raise UsageError(f"cannot write {args.path}: {exc.strerror or exc}") from None
    print(f"exported {n} memories to {args.path}")


def handle_import(magics: Any, args: Namespace) -> Any:
    path = Path(args.path).expanduser()
    if not path.is_file():
        raise UsageError(f"no such file: {args.path}")
    try:
        outcome = _store(magics, args).import_(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"imported {outcome['added']} memories ({outcome['duplicates']} duplicates skipped)")


def handle_reindex(magics: Any, args: Namespace) -> Any:
    from ..errors import StoreError

    store = _store(magics, args)
    try:
        n = store.reindex(args.embedder)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    print(f"re-embedded {n} memories with {store.embedder.id}")


@dataclass(frozen=True)
class Subcommand:
    """A ``%memfit_memory`` subcommand: its options (a ``magic_arguments`` stub) and its handler,
    which gets the parsed options."""

    options: Any
    handle: Callable[[Any, Namespace], Any]


#: The subcommands, in the order the usage lists them.
COMMANDS: dict[str, Subcommand] = {
    "search": Subcommand(_search, handle_search), "add": Subcommand(_add, handle_add),
    "show": Subcommand(_id, handle_show), "delete": Subcommand(_id, handle_delete),
    "list": Subcommand(_list, handle_list), "failures": Subcommand(_failures, handle_failures),
    "export": Subcommand(_path, handle_export), "import": Subcommand(_path, handle_import),
    "reindex": Subcommand(_reindex, handle_reindex),
}
SUBCOMMANDS = tuple(COMMANDS)
