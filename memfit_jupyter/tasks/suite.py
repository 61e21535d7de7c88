"""The 48 tasks of the suite, twelve per family in three tiers (``core.TIERS``).

- ``hard`` (seven per family, the names without a tier suffix): the prompt says what is wanted
  and the agent chooses the steps (read, compute, answer).
- ``medium`` (two per family, ``-tool``): the prompt names the shell tool and the program to use
  (``wc``, ``jq``, ``sed``, ``sort``...), and the agent writes the command.
- ``easy`` (three per family, ``-cmd``): the prompt gives the exact shell command that does the
  task in one call; what is left is to call the right tool with it, unchanged, and stop.

The easy and medium tiers exist because the local models the suite is run on (135M and 270M
parameters) solve no hard task: they finish at once with an invented answer, or repeat their
first action until the iterations run out.  A table whose every cell is 0 cannot tell a
mechanism that helps from one that does not; the lower tiers give cells between 0 and 1.  Their
oracles are the same kinds as the hard tier's: the value in ``answer.txt`` (or the final answer),
the file written, or the pytest file passing and unchanged.

The data are fixed (a task is the same in every repeat: only the model's sampling seed
changes between repeats).  Prompts name the files and, for a value, ask for it in
``answer.txt`` (the hard tier: and as the final answer); the value check accepts either.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from .core import ANSWER_FILE, Task, file_check, pytest_check, register, value_check

_ASK = f" Write just the value to {ANSWER_FILE}, then finish with it."


def _value(name: str, family: str, prompt: str, files: dict[str, str], expected: str | float) -> Task:
    return register(Task(name, family, prompt + _ASK, files, value_check(expected, files),
                         {ANSWER_FILE: f"{expected}\n"}))


# --- arith: arithmetic over files ---------------------------------------------------------
ARITH = [
    _value("arith-sum", "arith", "What is the total of the numbers in data.txt?", {"data.txt": "12\n7\n23\n"}, 42),
    _value("arith-count-lines", "arith", "How many names are listed in names.txt (one per line)?",
           {"names.txt": "Ada\nGrace\nAlan\nEdsger\nBarbara\n"}, 5),
    _value("arith-max", "arith", "What is the largest number in values.txt?", {"values.txt": "17\n4\n91\n38\n"}, 91),
    _value("arith-product", "arith", "pair.txt holds two numbers. What is their product?", {"pair.txt": "6 7\n"}, 42),
    _value("arith-mean", "arith", "What is the average of the scores in scores.txt?",
           {"scores.txt": "70\n80\n90\n"}, 80),
    _value("arith-difference", "arith", "Subtract the second number in nums.txt from the first. What is the result?",
           {"nums.txt": "100\n58\n"}, 42),
    _value("arith-words", "arith", "How many words does sentence.txt hold?",
           {"sentence.txt": "the quick brown fox jumps\n"}, 5),
]

# --- extract: a value from text, CSV or JSON ---------------------------------------------
EXTRACT = [
    _value("extract-author", "extract", "Who wrote notes.txt?",
           {"notes.txt": "Meeting notes, 3 March.\nWritten by Ada Lovelace.\nNext meeting: Friday.\n"},
           "Ada Lovelace"),
    _value("extract-csv-price", "extract", "What is the price of a pear in fruit.csv?",
           {"fruit.csv": "fruit,price\napple,3\npear,5\nplum,2\n"}, 5),
    _value("extract-json-version", "extract", "What version does config.json give?",
           {"config.json": json.dumps({"name": "demo", "version": "2.4.1", "debug": False}, indent=1)}, "2.4.1"),
    _value("extract-csv-count", "extract", "How many people in people.csv live in Paris?",
           {"people.csv": "name,city\nAda,London\nMarie,Paris\nAlan,London\nSimone,Paris\nAlbert,Bern\n"}, 2),
    _value("extract-email", "extract", "What is the email address in contact.txt?",
           {"contact.txt": "For questions write to Grace at grace.hopper@example.org or call the office.\n"},
           "grace.hopper@example.org"),
    _value("extract-json-oldest", "extract", "Who is the oldest person in people.json?",
           {"people.json": json.dumps([{"name": "Ada", "age": 36}, {"name": "Alan", "age": 41},
                                       {"name": "Grace", "age": 85}], indent=1)}, "Grace"),
    _value("extract-city", "extract", "Which city is the meeting in, according to memo.txt?",
           {"memo.txt": "Memo\nThe spring meeting will take place in Lisbon on 4 May.\n"}, "Lisbon"),
]


# --- fix: a failing script, judged by its pytest file ---------------------------------------
def _fix(name: str, module: str, code: str, test: str, fixed: str) -> Task:
    test_file = f"test_{module}.py"
    prompt = (f"{module}.py has a bug: {test_file} fails. Fix {module}.py so that "
              f"`python -m pytest -q {test_file}` passes (do not change {test_file}), then finish.")
    return register(Task(name, "fix", prompt, {f"{module}.py": code, test_file: test},
                         pytest_check(test_file, test), {f"{module}.py": fixed}))


FIX = [
    _fix("fix-add", "add", "def add(a, b):\n    return a - b\n",
         "from add import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
         "def add(a, b):\n    return a + b\n"),
    _fix("fix-even", "even", "def is_even(n):\n    return n % 2 == 1\n",
         "from even import is_even\n\n\ndef test_even():\n    assert is_even(4) and not is_even(7)\n",
         "def is_even(n):\n    return n % 2 == 0\n"),
    _fix("fix-total", "total", "def total(xs):\n    return sum(xs[1:])\n",
         "from total import total\n\n\ndef test_total():\n    assert total([1, 2, 3]) == 6\n",
         "def total(xs):\n    return sum(xs)\n"),
    _fix("fix-reverse", "rev", "def reverse(s):\n    return s\n",
         "from rev import reverse\n\n\ndef test_reverse():\n    assert reverse('abc') == 'cba'\n",
         "def reverse(s):\n    return s[::-1]\n"),
    _fix("fix-largest", "largest", "def largest(xs):\n    return min(xs)\n",
         "from largest import largest\n\n\ndef test_largest():\n    assert largest([3, 9, 4]) == 9\n",
         "def largest(xs):\n    return max(xs)\n"),
    _fix("fix-square", "square", "def square(x):\n    return x * 2\n",
         "from square import square\n\n\ndef test_square():\n    assert square(3) == 9\n",
         "def square(x):\n    return x * x\n"),
    _fix("fix-greet", "greet", "def greet(name):\n    return 'Hello ' + name\n",
         "from greet import greet\n\n\ndef test_greet():\n    assert greet('Ada') == 'Hello, Ada!'\n",
         "def greet(name):\n    return 'Hello, ' + name + '!'\n"),
]


# --- multi: read, compute, write a file --------------------------------------------------
def _multi(name: str, prompt: str, files: dict[str, str], path: str, test: Callable[[str], bool], what: str,
           solved: str) -> Task:
    return register(Task(name, "multi", prompt + " Then finish.", files, file_check(path, test, what),
                         {path: solved}))


def _json_equals(expected: object) -> Callable[[str], bool]:
    def test(text: str) -> bool:
        return bool(json.loads(text) == expected)
    return test


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines() if line.strip()]


MULTI = [
    _multi("multi-total", "Add up the numbers in data.txt and write the total to total.txt.",
           {"data.txt": "5\n10\n20\n"}, "total.txt", lambda t: t.strip() in ("35", "35.0"), "35", "35\n"),
    _multi("multi-sort", "Write the names in names.txt to sorted.txt in alphabetical order, one per line.",
           {"names.txt": "Grace\nAda\nAlan\n"}, "sorted.txt", lambda t: _lines(t) == ["Ada", "Alan", "Grace"],
           "Ada, Alan, Grace", "Ada\nAlan\nGrace\n"),
    _multi("multi-csv-json", "Read fruit.csv and write prices.json: a JSON object from each fruit to its price "
           "as a number.", {"fruit.csv": "fruit,price\napple,3\npear,5\n"}, "prices.json",
           _json_equals({"apple": 3, "pear": 5}), '{"apple": 3, "pear": 5}', '{"apple": 3, "pear": 5}'),
    _multi("multi-upper", "Write the text of word.txt in capital letters to upper.txt.",
           {"word.txt": "memfit\n"}, "upper.txt", lambda t: t.strip() == "MEMFIT", "MEMFIT", "MEMFIT\n"),
    _multi("multi-fahrenheit", "temps.txt holds temperatures in Celsius, one per line. Write each in Fahrenheit "
           "(F = C * 9 / 5 + 32) to fahrenheit.txt, one per line, in the same order.", {"temps.txt": "0\n100\n"},
           "fahrenheit.txt", lambda t: [float(x) for x in _lines(t)] == [32.0, 212.0], "32 and 212", "32\n212\n"),
    _multi("multi-json-flag", 'Set "debug" to true in config.json (keep the other keys as they are).',
           {"config.json": json.dumps({"name": "demo", "debug": False})}, "config.json",
           _json_equals({"name": "demo", "debug": True}), '{"name": "demo", "debug": true}',
           '{"name": "demo", "debug": true}'),
    _multi("multi-concat", "Write the text of a.txt followed by the text of b.txt to c.txt.",
           {"a.txt": "hello\n", "b.txt": "world\n"}, "c.txt", lambda t: _lines(t) == ["hello", "world"],
           "hello, then world", "hello\nworld\n"),
]


# --- the easy and medium tiers: the shell does the work --------------------------------------
_THEN = ", then finish."


def _cmd(name: str, family: str, command: str, files: dict[str, str], expected: str | float, tier: str = "easy"
         ) -> Task:
    """A value task whose prompt gives the exact command that writes the value to answer.txt."""
    prompt = f'Call shell with the command "{command}"{_THEN}'
    return register(Task(name, family, prompt, files, value_check(expected, files), {ANSWER_FILE: f"{expected}\n"},
                         tier))


def _tool_value(name: str, family: str, prompt: str, files: dict[str, str], expected: str | float) -> Task:
    return register(Task(name, family, prompt, files, value_check(expected, files), {ANSWER_FILE: f"{expected}\n"},
                         "medium"))


def _fix_cmd(name: str, module: str, code: str, test: str, fixed: str, prompt: str, tier: str) -> Task:
    test_file = f"test_{module}.py"
    return register(Task(name, "fix", prompt, {f"{module}.py": code, test_file: test},
                         pytest_check(test_file, test), {f"{module}.py": fixed}, tier))


def _file_cmd(name: str, prompt: str, files: dict[str, str], path: str, test: Callable[[str], bool], what: str,
              solved: str, tier: str = "easy") -> Task:
    return register(Task(name, "multi", prompt, files, file_check(path, test, what), {path: solved}, tier))


_NAMES = {"names.txt": "Grace\nAda\nAlan\nEdsger\nBarbara\n"}
_CONFIG = {"config.json": json.dumps({"name": "demo", "version": "2.4.1", "port": 8080}, indent=1)}
_ADD = ("def add(a, b):\n    return a - b\n", "from add import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "def add(a, b):\n    return a + b\n")
_EVEN = ("def is_even(n):\n    return n % 2 == 1\n",
         "from even import is_even\n\n\ndef test_even():\n    assert is_even(4) and not is_even(7)\n",
         "def is_even(n):\n    return n % 2 == 0\n")
_SQUARE = ("def square(x):\n    return x * 2\n",
           "from square import square\n\n\ndef test_square():\n    assert square(3) == 9\n",
           "def square(x):\n    return x * x\n")

EASY = [
    _cmd("arith-count-lines-cmd", "arith", "wc -l < names.txt > answer.txt", dict(_NAMES), 5),
    _cmd("arith-words-cmd", "arith", "wc -w < sentence.txt > answer.txt",
         {"sentence.txt": "the quick brown fox jumps over the lazy dog\n"}, 9),
    _cmd("arith-max-cmd", "arith", "sort -n values.txt | tail -1 > answer.txt", {"values.txt": "17\n4\n91\n38\n"}, 91),
    _cmd("extract-port-cmd", "extract", "jq .port config.json > answer.txt", dict(_CONFIG), 8080),
    _cmd("extract-first-line-cmd", "extract", "head -1 author.txt > answer.txt",
         {"author.txt": "Ada Lovelace\nwrote these notes on 3 March.\n"}, "Ada Lovelace"),
    _cmd("extract-email-cmd", "extract", "grep -o '[a-z.]*@[a-z.]*' contact.txt > answer.txt",
         {"contact.txt": "For questions write to Grace at grace.hopper@example.org or call the office.\n"},
         "grace.hopper@example.org"),
    _fix_cmd("fix-add-cmd", "add", *_ADD, 'Call shell with the command "sed -i s/-/+/ add.py"' + _THEN, "easy"),
    _fix_cmd("fix-even-cmd", "even", *_EVEN, 'Call shell with the command "sed -i s/1/0/ even.py"' + _THEN, "easy"),
    _fix_cmd("fix-square-cmd", "square", *_SQUARE, 'Call shell with the command "sed -i s/2/x/ square.py"' + _THEN,
             "easy"),
    _file_cmd("multi-upper-cmd", 'Call shell with the command "tr a-z A-Z < word.txt > upper.txt"' + _THEN,
              {"word.txt": "memfit\n"}, "upper.txt", lambda t: t.strip() == "MEMFIT", "MEMFIT", "MEMFIT\n"),
    _file_cmd("multi-sort-cmd", 'Call shell with the command "sort names.txt > sorted.txt"' + _THEN, dict(_NAMES),
              "sorted.txt", lambda t: _lines(t) == ["Ada", "Alan", "Barbara", "Edsger", "Grace"],
              "the five names in order", "Ada\nAlan\nBarbara\nEdsger\nGrace\n"),
    _file_cmd("multi-concat-cmd", 'Call shell with the command "cat a.txt b.txt > c.txt"' + _THEN,
              {"a.txt": "hello\n", "b.txt": "world\n"}, "c.txt", lambda t: _lines(t) == ["hello", "world"],
              "hello, then world", "hello\nworld\n"),
]

MEDIUM = [
    _tool_value("arith-count-lines-tool", "arith", "Count the lines of names.txt with the shell command wc and write "
                f"the count to {ANSWER_FILE}" + _THEN, dict(_NAMES), 5),
    _tool_value("arith-words-tool", "arith", "Count the words of sentence.txt with the shell command wc and write "
                f"the count to {ANSWER_FILE}" + _THEN, {"sentence.txt": "memfit counts seven words in this line\n"}, 7),
    _tool_value("extract-version-tool", "extract", 'Use the shell command jq to write the "version" of config.json '
                f"to {ANSWER_FILE}" + _THEN, dict(_CONFIG), "2.4.1"),
    _tool_value("extract-first-line-tool", "extract", "Use the shell command head to write the first line of "
                f"author.txt to {ANSWER_FILE}" + _THEN, {"author.txt": "Grace Hopper\nwrote these notes.\n"},
                "Grace Hopper"),
    _fix_cmd("fix-add-tool", "add", *_ADD, "add.py subtracts where it should add (test_add.py fails). Fix add.py with "
             "one sed command in the shell" + _THEN, "medium"),
    _fix_cmd("fix-square-tool", "square", *_SQUARE, "square.py multiplies by 2 where it should multiply x by itself "
             "(test_square.py fails). Fix square.py with one sed command in the shell" + _THEN, "medium"),
    _file_cmd("multi-sort-tool", "Write the lines of names.txt in alphabetical order to sorted.txt with the shell "
              "command sort" + _THEN, dict(_NAMES), "sorted.txt",
              lambda t: _lines(t) == ["Ada", "Alan", "Barbara", "Edsger", "Grace"], "the five names in order",
              "Ada\nAlan\nBarbara\nEdsger\nGrace\n", "medium"),
    _file_cmd("multi-upper-tool", "Write the text of word.txt in capital letters to upper.txt with the shell "
              "command tr" + _THEN, {"word.txt": "memfit\n"}, "upper.txt", lambda t: t.strip() == "MEMFIT", "MEMFIT",
              "MEMFIT\n", "medium"),
]

SUITE: list[Task] = [*ARITH, *EXTRACT, *FIX, *MULTI, *EASY, *MEDIUM]
