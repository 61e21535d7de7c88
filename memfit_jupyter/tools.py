"""The agent's tools: small functions with a declared parameter list.

A tool never raises to the loop: anything that goes wrong becomes a
``ToolResult(ok=False, error=...)``, which the agent sees as an observation
and which always gets a CRITICAL reflection.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import PathOutsideWorkdirError, UnknownToolError
from .records import ReflectionLevel, ToolResult
from .secrets import redact_ends

if TYPE_CHECKING:
    from .protocols import RunView
    from .sandbox import Bubblewrap

_TYPES: dict[str, type | tuple[type, ...]] = {
    "str": str, "int": int, "bool": bool, "float": (int, float), "list": list, "dict": dict,
}
MAX_OUTPUT = 8_000


@dataclass(slots=True)
class Param:
    type: str = "str"
    description: str = ""
    required: bool = True


@dataclass
class ToolContext:
    """What a tool may touch: the working directory, the Python namespace, the person."""

    workdir: Path
    namespace: dict[str, Any] = field(default_factory=dict)
    ask_user: Callable[[str], str] | None = None
    shell_timeout_s: float = 30.0
    #: The run the tool acts for (None for a context made by hand, outside any run).
    run: RunView | None = None
    #: The sandbox shell and python run in (``sandbox.Bubblewrap``), or None: they run as the
    #: kernel's user, unconfined (``tool_policy.py``).
    sandbox: Bubblewrap | None = None

    def resolve(self, path: str) -> Path:
        root = self.workdir.resolve()
        target = (root / path).resolve()
        if not target.is_relative_to(root):
            raise PathOutsideWorkdirError(
                f"path {path!r} is outside the working directory {str(root)!r}"
            )
        return target


@dataclass
class Tool:
    name: str
    description: str
    params: dict[str, Param]
    fn: Callable[..., ToolResult]
    #: A reflection level this tool always asks for (MECHANISMS.md §1.2), or None.
    reflection_level: ReflectionLevel | None = None
    #: Complex actions get DEEP reflection.
    complex: bool = False
    #: Its effects are the run's own (model calls, memory), not the world's: a replay runs it
    #: again rather than taking its recorded observation.
    internal: bool = False
    #: What it can reach, for the tool policy (``tool_policy.py``): ``none`` (the run's own
    #: answers and memory), ``read`` or ``write`` (files in the working folder only), ``exec``
    #: (it runs code: anywhere the kernel's user can, unless sandboxed).
    access: str = "none"

    def validate(self, params: Any) -> str | None:
        """Return a one-line error for bad parameters, or None."""
        if not isinstance(params, dict):
            return f"params for {self.name} must be an object, got {type(params).__name__}"
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            return f"{self.name} got unknown parameter(s) {', '.join(unknown)}; expected {self.signature()}"
        for name, spec in self.params.items():
            if name not in params:
                if spec.required:
                    return f"{self.name} is missing required parameter {name!r}; expected {self.signature()}"
                continue
            expected = _TYPES.get(spec.type, object)
            value = params[name]
            if isinstance(value, bool) and spec.type in ("int", "float"):
                return f"{self.name}.{name} must be {spec.type}, got bool"
            if not isinstance(value, expected):
                return f"{self.name}.{name} must be {spec.type}, got {type(value).__name__}"
        return None

    def signature(self) -> str:
        parts = [f"{n}: {p.type}{'' if p.required else '?'}" for n, p in self.params.items()]
        return f"{self.name}({', '.join(parts)})"

    def describe(self) -> str:
        return f"- {self.signature()}: {self.description}"

    def __call__(self, ctx: ToolContext, params: dict[str, Any]) -> ToolResult:
        problem = self.validate(params)
        if problem:
            return ToolResult(ok=False, error=f"invalid parameters: {problem}")
        try:
            return self.fn(ctx, **params)
        except PathOutsideWorkdirError as exc:
            return ToolResult(ok=False, error=str(exc))
        except Exception as exc:  # a tool must never take the loop down
            return ToolResult(ok=False, error=f"{type(exc).__name__}: {exc}")


def _clip(text: str, limit: int = MAX_OUTPUT) -> str:
    if len(text) <= limit:
        return text  # redacted whole when its event is emitted
    # Redacted before it is cut: a key across a cut would leave two pieces no pattern recognizes.
    head, tail = redact_ends(text, limit // 2)
    if not tail:  # the keys replaced, it fits
        return head
    return head + f"\n... [{len(text) - limit} characters cut] ...\n" + tail


# --- the built-in tools ---------------------------------------------------------------


def _python(ctx: ToolContext, code: str) -> ToolResult:
    if ctx.sandbox is not None:
        return _sandboxed_python(ctx, ctx.sandbox, code)
    out = io.StringIO()
    try:
        tree = ast.parse(code, mode="exec")
        last_expr = None
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr):  # its value is shown, as in a notebook cell
            tree.body.pop()
            last_expr = ast.Expression(last.value)
        with contextlib.chdir(ctx.workdir), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(tree, "<memfit python>", "exec"), ctx.namespace)
            value = eval(compile(last_expr, "<memfit python>", "eval"), ctx.namespace) if last_expr else None
    except SystemExit as exc:  # sys.exit() or exit() in the agent's code ends that code, not the run
        if exc.code in (None, 0):
            return ToolResult(output=_clip(out.getvalue()))
        return ToolResult(output=_clip(out.getvalue()), ok=False, error=f"the code exited: sys.exit({exc.code!r})")
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)
        return ToolResult(output=_clip(out.getvalue()), ok=False, error="".join(tb).strip())
    text = out.getvalue()
    if value is not None:
        text += repr(value)
    return ToolResult(output=_clip(text))


def _shell(ctx: ToolContext, command: str) -> ToolResult:
    argv = ["/bin/sh", "-c", command]
    if ctx.sandbox is not None:
        argv = ctx.sandbox.wrap(argv, ctx.workdir)
    done = _run_process(argv, ctx.workdir, ctx.shell_timeout_s)
    data: dict[str, Any] = {"sandbox": "bwrap"} if ctx.sandbox is not None else {}
    if done is None:
        return ToolResult(ok=False, error=f"command timed out after {ctx.shell_timeout_s:g} s", data=data)
    code, stdout, stderr = done
    text = _clip(stdout + stderr)
    data = {"exit_code": code, **data}
    if code != 0:
        return ToolResult(output=text, ok=False, error=f"exit code {code}", data=data)
    return ToolResult(output=text, data=data)


#: Words before a command's program: what it runs under, not what it runs.
_SKIP = {"cd", "sudo", "env", "time", "timeout", "source", "export", "set", "true", "nohup"}


def command_program(command: str) -> str:
    """The program a shell command runs first (after ``cd x &&``, env assignments, sudo...): the
    package's one parser of shell programs (spin detectors, trajectory readers)."""
    for segment in re.split(r"&&|\|\||;|\n", command or ""):
        if segment.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(segment, comments=True, posix=True)
        except ValueError:
            words = segment.split()
        words = [w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
        while words and (words[0] in _SKIP or words[0].startswith("-") or words[0].isdigit()):
            if words[0] == "cd":
                words = []
                break
            words = words[1:]
        if words:
            return words[0].rsplit("/", 1)[-1] if not words[0].startswith("./") else "./"
    return ""


def _run_process(argv: list[str], cwd: Path, timeout_s: float, stdin: str | None = None,
                 ) -> tuple[int, str, str] | None:
    """Run ``argv`` in its own session; None when it outlives ``timeout_s``.  On a timeout, or
    when the person interrupts the kernel (the session does not get the kernel's SIGINT), the
    whole session is killed, so a child it left in the background does not go on running; its
    output is not waited for (a child that left the session could hold the pipes open)."""
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        return None
    except KeyboardInterrupt:
        _kill_session(proc)
        raise
    return proc.returncode, stdout, stderr


def _kill_session(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


#: What a sandboxed ``python`` call runs: the code (read from stdin) as the in-kernel tool runs
#: it, a final expression's value shown; everything it prints, and everything its child
#: processes print, goes to stderr (fd 1 is pointed there), and the outcome goes, as JSON, to
#: the original stdout.
_SANDBOX_RUNNER = """
import ast, json, os, sys, traceback
code = sys.stdin.read()
sys.stdin = open(os.devnull)
result = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
outcome = {"value": None, "error": None}
try:
    tree = ast.parse(code, mode="exec")
    last = tree.body[-1] if tree.body else None
    last_expr = None
    if isinstance(last, ast.Expr):
        tree.body.pop()
        last_expr = ast.Expression(last.value)
    namespace = {"__name__": "__main__"}
    exec(compile(tree, "<memfit python>", "exec"), namespace)
    if last_expr is not None:
        value = eval(compile(last_expr, "<memfit python>", "eval"), namespace)
        if value is not None:
            outcome["value"] = repr(value)
except SystemExit as exc:
    if exc.code not in (None, 0):
        outcome["error"] = f"SystemExit: {exc.code}"
except BaseException as exc:
    outcome["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
sys.stdout.flush()
sys.stderr.flush()
result.write(json.dumps(outcome))
result.flush()
"""


def _sandboxed_python(ctx: ToolContext, sandbox: Bubblewrap, code: str) -> ToolResult:
    """``python`` in the sandbox: a fresh interpreter (the kernel's own, read-only) per call."""
    argv = sandbox.wrap([str(Path(sys.executable).resolve()), "-u", "-c", _SANDBOX_RUNNER], ctx.workdir)
    done = _run_process(argv, ctx.workdir, ctx.shell_timeout_s, stdin=code)
    data = {"sandbox": "bwrap"}
    if done is None:
        return ToolResult(ok=False, error=f"python timed out after {ctx.shell_timeout_s:g} s", data=data)
    exit_code, stdout, printed = done
    try:
        outcome = json.loads(stdout)
    except ValueError:
        return ToolResult(output=_clip(printed), ok=False, data=data,
                          error=f"the sandboxed python process ended without a result (exit code {exit_code})")
    if outcome.get("error"):
        return ToolResult(output=_clip(printed), ok=False, error=str(outcome["error"]), data=data)
    value = outcome.get("value")
    return ToolResult(output=_clip(printed + (value if value is not None else "")), data=data)


def _read_file(ctx: ToolContext, path: str) -> ToolResult:
    target = ctx.resolve(path)
    if not target.is_file():
        return ToolResult(ok=False, error=f"no such file: {path}")
    return ToolResult(output=_clip(target.read_text(errors="replace")))


def _write_file(ctx: ToolContext, path: str, content: str) -> ToolResult:
    target = ctx.resolve(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.memfit-tmp")
    tmp.write_text(content)
    os.replace(tmp, target)
    return ToolResult(output=f"wrote {len(content)} characters to {path}")


def _modify_code(ctx: ToolContext, path: str, start: int, end: int, content: str) -> ToolResult:
    target = ctx.resolve(path)
    if not target.is_file():
        return ToolResult(ok=False, error=f"no such file: {path}")
    lines = target.read_text().splitlines(keepends=True)
    if start < 1 or end < start - 1 or start > len(lines) + 1:
        return ToolResult(ok=False, error=f"line range {start}..{end} is not valid for a file of {len(lines)} lines")
    new = content.splitlines(keepends=True)
    if new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    lines[start - 1 : end] = new
    tmp = target.with_name(f".{target.name}.memfit-tmp")
    tmp.write_text("".join(lines))
    os.replace(tmp, target)
    record = {"path": path, "start_line": start, "end_line": end, "content": content}
    return ToolResult(output=f"replaced lines {start}..{end} of {path}", data={"modify": record})


def _finish(ctx: ToolContext, answer: str) -> ToolResult:
    return ToolResult(output=answer, data={"final": True})


def _ask_user(ctx: ToolContext, question: str) -> ToolResult:
    if ctx.ask_user is None:
        return ToolResult(output="No person is available to answer; decide on your own.")
    return ToolResult(output=str(ctx.ask_user(question)))


BUILTIN_TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("python", "run Python code; the value of a final expression is shown", {"code": Param()}, _python, access="exec"),
        Tool("shell", "run a shell command in the working directory", {"command": Param()}, _shell, access="exec"),
        Tool("read_file", "read a text file in the working directory", {"path": Param()}, _read_file, access="read"),
        Tool(
            "write_file",
            "write a text file in the working directory",
            {"path": Param(), "content": Param()},
            _write_file,
            access="write",
        ),
        Tool(
            "modify_code",
            "replace lines start..end (1-based, inclusive) of a file with new content",
            {"path": Param(), "start": Param("int"), "end": Param("int"), "content": Param()},
            _modify_code,
            access="write",
        ),
        Tool("finish", "end the task with the final answer", {"answer": Param()}, _finish),
        Tool("ask_user", "ask the person a question", {"question": Param()}, _ask_user),
    )
}


#: Tools that feature extensions add to a run (memory, context tiers, recursive calls).  They
#: exist only once a run has its extensions, so ``Agent(tools=...)`` checks names against this.
EXTENSION_TOOL_NAMES = (
    "memory_search", "memory_insert", "sub_query",
    "archival_memory_insert", "archival_memory_search", "conversation_search",
    "core_memory_append", "core_memory_replace",
)


def select_tools(names: Iterable[str] | None, extra: Iterable[Tool] = (),
                 also_known: Iterable[str] = ()) -> dict[str, Tool]:
    """The tool set for a run: all built-ins (plus extras), or only ``names``.

    ``finish`` is always included: without it a run cannot end well.  Names in
    ``also_known`` are accepted without being in the set (checked before a run exists).
    """
    available = dict(BUILTIN_TOOLS)
    for tool in extra:
        available[tool.name] = tool
    if names is None:
        return available
    wanted = [n.strip() for n in names if n and n.strip()]
    known = set(available) | set(also_known)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise UnknownToolError(
            f"unknown tool(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}"
        )
    chosen = {n: available[n] for n in wanted if n in available}
    chosen.setdefault("finish", available["finish"])
    return chosen
