"""One config: AgentConfig, the flat keyword arguments over it, and what is made from its fields
(the magic's options and help, the %config traitlets, the CLI's flags, the README's table)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memfit_jupyter import Agent, ExecutionGuarantees
from memfit_jupyter.config import (
    FEATURES,
    FLAT,
    OPTIONS,
    README,
    SETTINGS,
    TABLE_END,
    TABLE_START,
    AgentConfig,
    agent_kwargs,
    check_bounds,
    feature_classes,
    field_docs,
    options_table,
)
from memfit_jupyter.context.tiers import ContextConfig
from memfit_jupyter.records import ReflectionLevel
from memfit_jupyter.reflection.config import ReflectionConfig
from memfit_jupyter.reliability.config import ReliabilityConfig

SETTING_OPTIONS = [o for o in OPTIONS if o.setting]


def imported_default(path: str):
    """The default of the field at ``path``, from the imported classes (not from their source), as
    an option writes it (a reflection level by its name, as traces record it)."""
    value = AgentConfig().get(path)
    return value.name.lower() if isinstance(value, ReflectionLevel) else value


def test_the_fields_read_from_the_source_are_the_classes_own():
    for name, (module, cls_name) in {"": ("config", "AgentConfig"), **FEATURES}.items():
        cls = AgentConfig if not name else next(c for c, n in feature_classes().items() if n == name)
        assert cls.__name__ == cls_name
        parsed = field_docs(module, cls_name)
        assert set(parsed) == {f.name for f in dataclasses.fields(cls)}
        for f in dataclasses.fields(cls):
            assert parsed[f.name].doc, f"{cls_name}.{f.name} has no #: comment"
            if f.default is not dataclasses.MISSING and parsed[f.name].default is not dataclasses.MISSING:
                assert parsed[f.name].default == f.default, f"{cls_name}.{f.name}"


def test_every_option_with_a_setting_shows_the_config_s_own_default():
    for opt in SETTING_OPTIONS:
        assert opt.setting in FLAT
        assert opt.default == imported_default(FLAT[opt.setting]), opt.flag


def test_the_magic_s_help_is_the_config_s_with_the_usage_of_a_cell_magic():
    from memfit_jupyter.jupyter.magics import MemfitMagics

    doc = MemfitMagics.memfit_task.__doc__
    assert "%%memfit_task [--model M]" in doc and "%%%" not in doc
    bare = "".join(doc.split())  # argparse wraps lines, also inside hyphenated words
    for opt in OPTIONS:
        assert opt.flag in bare
        assert "".join(f"{opt.help} (default {opt.default_shown().replace('`', '')})".split()) in bare, opt.flag
    assert "Mostiterationsarunmaytake.(default20)" in bare
    assert "(default1.0)" in bare and "(default300.0)" in bare


def test_the_traitlets_are_made_from_the_options_with_the_config_s_defaults():
    from memfit_jupyter.jupyter.config import MemfitSettings

    settings = MemfitSettings()
    names = set(MemfitSettings.class_trait_names(config=True))
    for opt in OPTIONS:
        if opt.trait:
            assert opt.trait in names
            expected = None if opt.setting in ("model", None) else imported_default(FLAT[opt.setting])
            assert getattr(settings, opt.trait) == expected, opt.trait
    # the names users already set keep working
    assert {"model", "max_cost_usd", "max_duration_seconds", "max_recursive_calls", "memory_path",
            "reflection", "strategy", "structured", "api_base", "throttle_ms", "otel_endpoint"} <= names
    help_text = MemfitSettings.class_get_help()
    assert "Most a run may spend on model calls, in US dollars." in help_text


def test_the_readme_table_is_the_generated_one():
    text = README.read_text(encoding="utf-8")
    region = text[text.index(TABLE_START) + len(TABLE_START):text.index(TABLE_END)].strip()
    assert region == options_table().strip(), "run: python -m memfit_jupyter.config --write"
    for flag in ("`--api-base URL`", "`--fast-api-base URL`", "`--fallback-api-base URL`", "`--structured MODE`",
                 "`--fast-model M`", "`--fallback-model M`"):
        assert flag in region


def test_the_table_follows_a_changed_default(monkeypatch):
    from memfit_jupyter import config

    before = options_table()
    field_docs.cache_clear()
    real = config.field_docs.__wrapped__

    def moved(module, cls):
        found = dict(real(module, cls))
        if cls == "AgentConfig":
            found["max_iterations"] = dataclasses.replace(found["max_iterations"], default=30)
        return found

    monkeypatch.setattr(config, "field_docs", moved)
    after = options_table()
    assert "| `--max-iterations N` | 20 |" in before and "| `--max-iterations N` | 30 |" in after


def test_agent_takes_one_config_and_flat_settings_over_it(tmp_path):
    cfg = AgentConfig(max_iterations=5, reflection=ReflectionConfig(spin_threshold=4),
                      reliability=ReliabilityConfig(samples=2))
    agent = Agent("memfit/demo", config=cfg, workdir=tmp_path, memory=False)
    assert agent.max_iterations == 5 and agent.spin_threshold == 4 and agent.samples == 2
    assert agent.config(ReflectionConfig).spin_threshold == 4 and agent.config.reflection.spin_threshold == 4
    assert cfg.store is None, "the given config is not changed"
    over = Agent("memfit/demo", config=cfg, max_iterations=7, max_cost_usd=0.25, workdir=tmp_path)
    assert over.max_iterations == 7 and over.guarantees.max_cost_usd == 0.25
    assert over.guarantees.max_duration_seconds == ExecutionGuarantees().max_duration_seconds
    # a feature's config given whole wins over the flat settings of that feature
    whole = Agent("memfit/demo", spin_threshold=9, configs=[ReflectionConfig(spin_threshold=6)])
    assert whole.spin_threshold == 6
    with pytest.raises(TypeError, match="frobnicate"):
        Agent("memfit/demo", frobnicate=1)
    with pytest.raises(ValueError, match="max_iterations"):
        Agent("memfit/demo", max_iterations=0)
    with pytest.raises(ValueError, match="structured must be one of auto, tools, schema, text"):
        AgentConfig(structured="xml")


def test_an_attribute_set_on_the_agent_sets_its_config():
    agent = Agent("memfit/demo", memory=False)
    agent.max_iterations = 3
    agent.spin_threshold = 5
    agent.context_config = ContextConfig(max_trials=2)
    assert agent.config.max_iterations == 3 and agent.config.reflection.spin_threshold == 5
    assert agent.max_trials == 2 and agent.settings()["max_trials"] == 2
    with pytest.raises(ValueError, match="spin_threshold"):
        agent.spin_threshold = 1


def test_settings_and_replay_read_the_config(tmp_path):
    run = Agent("memfit/demo", workdir=tmp_path, memory=False, max_cost_usd=0.5, max_iterations=6,
                spin_threshold=4, tools="python,read_file,finish").start("add up data.txt")
    run.run()
    trace = run.trace()
    assert tuple(trace["settings"]) == SETTINGS
    assert trace["settings"]["max_cost_usd"] == 0.5 and trace["settings"]["tools"] == ["python", "read_file", "finish"]
    replayed = Agent.replay(json.loads(json.dumps(trace)))
    assert replayed.agent.settings() == trace["settings"]
    assert replayed.agent.config.guarantees == ExecutionGuarantees(max_cost_usd=0.5)
    replayed.run()
    assert [e["type"] for e in replayed.trace()["events"]] == [e["type"] for e in trace["events"]]


def test_options_become_agent_arguments_once_for_magic_and_cli():
    values = {o.dest: None for o in OPTIONS}
    values.update(max_cost=0.5, max_calls=0, api_base="http://a/v1", fast_api_base="http://f/v1",
                  reflection="DEEP", no_memory=True, tools="python,finish")
    kwargs = agent_kwargs(values)
    assert kwargs == {"max_cost_usd": 0.5, "max_recursive_calls": 0, "reflection": "deep", "memory": False,
                      "tools": "python,finish",
                      "api_base": {"primary": "http://a/v1", "fast": "http://f/v1", "fallback": "http://a/v1"}}
    assert Agent(**kwargs).tool_names == ["python", "finish"]
    with pytest.raises(ValueError, match="contradict"):
        agent_kwargs({"memory": "x", "no_memory": True})
    with pytest.raises(ValueError, match="^--max-cost must be greater than 0, got 0$"):
        check_bounds({"max_cost": 0})
    with pytest.raises(ValueError, match="^--max-iterations must be at least 1, got 0$"):
        check_bounds({"max_iterations": 0})
    check_bounds({"max_calls": 0})


def test_the_spin_threshold_s_bound_is_the_reflection_config_s():
    """The option said "at least 1" and then ReflectionConfig refused 1 with "at least 2"."""
    with pytest.raises(ValueError, match="^--spin-threshold must be at least 2, got 1$"):
        check_bounds({"spin_threshold": 1})
    check_bounds({"spin_threshold": 2})
    assert Agent(spin_threshold=2).spin_threshold == 2


def test_a_json_api_base_is_one_base_per_tier_and_the_tier_options_override_it():
    """README and ``run --help`` document ``--api-base '{"primary": ...}'``: it was sent as one URL."""
    values = {o.dest: None for o in OPTIONS}
    per_tier = '{"primary": "http://p/v1", "fast": "http://f/v1"}'
    assert agent_kwargs({**values, "api_base": per_tier})["api_base"] == {"primary": "http://p/v1", "fast": "http://f/v1"}
    merged = agent_kwargs({**values, "api_base": per_tier, "fallback_api_base": "http://b/v1", "fast_api_base": "http://g/v1"})
    assert merged["api_base"] == {"primary": "http://p/v1", "fast": "http://g/v1", "fallback": "http://b/v1"}
    assert agent_kwargs({**values, "api_base": "http://a/v1"})["api_base"] == "http://a/v1"
    agent = Agent(**agent_kwargs({**values, "api_base": per_tier, "model": "openai/gpt-4o-mini"}))
    assert agent.model_options() == {"openai/gpt-4o-mini": {"api_base": "http://p/v1"}}
    for bad, says in [('{"primary": "http://p/v1"', "is not valid JSON"), ("{}", "names no tier"),
                      ('{"primary": ["http://p/v1"]}', "the URL of tier primary must be a non-empty string, got list"),
                      ('{"primary": "http://p/v1", "slow": "http://s/v1"}', "names unknown tier(s) slow")]:
        with pytest.raises(ValueError, match=re.escape(says)) as refused:
            agent_kwargs({**values, "api_base": bad})
        assert len(str(refused.value).splitlines()) == 1 and "http://" not in str(refused.value)


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "memfit_jupyter", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_the_cli_run_takes_every_option_of_the_magic_that_sets_the_agent(tmp_path, monkeypatch, capsys):
    from memfit_jupyter.__main__ import main

    out = cli("run", "--help", cwd=tmp_path)
    for opt in OPTIONS:
        flag_shown = re.search(rf"(?<![\w-]){re.escape(opt.flag)}(?![\w-])", out.stdout) is not None
        assert flag_shown == opt.cli, opt.flag
    assert "(default memfit/demo)" in " ".join(out.stdout.split())
    # the run itself in this process (a new interpreter would spend its time importing litellm)
    monkeypatch.chdir(tmp_path)
    done = main(["run", "What is the total of the numbers in data.txt?", "--model", "memfit/demo", "--max-cost", "0.5",
                 "--max-duration", "120", "--max-calls", "3", "--max-iterations", "6", "--reflection", "deep",
                 "--spin-threshold", "4", "--structured", "text", "--no-memory", "--trace", "t.json"])
    assert done == 0, capsys.readouterr().err
    settings = json.loads((tmp_path / "t.json").read_text())["settings"]
    assert settings["max_cost_usd"] == 0.5 and settings["max_duration_seconds"] == 120
    assert settings["max_recursive_calls"] == 3 and settings["max_iterations"] == 6
    assert settings["reflection"] == "deep" and settings["spin_threshold"] == 4 and settings["memory"] is False
    assert not (tmp_path / ".memfit").exists()
    bad = cli("run", "x", "--max-duration", "0", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --max-duration must be greater than 0, got 0"
    wrong = cli("run", "x", "--reflection", "loud", cwd=tmp_path)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
    assert "invalid choice: 'loud'" in wrong.stderr


def test_reading_the_options_imports_no_feature_package():
    code = ("import sys; import memfit_jupyter.config as c; c.options_table(); "
            "print([m for m in ('memfit_jupyter.reflection', 'memfit_jupyter.context', 'memfit_jupyter.memory', "
            "'memfit_jupyter.run') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_readme_names_no_default_the_config_does_not_have():
    """The README's prose about the CLI lists only real flags of it (``run``'s, ``fork``'s, ``blame``'s)."""
    from memfit_jupyter.config import BLAME_FLAGS, FORK_FLAGS

    text = README.read_text(encoding="utf-8")
    section = text[text.index("`run` works in the current folder"):text.index("## The notebooks")]
    flags = set(re.findall(r"`(--[a-z-]+)`", section))
    real = {o.flag for o in OPTIONS if o.cli} | {flag for flag, _ in FORK_FLAGS + BLAME_FLAGS}
    assert flags and flags <= real, flags - real


def test_the_memory_magic_dispatches_through_its_table_of_subcommands():
    from memfit_jupyter.jupyter import memory_magic

    assert memory_magic.SUBCOMMANDS == tuple(memory_magic.COMMANDS)
    for name, command in memory_magic.COMMANDS.items():
        assert command.handle is getattr(memory_magic, f"handle_{name}")
        assert command.options.parser is not None
    assert "globals()" not in Path(memory_magic.__file__).read_text()


def test_agent_s_signature_names_every_flat_setting():
    import inspect

    params = inspect.signature(Agent.__init__).parameters
    assert set(FLAT) <= set(params)
    assert params["spin_threshold"].kind is inspect.Parameter.KEYWORD_ONLY and params["spin_threshold"].default is None


def test_the_options_with_choices_offer_what_their_feature_knows():
    from memfit_jupyter.config import OPTIONS
    from memfit_jupyter.memory.triage import TRIAGE_AT
    from memfit_jupyter.reflection.config import SPIN_WARNINGS

    # written out in config.py so that reading the options imports no feature
    choices = {o.flag: o.choices for o in OPTIONS}
    assert choices["--memory-triage"] == TRIAGE_AT
    assert choices["--spin-warnings"] == SPIN_WARNINGS
