"""One redaction (``secrets.redact``) on every road a string travels: the trace (its header as
well as its events), a cell's saved outputs, exported spans, the memory store and the logs.
The closing check plants keys in a real kernel's run and greps every file it wrote and the
saved notebook's outputs for them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import nbformat
import pytest
from kernel_cells import execute

from memfit_jupyter import Agent, otel
from memfit_jupyter.jupyter.display import bundle
from memfit_jupyter.secrets import REDACTED, redact

SHORT_KEY = "sk-test-PLANTED123"
GROQ_LINE = "export GROQ_API_KEY=gsk_PLANTEDgroq0123456789abcdef"
NAMED_LINE = "NAME_API_KEY=plantedvalue9"
#: What must never be found again (the secret part of each planted key).
MARKERS = ("PLANTED123", "PLANTEDgroq", "plantedvalue9")
TASK = f"what is the total of the numbers in data.txt? key={SHORT_KEY} {NAMED_LINE}"


def hits(text: str) -> int:
    return sum(text.count(m) for m in MARKERS)


@pytest.fixture(autouse=True)
def _unset(monkeypatch):
    """The planted keys are not in the environment: redaction must see them by their shape."""
    for name in ("GROQ_API_KEY", "NAME_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("text, kept", [
    (f"key={SHORT_KEY}", "key="),
    (GROQ_LINE, "export GROQ_API_KEY="),
    (NAMED_LINE, "NAME_API_KEY="),
    ("MY_SERVICE_TOKEN: 'abcd1234'", "MY_SERVICE_TOKEN: '"),
])
def test_keys_are_redacted_by_their_shape_when_the_variable_is_not_set(text, kept):
    out = redact(text)
    assert out == kept + REDACTED + ("'" if text.endswith("'") else ""), out


@pytest.mark.parametrize("text, kept", [
    ('{"log": "started\\nsk-proj-PLANTED0123456789abcdef"}', '{"log": "started\\n' + REDACTED + '"}'),
    ("cols\\tgsk_PLANTED0123456789abcdefABCD", "cols\\t" + REDACTED),
    ("headers\\r\\nBearer PLANTEDtoken42", "headers\\r\\nBearer " + REDACTED),
    ("unsk-proj-0123456789abcdef is one word", "unsk-proj-0123456789abcdef is one word"),
])
def test_a_key_after_an_escaped_line_break_is_redacted_as_after_a_real_one(text, kept):
    """In a JSON text a tool printed, a line break is a backslash and an "n": the key after it is
    glued to that letter, yet begins a line.  A key glued to a word stays a word."""
    assert redact(text) == kept


@pytest.mark.parametrize("url, shown", [
    ("http://me:hunter2pw@127.0.0.1:8080/v1", "http://me:[REDACTED]@127.0.0.1:8080/v1"),
    ("postgresql://bob:s3cret:pw@db:5432/memfit", "postgresql://bob:[REDACTED]@db:5432/memfit"),
    ("redis://:onlyapassword@cache:6379 then https://a:b2@c", "redis://:[REDACTED]@cache:6379 then https://a:[REDACTED]@c"),
])
def test_a_password_in_a_url_is_redacted_and_the_rest_of_the_url_kept(url, shown):
    assert redact(url) == shown


@pytest.mark.parametrize("text", ["pip install scikit-learn", "max_tokens=1024", "the secret is out",
                                  "sk-learn is a nickname", "http://127.0.0.1:8080/v1", "ssh://git@host/repo",
                                  "see https://example.com/a:b@c", "mailto:bob@example.org"])
def test_ordinary_text_is_left_alone(text):
    assert redact(text) == text


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("secret-run")
    (workdir / "data.txt").write_text(f"3\n39\n# {GROQ_LINE}\n")
    r = Agent(model="memfit/demo", workdir=workdir, memory=None).start(TASK)
    r.run()
    r.memory.close()
    return r


def test_the_trace_keeps_no_key_in_any_field(run):
    trace = run.trace()
    assert run.task == TASK  # the run itself still has what it was given
    assert REDACTED in trace["task"] and REDACTED in trace["events"][0]["task"]
    assert hits(json.dumps(trace)) == 0


def test_a_cell_s_output_bundle_keeps_no_key(run):
    data, metadata = bundle(run)
    assert set(data) == {"application/vnd.memfit.run+json", "text/plain", "text/html"}
    assert hits(json.dumps([data, metadata])) == 0


def test_a_memory_ranking_s_bundle_keeps_no_key(run):
    from memfit_jupyter.jupyter.memory_widget import bundle as ranking_bundle
    from memfit_jupyter.jupyter.memory_widget import ranking_payload

    payload = ranking_payload([], query=f"what did {SHORT_KEY} unlock?")  # a query typed in a cell
    assert hits(json.dumps(ranking_bundle(payload))) == 0


def test_an_otel_file_export_keeps_no_key(run, tmp_path):
    path = tmp_path / "spans.jsonl"
    otel.export(run, path=path, content=True)
    assert path.stat().st_size > 0 and hits(path.read_text()) == 0


def test_the_memory_store_keeps_no_key(run):
    store = Path(run.agent.workdir) / ".memfit"
    files = [p for p in store.rglob("*") if p.is_file()]
    assert files and run.memory is not None
    assert sum(hits(p.read_bytes().decode("latin-1")) for p in files) == 0


def test_log_lines_keep_no_key_whichever_module_logs_them(run, caplog):
    with caplog.at_level(logging.WARNING):
        for name in ("memfit_jupyter", "memfit_jupyter.memory", "memfit_jupyter.reflection"):
            logging.getLogger(name).warning("provider said: %s and %s", SHORT_KEY, GROQ_LINE)
    assert len(caplog.records) == 3 and hits(caplog.text) == 0


@pytest.mark.kernel
def test_a_saved_notebook_and_every_file_a_run_wrote_keep_no_key(tmp_path):
    """The closing figure: a kernel runs a task with keys planted in the task and in a file it
    reads, saves its trace and spans; then every file in the folder and the saved notebook's
    outputs are grepped for the keys."""
    (tmp_path / "data.txt").write_text(f"3\n39\n# {GROQ_LINE}\n")
    cells = {
        "load": "%load_ext memfit_jupyter",
        "run": f"%%memfit_task --model memfit/demo --name run1\n{TASK}",
        "save": "import json\njson.dump(run1.trace(), open('trace.json', 'w'))\n"
                "from memfit_jupyter import otel\notel.export(run1, path='spans.jsonl', content=True)\n"
                "print(run1.trace()['task'])",
    }
    nb = execute(cells, tmp_path)
    saved = tmp_path / "saved.ipynb"
    nbformat.write(nb, saved)
    outputs = [c.outputs for c in nb.cells]
    assert not [o for outs in outputs for o in outs if o.output_type == "error"]
    assert "[REDACTED]" in json.dumps(outputs)  # the keys were there, and were hidden
    in_outputs = hits(json.dumps(outputs))
    in_sources = hits(json.dumps([c.source for c in nb.cells]))
    assert in_sources > 0 and hits(saved.read_text()) == in_sources  # only what the person typed
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name not in ("data.txt", "saved.ipynb")]
    assert {"trace.json", "spans.jsonl"} <= {p.name for p in written}
    assert any(".memfit" in p.parts for p in written)
    in_files = {str(p.relative_to(tmp_path)): hits(p.read_bytes().decode("latin-1")) for p in written}
    assert in_outputs == 0 and sum(in_files.values()) == 0, in_files


def test_a_fork_s_changes_keep_no_key_in_the_run_view_s_tree_or_its_saved_output(tmp_path):
    from memfit_jupyter.jupyter.fork_view import ForkTree

    (tmp_path / "p").mkdir()
    parent = Agent(model="memfit/spin-demo", workdir=tmp_path / "p", memory=False).start("add up data.txt")
    parent.run()
    child = parent.fork(2, workdir=tmp_path / "c", guidance=f"log in with {SHORT_KEY} first",
                        action={"tool": "shell", "params": {"command": f"echo {NAMED_LINE}"}})
    child.run()
    entries = ForkTree(parent).entries({}, traces=True)  # what the view syncs, and saves with the notebook
    data, metadata = bundle(parent)
    assert entries and entries[0]["changes"]["guidance"].startswith("log in with")
    assert hits(json.dumps(entries)) == 0 and hits(json.dumps([data, metadata])) == 0
    assert hits(json.dumps(parent.trace())) == 0 and hits(json.dumps(child.trace())) == 0


def test_a_fork_form_s_error_line_keeps_no_key(tmp_path):
    from memfit_jupyter.jupyter.widget import RunWidget

    parent = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    parent.run()
    widget = RunWidget(parent)
    # a key pasted where the tool's name goes: the form's one line quotes it
    assert widget.on_fork({"at": 2, "tool": SHORT_KEY, "params": "{}"}) is None
    error = widget.model.controls["fork_error"]
    assert error and "unknown tool" in error and hits(json.dumps(widget.model.controls)) == 0


def test_a_password_in_api_base_stays_out_of_the_trace_and_a_fork_in_hand_still_calls_with_it(tmp_path):
    base = "http://me:hunter2pw@127.0.0.1:9/v1"
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "data.txt").write_text("3\n39\n")
    parent = Agent(model="memfit/demo", workdir=tmp_path / "w", memory=False, api_base=base).start(
        "What is the total of the numbers in data.txt?")
    parent.run()
    child = parent.fork(2, guidance="add them up", workdir=tmp_path / "child")
    child.run()
    for trace in (parent.trace(), child.trace()):
        assert "hunter2pw" not in json.dumps(trace) and "me:[REDACTED]@127.0.0.1" in json.dumps(trace)
    assert child.agent.api_base == base  # the server is called as the parent called it


@pytest.fixture
def log_text():
    """What a real handler on the root logger writes, formatted as an application would."""
    import io

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    logging.getLogger().addHandler(handler)
    yield out.getvalue
    logging.getLogger().removeHandler(handler)


def test_a_logged_traceback_keeps_no_key_and_is_still_printed(tmp_path, log_text):
    from memfit_jupyter.events import Observation

    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")

    def notify(event):  # a subscriber whose webhook quotes the key it was refused with
        raise ConnectionError(f"POST https://hooks.example/notify refused {SHORT_KEY} ({GROQ_LINE})")

    run.subscribe(notify, Observation)
    run.run()
    text = log_text()
    assert "event subscriber failed" in text  # the run logged it with log.exception
    assert "Traceback (most recent call last)" in text and "ConnectionError: POST https://hooks" in text
    assert REDACTED in text and hits(text) == 0, text[-400:]


def test_a_logged_stack_keeps_no_key(log_text):
    from memfit_jupyter.secrets import package_logger

    log = package_logger().getChild("memory")
    package_logger()  # the child made just now is given the filter too
    log.warning("logging in with sk-test-PLANTED123", stack_info=True)  # the stack shows this line
    text = log_text()
    assert "Stack (most recent call last)" in text and "log.warning(" in text
    assert hits(text) == 0, text[-400:]


#: An environment secret no pattern knows: only its whole value is found.
DB_PASSWORD = "Tq8ZrLmTvXwNpKsBdFgH"
GROQ_KEY = "gsk_PLANTEDgroq0123456789abcdef"


def test_a_long_tool_output_is_redacted_before_it_is_cut(tmp_path, monkeypatch):
    from memfit_jupyter.tools import MAX_OUTPUT

    monkeypatch.setenv("BILLING_DB_PASSWORD", DB_PASSWORD)
    half = MAX_OUTPUT // 2
    # a key across the cut after the first half, the password across the one before the last
    text = "x" * (half - 9) + f" {SHORT_KEY} " + "y" * 9000 + f" {DB_PASSWORD} " + "z" * (half - 9)
    assert text.index(SHORT_KEY) < half < text.index(SHORT_KEY) + len(SHORT_KEY)
    (tmp_path / "data.txt").write_text(text)
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    run.run()
    trace = run.trace()
    output = next(e["output"] for e in trace["events"] if e["type"] == "observation")
    assert "characters cut" in output and output.startswith("xxx") and output.endswith("zzz")
    dumped = json.dumps(trace)
    # no piece of either (the half of a key a cut leaves is no longer a key), only the marker's
    pieces = ["sk-test", *(DB_PASSWORD[i:i + 6] for i in range(len(DB_PASSWORD) - 5))]
    assert not [p for p in pieces if p in dumped], output[half - 40:-half + 40]


@pytest.fixture(scope="module")
def slow_model():
    from fault_server import FaultServer

    # 8 characters every 0.15 s, drained every 0.25 s: a key of 18 or 31 characters spans two drains
    server = FaultServer(stream_delay_s=0.15).start()
    yield server
    server.stop()


def test_a_streamed_reply_is_redacted_whole_not_piece_by_piece(tmp_path, slow_model, monkeypatch):
    from memfit_jupyter.events import ModelDelta

    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    reply = json.dumps({"thought": f"I log in with {SHORT_KEY}, then {GROQ_KEY}.", "action_type": "answer",
                        "tool": "finish", "params": {"answer": "hello"}})
    slow_model.script("streamer", [f"ok:{reply}"])
    agent = Agent(model="openai/streamer", api_base=slow_model.api_base, structured="schema", tools=["finish"],
                  reflection="none", memory=False, max_iterations=1, workdir=tmp_path)
    run = agent.start("Say hello, then finish.")
    pieces = []
    run.subscribe(pieces.append, ModelDelta)
    run.run()
    call = next(e for e in run.trace()["events"] if e["type"] == "model_call" and e["purpose"] == "action")
    assert call["ok"] and REDACTED in call["reply"]
    joined = "".join(p.text for p in pieces)
    assert pieces and hits(joined) == 0, [p.text for p in pieces]
    # what the live view joins is the redacted reply, counted as it was sent
    assert joined == call["reply"] and [p.chars for p in pieces][-1] == len(joined)


def test_a_text_given_out_in_pieces_joins_up_to_its_redaction_with_no_piece_of_a_key(monkeypatch):
    from memfit_jupyter.secrets import StreamRedactor, refresh_env_secrets

    monkeypatch.setenv("BILLING_DB_PASSWORD", DB_PASSWORD)
    monkeypatch.setenv("VAULT_SECRET", "PLANTED horse battery staple")  # spaces in it: not a word
    refresh_env_secrets()
    jwt = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJQTEFOVEVEand0In0" * 4 + ".PLANTEDjwtSignature0123456789"
    text = (f"I log in with {SHORT_KEY}, then {GROQ_KEY} (task-12345678 is no key). " * 3
            + f"{NAMED_LINE} at http://me:PLANTEDurl!pw@db:5432 with {DB_PASSWORD}, bearer {jwt}. " * 3
            + "password: '$PLANTEDpass$$w0rd!' and PLANTED horse battery staple. 日本語の文も流れる。" * 3
            + "And then the reply goes on for a while with ordinary words. " * 10)
    markers = (*MARKERS, "PLANTED")
    for size in (1, 3, 8, 26):  # pieces as small as a model's tokens, or larger
        stream, given, behind = StreamRedactor(), [], 0
        for end in range(size, len(text) + size, size):
            given.append(stream.advance(text[:end]))
            behind = max(behind, len(redact(text[:end])) - len(stream.shown))
        given.append(stream.advance(text, final=True))
        assert "".join(given) == redact(text)
        assert not [g for g in given if any(m in g for m in markers)]
        assert behind <= len(jwt) + size  # it streams as it grows, a word (the longest) behind at most


#: A passphrase and a password with a keyed value's separators in it: environment secrets no
#: pattern knows, found only whole, which a key or keyed value before them can take in part.
PASSPHRASE = "PLANTED horse battery staple"
PUNCTUATED_PASSWORD = "Pl4nted!db pw,with;stuff"


@pytest.fixture
def stream_env(monkeypatch):
    """Environment secrets for a stream's test, forgotten again after it."""
    from memfit_jupyter.secrets import refresh_env_secrets

    with monkeypatch.context() as env:
        env.setenv("BILLING_DB_PASSWORD", DB_PASSWORD)
        env.setenv("VAULT_SECRET", PASSPHRASE)
        env.setenv("LEGACY_DB_PASSWORD", PUNCTUATED_PASSWORD)
        refresh_env_secrets()
        yield
    refresh_env_secrets()


