"""Progress signals: what makes a repeated step new, after normalising what does not matter.

A spin is repetition *without progress*.  These helpers say when two steps
are the same (``action_key``), when two outputs are the same
(``normalise_output``, with paths, numbers, addresses, timestamps, durations
and temporary names folded away), what an error says (``error_signature``),
and whether a step's output looks like a failure (``looks_failing``).  They are
pure functions of ``ActionRecord``s, shared by the detectors and the
evaluation's label rule.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

from ..records import ActionRecord

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_TMP = re.compile(r"/tmp/[\w.-]+")
_ZEROS = re.compile(r"0[0.]*0")
#: Every digit becomes 0 and runs of them one 0: numbers, line numbers, timestamps, durations and
#: ports all fold at once.  (A regex per kind cost about 2 ms per 4 kB output; this costs 0.1 ms.)
_DIGITS = str.maketrans("123456789", "000000000")
#: What marks an output as a failure when the exit status says nothing (scripts that print errors).
_FAILING = re.compile(r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b[:\s]|\bFAIL(ED)?\b|"
                      r"\bfailed\b|AssertionError|command not found|No such file or directory|"
                      r"\bnot found\b|\binvalid\b", re.I)
_ERROR_LINE = re.compile(r"^\s*(\w+(\.\w+)*(Error|Exception|Exit|Warning)|E\s+\w+|FAIL(ED)?|error)\b.*$", re.M)
_MARKERS = re.compile(r"</?(returncode|output|warning|exception)>|\[The command completed with exit code -?\d+\.\]|"
                      r"\[Current working directory: [^\]]*\]|\[Python interpreter: [^\]]*\]|"
                      r"\[Command finished with exit code -?\d+\]")


@lru_cache(maxsize=8192)
def normalise_output(text: str, limit: int = 2000) -> str:
    """The output with what changes between identical runs folded away (see module doc)."""
    text = _MARKERS.sub("", _ANSI.sub("", text or ""))
    if len(text) > 2 * limit:  # keep both ends: the start says what ran, the end how it ended
        text = text[:limit] + "\n...\n" + text[-limit:]
    text = _TMP.sub("/tmp/<tmp>", _HEX.sub("<addr>", text)).translate(_DIGITS)
    text = _ZEROS.sub("0", text)
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


_QUOTED = re.compile(r"'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"|`[^`\n]{1,200}`")
_PATHS = re.compile(r"[\w.~@+-]*/[\w./~@+-]+|\b[\w-]+\.(?:py|pyx|txt|md|rst|json|toml|cfg|ini|yaml|yml|js|ts|c|h|"
                    r"cpp|java|go|rs|sh|html|csv|log)\b")
_MISSING = re.compile(r"(no such file(?: or directory)?|not found|does not exist|cannot access)\s*:?\s*\S+", re.I)


def fold_names(text: str) -> str:
    """An error message without the names it is about (quoted strings, paths, the missing file):
    guessing another wrong path gives the same error, not new information."""
    text = _QUOTED.sub("<q>", text)
    text = _MISSING.sub(lambda m: m.group(1) + ": <name>", text)
    return _PATHS.sub("<path>", text)


def error_signature(text: str) -> str:
    """The last line that names an error (normalised), or "" when no line does."""
    lines = _ERROR_LINE.findall(_MARKERS.sub("", text or ""))
    if not lines:
        return ""
    last = [m for m in re.finditer(_ERROR_LINE, text or "")][-1].group(0)
    return normalise_output(last.strip(), 400)


def looks_failing(record: ActionRecord) -> bool:
    """The step failed (status), or its output reads like a failure."""
    if not record.ok:
        return True
    return bool(_FAILING.search((record.output or "")[-3000:]))


def shell_command(record: ActionRecord) -> str:
    command = record.params.get("command") if isinstance(record.params, dict) else None
    return command if isinstance(command, str) and record.tool in ("bash", "shell", "") else ""


@lru_cache(maxsize=4096)
def normalise_command(command: str) -> str:
    """A shell command without what does not change what it does: ``cd x &&``, spacing, quotes."""
    command = re.sub(r"^\s*cd\s+\S+\s*(&&|;)\s*", "", command.strip())
    command = re.sub(r"\s*2>&1\s*", " ", command)
    command = re.sub(r"\|\s*(head|tail)(\s+-n)?\s+-?\d+\s*$", "", command)
    return re.sub(r"\s+", " ", command.replace('"', "'")).strip()


def action_key(record: ActionRecord) -> str:
    """What the step did: its tool and normalised parameters (a shell command, normalised)."""
    command = shell_command(record)
    if command:
        return f"{record.tool}:{normalise_command(command)}"
    try:
        params = json.dumps(record.params, sort_keys=True, default=str)
    except (TypeError, ValueError):
        params = str(record.params)
    params = " ".join(params.split())
    return f"{record.tool}:{record.action_type}:{params}"


def is_edit(record: ActionRecord) -> bool:
    return record.action_type in ("edit", "modify", "write", "modify_code") or "modify" in record.data


def is_check(record: ActionRecord) -> bool:
    """A step that runs something to see what it does (a test, a script, a build)."""
    return record.action_type in ("run", "test", "shell") and not is_edit(record)


def edited_path(record: ActionRecord) -> str:
    """The file an edit changed, where the step says."""
    for key in ("path", "file", "filename", "file_path"):
        value = record.params.get(key) if isinstance(record.params, dict) else None
        if isinstance(value, str):
            return value
    modify = record.data.get("modify") if isinstance(record.data, dict) else None
    if isinstance(modify, dict) and modify.get("path"):
        return str(modify["path"])
    command = shell_command(record)
    m = re.search(r"(?:>\s*|sed\s+-i\S*\s+(?:'[^']*'|\"[^\"]*\"|\S+)\s+)([\w./-]+\.\w+)", command)
    return m.group(1) if m else ""


@dataclass(slots=True)
class Edit:
    """What an edit step changed, as far as the step says: file, line range, new and old text."""

    path: str
    start: int | None
    end: int | None
    new: str
    old: str | None
    lines: int

    @property
    def small(self) -> bool:
        return self.lines <= 3


_SED_RANGE = re.compile(r"sed\s+-i\S*\s+['\"]?(\d+)(?:,(\d+))?\s*[scdai]")
_BIG = 10_000


def edit_info(record: ActionRecord) -> Edit | None:
    """The edit a step made, or None when it made none (or failed)."""
    if not record.ok or not is_edit(record):
        return None
    params = record.params if isinstance(record.params, dict) else {}
    modify = record.data.get("modify") if isinstance(record.data, dict) else None
    path = edited_path(record)
    if isinstance(modify, dict) and "start_line" in modify:
        try:
            start, end = int(modify["start_line"]), int(modify["end_line"])
        except (KeyError, TypeError, ValueError):
            return None
        return Edit(path, start, end, str(modify.get("content", "")), None, end - start + 1)
    if isinstance(params.get("new_str"), str) or isinstance(params.get("old_str"), str):
        new, old = str(params.get("new_str") or ""), str(params.get("old_str") or "")
        return Edit(path, None, None, new, old, max(len(new.splitlines()), len(old.splitlines()), 1))
    if isinstance(params.get("start"), int) and isinstance(params.get("content"), str):
        start, raw_end = params["start"], params.get("end")
        try:  # a recorded or imported step may give no end, or one that is not a number
            end = start if raw_end is None else int(raw_end)
        except (TypeError, ValueError):
            return None
        return Edit(path, start, end, params["content"], None, end - start + 1)
    command = shell_command(record)
    m = _SED_RANGE.search(command)
    if m:
        start = int(m.group(1))
        end = int(m.group(2) or start)
        return Edit(path, start, end, command, None, end - start + 1)
    if command.lstrip().startswith("sed") and " -i" in command:
        return Edit(path, None, None, command, None, 1)
    text = params.get("file_text") or params.get("content") or command
    return Edit(path, None, None, str(text), None, _BIG)


def _lines(text: str | None) -> set[str]:
    return {line.strip() for line in (text or "").splitlines() if len(line.strip()) > 3}


def same_region(a: Edit, b: Edit, tolerance: int = 5) -> bool:
    """Two edits touch the same place: the same file, and nearby lines (or text that overlaps)."""
    if a.path and b.path and a.path != b.path:
        return False
    if a.start is not None and b.start is not None:
        return abs(a.start - b.start) <= tolerance and abs((a.end or a.start) - (b.end or b.start)) <= tolerance
    if b.old is not None:
        return bool(_lines(b.old) & (_lines(a.new) | _lines(a.old)))
    return bool(a.path) and a.path == b.path and a.start is None and b.start is None


def reverts(b: Edit, earlier: list[Edit]) -> bool:
    """``b`` puts back text that an earlier edit of the same file replaced, or wrote before."""
    new = " ".join(b.new.split())
    for a in earlier:
        if a.path and b.path and a.path != b.path:
            continue
        if a.old is not None and new == " ".join(a.old.split()):
            return True
    # v1, v2, v1: the same content written again after something else
    return any(" ".join(a.new.split()) == new for a in earlier[:-1])
