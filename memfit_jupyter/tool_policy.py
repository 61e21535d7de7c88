"""The tool policy: which tool calls wait for a person's approval, and where shell and python run.

The file tools (``read_file``, ``write_file``, ``modify_code``) refuse any path outside the working
folder.  ``shell`` and ``python`` run code, and code can reach anywhere the kernel's user can:
they are *unconfined* unless the run has a sandbox (``sandbox.py``).  So by default a run whose
model is a real one asks a person before each unconfined call; a scripted model
(``memfit/<scenario>``) is never asked about, so the offline demos and tests run as they always
have.  A replay follows its recording: the approvals it recorded, no others.

A call that needs approval goes through the run's approval gate (``steering.Approvals``): the
agent's ``approve`` callback decides it, or holds it for the person (the widget's Approve and
Reject).  A run with no callback has no way to ask: the call is refused, and the refusal, which
says how to allow it, is the call's observation (a failed action, so it is reflected on).

>>> Agent(model="openai/gpt-4o-mini", approve_tools="writes", sandbox="bwrap")   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .tools import BUILTIN_TOOLS, EXTENSION_TOOL_NAMES, Tool

if TYPE_CHECKING:
    from .sandbox import Bubblewrap

#: The kinds ``approve_tools`` may name (``ToolPolicy.approve_tools`` says what each asks about).
APPROVE_KINDS = ("auto", "unconfined", "writes", "always", "never")
#: Kinds that stand alone: they cannot be combined with others or with tool names.
_ALONE = ("auto", "always", "never")


@dataclass(frozen=True)
class ToolPolicy:
    """Which tool calls wait for a person's approval, and where shell and python run.

    ``Agent(approve_tools=..., sandbox=...)`` fill it; or give one whole:
    ``Agent(configs=[ToolPolicy(approve_tools="writes")])``.  An ``Agent(approve=callback)`` given
    without either asks the callback about every call, as ``approve`` always did.
    """

    #: Which tool calls wait for a person's approval: ``auto`` (``unconfined`` when a model of
    #: the run is a real one, ``never`` when every tier is a scripted ``memfit/<scenario>``),
    #: ``unconfined`` (shell and python, unless sandboxed), ``writes`` (shell and python, sandboxed
    #: or not, write_file and modify_code), ``always`` (every call but finish) or ``never``; or
    #: tool names, comma-separated, alone or beside ``unconfined`` or ``writes``
    #: (``"unconfined,memory_insert"``).
    approve_tools: str = "auto"
    #: Where shell and python run: ``none`` (as the kernel's user, unconfined), ``bwrap`` (in a
    #: bubblewrap sandbox: the working folder read-write, the system read-only, the rest hidden,
    #: no network; an error where the machine cannot make one) or ``auto`` (bwrap where the
    #: machine can, else none, with a warning).  A sandboxed python call runs in a fresh process:
    #: it does not see the notebook's variables and keeps none between calls.
    sandbox: str = "none"

    def __post_init__(self) -> None:
        from .sandbox import SANDBOX_CHOICES

        if self.sandbox not in SANDBOX_CHOICES:
            raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_CHOICES)}, got {self.sandbox!r}")
        if not isinstance(self.approve_tools, str):
            raise ValueError(f"approve_tools must be a string such as 'unconfined', got {self.approve_tools!r}")
        parts = self.parts()
        if not parts:
            raise ValueError(f"approve_tools is empty; give one of {', '.join(APPROVE_KINDS)} or tool names")
        known = set(APPROVE_KINDS) | set(BUILTIN_TOOLS) | set(EXTENSION_TOOL_NAMES)
        unknown = [p for p in parts if p not in known]
        if unknown:
            raise ValueError(f"approve_tools names {', '.join(map(repr, unknown))}, which is neither a kind "
                             f"({', '.join(APPROVE_KINDS)}) nor a tool")
        alone = [p for p in parts if p in _ALONE]
        if alone and len(parts) > 1:
            raise ValueError(f"approve_tools={self.approve_tools!r}: {alone[0]!r} cannot be combined with anything")

    def parts(self) -> tuple[str, ...]:
        """The kinds and tool names of ``approve_tools``."""
        return tuple(p.strip() for p in self.approve_tools.split(",") if p.strip())

    def resolved(self, real_model: bool) -> tuple[str, ...]:
        """``parts()`` with ``auto`` decided for a run whose model is a real one (or not)."""
        parts = self.parts()
        if parts == ("auto",):
            return ("unconfined",) if real_model else ("never",)
        return parts

    def asks(self, tool: Tool | None, *, real_model: bool, sandboxed: bool) -> bool:
        """Does a call of ``tool`` wait for a person's approval?  (An unknown tool is never run, so
        it is never asked about; ``finish`` is never asked about.)"""
        if tool is None or tool.name == "finish":
            return False
        parts = self.resolved(real_model)
        access = getattr(tool, "access", "none")
        return ("always" in parts or tool.name in parts
                or ("unconfined" in parts and access == "exec" and not sandboxed)
                or ("writes" in parts and access in ("exec", "write")))

    def lets_through(self, other: ToolPolicy, *, real_model: bool) -> list[str]:
        """The built-in tools ``other`` asks a person about (sandboxed or not) and this policy
        lets run unasked, by name: empty when this one asks at least as much."""
        return [tool.name for tool in BUILTIN_TOOLS.values()
                if any(other.asks(tool, real_model=real_model, sandboxed=boxed)
                       and not self.asks(tool, real_model=real_model, sandboxed=boxed) for boxed in (False, True))]

    def refusal(self, tool: Tool, *, real_model: bool, sandboxed: bool) -> str:
        """The observation of a call that needs approval in a run that has no way to ask: why it was
        not run, and how to allow it (one line)."""
        unconfined = getattr(tool, "access", "none") == "exec" and not sandboxed
        why = " (it runs unconfined, as the kernel's user)" if unconfined else ""
        ways = ["run the task in a notebook with %%memfit_task (the widget asks)",
                "give the Agent an approve callback", "set approve_tools='never'"]
        if unconfined:
            ways.append("confine it with sandbox='bwrap'")
        setting = f"approve_tools={self.approve_tools!r}" + (" with a real model" if self.parts() == ("auto",) else "")
        return (f"{tool.name} was not run: the tool policy ({setting}) asks a "
                f"person to approve it{why}, and this run has no way to ask. To allow it, "
                f"{', '.join(ways[:-1])} or {ways[-1]}.")


def policy_of(agent: Any) -> ToolPolicy:
    """The tool policy of ``agent`` (the default for an agent made without one)."""
    configs = getattr(agent, "configs", None) or {}
    policy = configs.get(ToolPolicy)
    return policy if isinstance(policy, ToolPolicy) else ToolPolicy()


def sandbox_of(agent: Any) -> Bubblewrap | None:
    """The sandbox ``agent``'s runs wrap shell and python in (``sandbox.sandbox_for``), or None;
    a ``SandboxUnavailableError`` when ``sandbox='bwrap'`` and the machine cannot make one."""
    choice = policy_of(agent).sandbox
    if choice == "none":
        return None
    from .sandbox import sandbox_for

    return sandbox_for(choice)


def real_model(agent: Any) -> bool:
    """Is a model of ``agent``'s tiers a real one (not a scripted ``memfit/<scenario>``)?"""
    return any_real((getattr(agent, "tiers", {}) or {}).values())


def any_real(models: Iterable[Any]) -> bool:
    """Is one of ``models`` (names, or None for a tier not set) a real one, not a scripted ``memfit/<scenario>``?"""
    return any(m and not str(m).startswith("memfit/") for m in models)