def streamed(text, ends):
    """What a StreamRedactor gives out for ``text`` arriving up to each of ``ends``, then whole."""
    from memfit_jupyter.secrets import StreamRedactor

    stream = StreamRedactor()
    given = [stream.advance(text[:end]) for end in ends]
    given.append(stream.advance(text, final=True))
    return given


def stream_parts():
    """Every kind of secret ``redact`` knows, text close to one, and ordinary text."""
    jwt = ("eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiJQTEFOVEVEand0In0" * 4
           + ".PLANTEDjwtSignature0123456789")
    return [
        SHORT_KEY, "sk-proj-PLANTED0123456789abcdef", GROQ_KEY, "AKIAPLANTED012345678",
        "ghp_PLANTED" + "a1" * 12, "github_pat_PLANTED_" + "b2" * 12, "xoxb-PLANTED-123456",
        "AIzaPLANTED" + "x" * 28, "hf_PLANTED" + "c3" * 12, jwt, f"Authorization: Bearer {jwt}",
        f"bearer\n\t{SHORT_KEY}", "api_key = 'PLANTEDvalue9'", "password: '$PLANTEDpass$$w0rd!'",
        GROQ_LINE, NAMED_LINE, '"token": "PLANTEDtok1"', "secret :\n  PLANTED/s3cret",
        "postgres://user:PLANTEDurl!pw@db:5432/app", "git+ssh://me:PLANTEDpw@host",
        "password:" + " " * 300 + "PLANTED/far", "http://" + "u" * 300 + ":PLANTED!pw@host",
        DB_PASSWORD, PASSPHRASE, PUNCTUATED_PASSWORD, "PLANTED horse", "Pl4nted!db",
        "sk-learn", "task-12345678", "token=ab", "https://example.com/a:b", "max_tokens=1024",
        "Bearer", "password:", "The model reads the file. ", "def f(x):\n    return x + 1\n",
        "日本語の文も流れる。",
    ]


