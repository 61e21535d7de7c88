import os

import pytest

# litellm must never reach for the network to fetch its price list.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def run_over_a_store(tmp_path):
    """A finished run of memory-lesson in ``tmp_path/parent`` over the store ``tmp_path/store``,
    which held one memory before it: the store, that memory's id, and the run."""
    from memfit_jupyter import Agent, MemoryStore
    from memfit_jupyter.llm.scenarios import load_scenario

    (tmp_path / "parent").mkdir()
    store = MemoryStore(tmp_path / "store")
    prior = store.add("the numbers of this project are kept in numbers.txt", tags=["numbers"])
    run = Agent(model="memfit/memory-lesson", workdir=tmp_path / "parent", memory=store).start(
        load_scenario("memory-lesson").task)
    run.run()
    return store, prior, run
