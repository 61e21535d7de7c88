"""Checks of the numbers a limit or a setting is made of, where it is made.

A limit of the wrong kind (a string, ``nan``, ``inf``, a negative number) must
fail where it is given, with one line naming the field and the value, not deep
inside a run (``int(inf)`` in the cost cap, ``nan`` comparing false against
every elapsed time, so a run with no limit at all).
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any


def check_number(field: str, value: Any, *, above: float | None = None, at_least: float | None = None,
                 integer: bool = False) -> None:
    """Raise ``ValueError`` naming ``field`` unless ``value`` is a finite number (an integer when
    ``integer``) greater than ``above`` / at least ``at_least``.

    >>> check_number("max_cost_usd", float("nan"), above=0)
    Traceback (most recent call last):
    ...
    ValueError: max_cost_usd must be a finite number greater than 0, got nan
    """
    kind = "an integer" if integer else "a finite number"
    bound = f" greater than {above:g}" if above is not None else (
        f" at least {at_least:g}" if at_least is not None else "")
    wanted = Integral if integer else Real
    ok = not isinstance(value, bool) and isinstance(value, wanted) and math.isfinite(value)
    if ok and above is not None:
        ok = value > above
    if ok and at_least is not None:
        ok = value >= at_least
    if not ok:
        raise ValueError(f"{field} must be {kind}{bound}, got {value!r}")
