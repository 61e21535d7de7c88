"""Shell and python in a bubblewrap sandbox: the working folder read-write, the system read-only,
home and everything else hidden, no network.

``sandbox_for(choice)`` gives the ``Bubblewrap`` that a run's shell and python commands are
wrapped in, or None (they run as the kernel's user, unconfined).  Inside the sandbox:

- the working folder is the only folder of the machine that can be written, at its own path;
- ``/usr``, ``/etc`` (and ``/bin``, ``/lib``... as the machine has them) and the Python that runs
  memfit are there read-only, but for the system's secrets under /etc (``SYSTEM_SECRETS``: password
  hashes, SSH and TLS private keys), which are empty; ``/tmp`` is an empty, private tmpfs that
  disappears with the command;
- home folders, ``/work``, ``/opt``, ``/mnt``, the other processes and every other file are not
  there at all;
- there is no network (a new network namespace with only its own loopback), no capability, a new
  session (no typing into the terminal), and an environment with only ``PATH``, ``HOME=/tmp`` and
  the locale: API keys and other secrets in the kernel's environment are not passed on.

bubblewrap (``bwrap``) is an existing, well-kept isolation tool (Flatpak's); memfit only chooses its
arguments.  Whether it works is found out once per process by running it (a container may refuse
the namespaces it needs): ``bwrap_problem()`` says why not, in one line.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import MemfitError

#: The values of ``ToolPolicy.sandbox``.
SANDBOX_CHOICES = ("none", "auto", "bwrap")
#: Top-level folders of the system, shown read-only (as symbolic links where the machine has
#: merged them into /usr).
SYSTEM_DIRS = ("/usr", "/etc")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Secrets of the system under /etc, hidden (emptied) in the sandbox: password hashes, the
#: machine's SSH and TLS private keys.  The sandbox's root can read what the machine's root owns.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh",
                  "/etc/ssl/private", "/etc/sudoers", "/etc/sudoers.d")
#: Seconds the one-time check that bubblewrap works may take.
PROBE_TIMEOUT_S = 20.0


class SandboxUnavailableError(MemfitError, ValueError):
    """A sandbox was asked for and this machine cannot make one."""


def python_roots() -> list[str]:
    """The folders of the Python that runs memfit (its installation and virtualenv), so that a
    sandboxed ``python`` finds the same interpreter and packages, read-only."""
    roots: list[str] = []
    for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, str(Path(sys.executable).resolve().parent.parent)):
        real = os.path.realpath(p)
        if real not in roots:
            roots.append(real)
    # A folder inside another, or inside the system folders, is already there.
    covered = [*SYSTEM_DIRS, *roots]
    return [r for r in roots if not any(r != c and _inside(r, c) for c in covered)]


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass(frozen=True)
class Bubblewrap:
    """Commands wrapped in ``bwrap`` with the working folder as the only writable place."""

    #: The bwrap executable.
    executable: str

    def wrap(self, argv: list[str], workdir: Path | str) -> list[str]:
        """``argv`` as it runs in the sandbox, in ``workdir`` (which it can read and write)."""
        work = os.path.realpath(workdir)
        args = [self.executable,
                "--unshare-all", "--unshare-user", "--cap-drop", "ALL",  # no network, no capabilities
                "--die-with-parent", "--new-session",
                "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for d in SYSTEM_DIRS:
            args += ["--ro-bind", d, d]
        for secret in SYSTEM_SECRETS:
            if os.path.isdir(secret) and not os.path.islink(secret):
                args += ["--tmpfs", secret, "--remount-ro", secret]
            elif os.path.lexists(secret):
                args += ["--ro-bind", "/dev/null", secret]
        for d in SYSTEM_LINKS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        for root in python_roots():
            args += ["--ro-bind", root, root]
        args += ["--bind", work, work, "--chdir", work, "--clearenv"]
        for name, value in self.environment().items():
            args += ["--setenv", name, value]
        return [*args, "--", *argv]

    @staticmethod
    def environment() -> dict[str, str]:
        """The whole environment of a sandboxed command: no secret of the kernel's is passed on."""
        python_bin = str(Path(sys.executable).resolve().parent)
        env = {"PATH": f"{python_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": os.environ.get("LANG") or "C.UTF-8"}
        if os.environ.get("LC_ALL"):
            env["LC_ALL"] = os.environ["LC_ALL"]
        return env


@functools.cache
def bwrap_problem() -> str | None:
    """Why this machine cannot run the sandbox (one line), or None when it can.

    Found out once per process by running ``true`` in it with the very arguments the tools use.
    """
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed; on Debian or Ubuntu: apt-get install bubblewrap"
    with tempfile.TemporaryDirectory(prefix="memfit-sandbox-check-") as work:
        try:
            proc = subprocess.run(Bubblewrap(exe).wrap(["true"], work), capture_output=True, text=True,
                                  timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not be run: {type(exc).__name__}: {exc}"
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        return f"bubblewrap cannot make a sandbox here: {said[-1] if said else f'exit code {proc.returncode}'}"
    return None


def sandbox_for(choice: str) -> Bubblewrap | None:
    """The sandbox of ``ToolPolicy.sandbox``: ``none`` gives None; ``bwrap`` a ``Bubblewrap`` or a
    ``SandboxUnavailableError`` saying why not; ``auto`` a ``Bubblewrap`` where the machine can make
    one, else None."""
    if choice not in SANDBOX_CHOICES:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_CHOICES)}, got {choice!r}")
    if choice == "none":
        return None
    problem = bwrap_problem()
    if problem is None:
        return Bubblewrap(shutil.which("bwrap") or "bwrap")
    if choice == "bwrap":
        raise SandboxUnavailableError(f"sandbox='bwrap' was asked for and is not available: {problem}")
    _warn_unconfined(problem)
    return None


@functools.cache
def _warn_unconfined(problem: str) -> None:
    """Said once per process: ``auto`` found no sandbox, so shell and python run unconfined."""
    from .secrets import package_logger

    package_logger().warning("sandbox='auto': %s; shell and python run unconfined", problem)
