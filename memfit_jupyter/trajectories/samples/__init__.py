"""Small sample trajectories, one per format ``load_trajectory`` reads.

They were written for this project by ``make_samples.py`` (not taken from any
published run) and are under the project's licence.  All but one hold a short
healthy stretch and then the loop real agents make most: edit, rerun, the same
failing output; ``mini_swe_healthy.traj.json`` fixes, checks and submits.  ``sample(name)`` is the path of one of them.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
NAMES = ("mini_swe_v1.traj.json", "mini_swe_healthy.traj.json", "mini_swe_v2.traj.json", "swe_agent.traj", "openhands_events.json",
         "otlp_genai.json")


def sample(name: str) -> Path:
    """The path of a shipped sample (one of ``NAMES``)."""
    if name not in NAMES:
        raise ValueError(f"no sample {name!r}; samples are: {', '.join(NAMES)}")
    return HERE / name
