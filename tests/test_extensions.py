"""Declared extensions: one interface, config dataclasses with the seed defaults, services, reopen."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.context.tiers import ContextConfig
from memfit_jupyter.extension import HOOKS, Extension, Hooks, adapt
from memfit_jupyter.memory import MemoryConfig
from memfit_jupyter.reflection.config import ReflectionConfig
from memfit_jupyter.reliability.config import ReliabilityConfig

PACKAGE = Path(__file__).resolve().parent.parent / "memfit_jupyter"


def test_flat_arguments_default_to_the_feature_configs_and_fill_them(tmp_path):
    agent = Agent(model="memfit/demo", workdir=tmp_path, memory=False)
    for cls in (ReflectionConfig, ReliabilityConfig, ContextConfig, MemoryConfig):
        assert agent.config(cls) == cls()
    assert (agent.spin_threshold, agent.samples, agent.max_trials, agent.failure_threshold) == (
        ReflectionConfig.spin_threshold, ReliabilityConfig.samples, ContextConfig.max_trials,
        ReliabilityConfig.failure_threshold)
    tuned = Agent(model="memfit/demo", workdir=tmp_path, memory=False, spin_threshold=5, samples=4)
    assert tuned.config(ReflectionConfig).spin_threshold == 5 and tuned.config(ReliabilityConfig).samples == 4
    whole = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                  configs=[ReliabilityConfig(failure_threshold=7), ReflectionConfig(iteration_threshold=8)])
    assert whole.failure_threshold == 7 and whole.breakers.metrics()["primary"]["failure_threshold"] == 7
    assert whole.config(ReflectionConfig).iteration_threshold == 8
    assert whole.settings()["failure_threshold"] == 7
    with pytest.raises(ValueError, match="failure_threshold"):
        Agent(model="memfit/demo", failure_threshold=0)


def test_every_config_field_is_documented_with_its_default():
    for cls in (ReflectionConfig, ReliabilityConfig, ContextConfig, MemoryConfig):
        assert cls.__doc__
        source = Path(sys.modules[cls.__module__].__file__).read_text()
        for f in fields(cls):
            assert re.search(rf"#: .*\n\s+{f.name}:", source), f"{cls.__name__}.{f.name} has no comment"


def test_extensions_provide_services_instead_of_setting_them_on_the_run(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path).start("add up data.txt")
    assert set(run.services) == {"context", "memory", "breakers"}
    assert run.memory is run.services["memory"] and run.context is run.services["context"]
    assert all(isinstance(e, Extension) for e in run.extensions)
    with pytest.raises(AttributeError):
        run.memory = None  # a view of the services, not an attribute to set
    off = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    assert off.memory is None and "memory" not in off.services


def test_a_partial_user_extension_gets_its_hooks_and_its_services_shared(tmp_path):
    calls = []

    class Counter:
        def before_iteration(self, run):
            calls.append(run.iteration)

        def provides(self):
            return {"counter": calls}

    ext = adapt(Counter())
    assert isinstance(ext, Hooks) and all(callable(getattr(ext, h)) for h in HOOKS)
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False, extensions=[Counter()]).start("add up")
    assert run.run().status == "done"
    assert calls == list(range(1, run.iteration + 1)) and run.services["counter"] is calls
    assert run.events[0]["extensions"][0] == "Counter"


def test_reopen_is_the_one_way_a_finished_run_goes_on(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    with pytest.raises(RuntimeError, match="has not ended"):
        run.reopen()
    run.run()
    run.reopen("[SYSTEM] go on")
    assert run.status == "running" and run.result is None
    assert run.timeline.entries[-1].content == "[SYSTEM] go on"
    pattern = re.compile(r"_recorded_events|run\.status = |run\.result = None")
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if p.name != "run.py" and pattern.search(p.read_text())]
    assert offenders == []


@pytest.mark.slow
def test_a_whole_run_with_memory_loads_neither_ipython_nor_ipywidgets(tmp_path):
    code = ("import sys\nfrom memfit_jupyter import Agent\n"
            f"run = Agent(model='memfit/memory-lesson', workdir={str(tmp_path)!r}).start('add up numbers.txt')\n"
            "assert run.run().status == 'done'\n"
            "assert any(e.type == 'memory' for e in run.events)\n"
            "print([m for m in ('IPython', 'ipywidgets') if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin",
                              **{k: v for k, v in __import__("os").environ.items() if k == "PYTHONPATH"}})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
