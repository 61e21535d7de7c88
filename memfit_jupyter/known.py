"""What this process has used itself: the model servers it sent calls to, the oracle commands it ran.

A saved trace names both (a run's ``api_base`` in its settings, its failure diary's oracle
command), and a trace is a file that may come from anywhere.  A fork of a saved run goes live
with what its trace names (``fork.py``), so a trace could otherwise have the person's machine
send their API keys and their prompts to a server of the trace's choosing (whose replies then
pick the tools that run), or run a shell command of its choosing.  A fork takes a server or a
command from a trace only when this process has used it already, or when the person gives it
again (``api_base=``, ``oracle=``); the same rule as a PostgreSQL store a trace names
(``memory/postgres.connected``).
"""

from __future__ import annotations

from typing import Any

#: What was used (a set's ``add`` is atomic: model calls on worker threads note here too).
_servers: set[str] = set()
_commands: set[str] = set()


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


def server_known(url: Any) -> bool:
    return _server(url) in _servers


def command_known(command: Any) -> bool:
    return isinstance(command, str) and command in _commands


def servers_of(api_base: Any) -> list[str]:
    """The server URLs an ``api_base`` setting names: one URL, or one per tier."""
    if isinstance(api_base, dict):
        return [str(v) for v in api_base.values() if v]
    return [str(api_base)] if api_base else []
