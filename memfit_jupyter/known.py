"""What this process has used itself: the model servers it sent calls to, the oracle commands it
ran, the folders its runs' tools worked in.

A saved trace names both (a run's ``api_base`` in its settings, its failure diary's oracle
command), and a trace is a file that may come from anywhere.  A fork of a saved run goes live
with what its trace names (``fork.py``), so a trace could otherwise have the person's machine
send their API keys and their prompts to a server of the trace's choosing (whose replies then
pick the tools that run), or run a shell command of its choosing.  A fork takes a server or a
command from a trace only when this process has used it already, or when the person gives it
again (``api_base=``, ``oracle=``); the same rule as a PostgreSQL store a trace names
(``memory/postgres.connected``).  Likewise a fork reads the folder a saved trace names (the
files its run found, where the trace kept no snapshot of them) only when it lies inside the
working directory or a run of this process worked there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: What was used (a set's ``add`` is atomic: model calls on worker threads note here too).
_servers: set[str] = set()
_commands: set[str] = set()
_folders: set[Path] = set()


def _server(url: Any) -> str:
    return str(url).strip().rstrip("/")


def note_server(url: Any) -> None:
    """A model call goes to the server at ``url`` (an ``api_base``) on the person's say."""
    if url:
        _servers.add(_server(url))


def note_command(command: Any) -> None:
    """The oracle ``command`` runs on the person's say."""
    if isinstance(command, str) and command.strip():
        _commands.add(command)


def note_folder(folder: Path) -> None:
    """A run's tools work in ``folder`` (resolved) on the person's say."""
    _folders.add(folder)


def server_known(url: Any) -> bool:
    return _server(url) in _servers


def command_known(command: Any) -> bool:
    return isinstance(command, str) and command in _commands


def folder_known(folder: Path) -> bool:
    """Whether ``folder`` (resolved) is inside the working directory, or inside a folder a run of
    this process worked in."""
    return folder.is_relative_to(Path.cwd().resolve()) or any(folder.is_relative_to(f) for f in _folders)


def servers_of(api_base: Any) -> list[str]:
    """The server URLs an ``api_base`` setting names: one URL, or one per tier."""
    if isinstance(api_base, dict):
        return [str(v) for v in api_base.values() if v]
    return [str(api_base)] if api_base else []
