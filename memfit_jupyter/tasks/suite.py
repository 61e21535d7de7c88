"""The 28 tasks of the suite, seven per family.

The data are fixed (a task is the same in every repeat: only the model's sampling seed
changes between repeats).  Prompts name the files and, for a value, ask for it in
``answer.txt`` and as the final answer; the value check accepts either.
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

SUITE: list[Task] = [*ARITH, *EXTRACT, *FIX, *MULTI]