@pytest.mark.parametrize("commit_chars", [None, 8])
def test_a_stream_split_anywhere_joins_up_to_the_redaction_of_the_whole(stream_env, monkeypatch,
                                                                       commit_chars):
    import random

    from memfit_jupyter import secrets

    if commit_chars:  # a fixed point looked for every few characters: short texts move it too
        monkeypatch.setattr(secrets, "_COMMIT_CHARS", commit_chars)
        monkeypatch.setattr(secrets, "_COMMIT_SLACK", 0)
    parts, glue = stream_parts(), ["", "", " ", "\n", ", ", ": ", "=", "x", "1", "\\n", "\\t", "\\"]
    rng = random.Random(20240611)
    for n in range(160):
        text = "".join(rng.choice(parts) + rng.choice(glue) for _ in range(rng.randint(1, 12)))
        ends, end = [], 0
        while end < len(text):
            end = min(len(text), end + rng.choice([1, 1, 2, 3, 5, 8, 13, 40]))
            ends.append(end)
        assert "".join(streamed(text, ends)) == redact(text), text
        if n % 8 == 0:  # at every point: a key, a JWT most of all, straddles many pieces
            assert "".join(streamed(text, range(1, len(text) + 1))) == redact(text), text


@pytest.mark.parametrize("text", [
    "password:" + " " * 300 + "a/PLANTEDfar and more",
    "http://" + "u" * 300 + ":PLANTED!pw@host/x and more",
    f"password: {PASSPHRASE}, then more",
    f"Bearer\n{PUNCTUATED_PASSWORD} and more",
    f"{SHORT_KEY}{PUNCTUATED_PASSWORD} and more",
    "sk-learnAKIAPLANTEDABCDEFGHItask-12345678 and more",
], ids=["a value far from its name", "a URL's long user",
        "a passphrase a keyed value takes in part", "a password a bearer token takes in part",
        "a password a key takes in part", "a key only once a later digit comes"])
