"""Loading litellm: once per process, offline (``LITELLM_LOCAL_MODEL_COST_MAP=True``, so that it
never reaches for the network to fetch its price list), quietly, with the scripted provider
registered.  Everything in the package that needs litellm gets it from ``import_litellm``.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import sys
import threading
from types import ModuleType

_litellm: ModuleType | None = None
#: One import at a time: a run may load litellm on a worker thread (under its deadline) while
#: another thread asks for it.
_import_lock = threading.RLock()
#: Modules that hold the litellm they imported: a failed import must take them along.
_HOLDERS = (f"{__package__}.provider",)


def litellm_loaded() -> bool:
    """Whether litellm is imported (and the scripted provider registered) in this process."""
    return _litellm is not None


def import_litellm() -> ModuleType:
    """Import litellm once, offline, quietly; register the scripted provider.

    An import that fails or is interrupted (Interrupt Kernel lands in the seconds it takes)
    leaves nothing half-initialised behind: litellm's modules are taken out of ``sys.modules``,
    so that the next call imports it afresh instead of failing on a partly run package.
    """
    global _litellm
    if _litellm is not None:
        return _litellm
    _wait_at_exit()
    with _import_lock:
        if _litellm is None:
            try:
                _litellm = _load_litellm()
            except BaseException:
                _forget_litellm()
                raise
    return _litellm


#: Longest the interpreter's exit waits for an import still going on (``_wait_at_exit``).
EXIT_WAIT_S = 60.0


@functools.cache
def _wait_at_exit() -> None:
    """At exit, wait for an import still going on on a worker thread (a run whose time ran out
    while litellm loaded leaves it to finish there): a daemon thread stopped in the middle of
    loading extension modules aborts the process ("FATAL: exception not rethrown")."""
    def wait() -> None:
        if _import_lock.acquire(timeout=EXIT_WAIT_S):
            _import_lock.release()

    atexit.register(wait)


def _load_litellm() -> ModuleType:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    for name in ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from . import provider

    provider.register()
    return litellm


def _forget_litellm() -> None:
    """Take litellm, its submodules and the modules holding it out of ``sys.modules``."""
    for name in [m for m in sys.modules if m == "litellm" or m.startswith("litellm.") or m in _HOLDERS]:
        sys.modules.pop(name, None)