def test_a_stream_gives_out_nothing_that_later_text_makes_part_of_a_secret(stream_env, text):
    given = streamed(text, range(1, len(text) + 1))
    assert "".join(given) == redact(text), [g for g in given if g]


def test_a_long_stream_is_redacted_from_a_fixed_point_not_from_its_start(stream_env, monkeypatch):
    from memfit_jupyter import secrets

    prose = "The model reads the file, checks the numbers twice and explains each step. "
    code = "def total(path):\n    with open(path) as f:\n        return sum(map(int, f))\n"
    parts = stream_parts()
    text = "".join(prose + code + " ".join(parts[i % len(parts)] for i in range(k, k + 3)) + ". "
                   for k in range(340))
    assert len(text) > 100_000
    redacted_chars, redact_whole = [], secrets._redact

    def counted(part):
        redacted_chars.append(len(part))
        return redact_whole(part)

    monkeypatch.setattr(secrets, "_redact", counted)
    stream, given, per_piece = secrets.StreamRedactor(), [], []
    for end in range(20, len(text) + 20, 20):  # a model's pieces, drained one by one
        before = sum(redacted_chars)
        given.append(stream.advance(text[:end]))
        per_piece.append(sum(redacted_chars) - before)
    given.append(stream.advance(text, final=True))
    monkeypatch.setattr(secrets, "_redact", redact_whole)
    # Each piece redacts the text after a recent fixed point again, not all of it so far: the
    # whole text each time would be a hundred thousand characters for the last pieces.
    assert max(per_piece) <= 4096, max(per_piece)
    assert sum(per_piece) <= 40 * len(text) and stream.scanned <= 60 * len(text)
    assert "".join(given) == redact(text)


def test_a_url_settings_password_is_redacted_where_it_is_typed_alone(tmp_path):
    import json

    from memfit_jupyter import Agent

    password = "Correct-horse-42"
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                api_base=f"http://proxy:{password}@127.0.0.1:9/v1").start(
        f"What is the total of the numbers in data.txt? (the proxy's password is {password})")
    run.run()
    assert password not in json.dumps(run.trace()) and "password is [REDACTED]" in run.trace()["task"]
