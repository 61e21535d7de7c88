"""LoCoMo (Maharana et al., 2024, "Evaluating Very Long-Term Conversational Memory of LLM
Agents") as a retrieval benchmark: ten long conversations, every dialogue turn a memory,
the question-answer pairs with the turns that hold their evidence.

The data is not part of this repository and nothing downloads it.  Fetch it once::

    git clone --depth 1 https://github.com/snap-research/locomo /tmp/locomo
    unzip -q -o /tmp/locomo/data/locomo10.zip -d /tmp/locomo

and pass ``--locomo /tmp/locomo/data/multimodal_dialog/locomo10_v2`` (a folder with one
JSON file per conversation) or the path of ``locomo10.json`` (the same ten conversations in
one list, as other copies of the benchmark ship it).

Protocol: one store per conversation; a memory is ``[date] Speaker: text`` (a shared
photo adds ``[shares a photo: caption]``), its id the turn's ``dia_id``; questions of
categories 1-4 (single-hop, multi-hop, temporal, open-domain; category 5, adversarial,
asks about things that never happened); recall@k is the share of a question's evidence
turns among the first k results, averaged over questions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

_TURN_ID = re.compile(r"D(\d+):(\d+)")
CATEGORIES = (1, 2, 3, 4)


@dataclass
class Conversation:
    """One LoCoMo conversation: its turns as memories and its questions."""

    name: str
    memories: list[dict] = field(default_factory=list)  # id, content, tags (speaker, date)
    questions: list[dict] = field(default_factory=list)  # q, relevant (turn ids), category


def _date(stamp: str) -> str:
    # "1:56 pm on 8 May, 2023" -> "8 May, 2023"
    return stamp.split(" on ", 1)[-1].strip()


def _conversation(name: str, conv: dict, qa: list[dict]) -> Conversation:
    out = Conversation(name)
    sessions = sorted((int(k.split("_")[1]), k) for k in conv
                      if re.fullmatch(r"session_\d+", k) and isinstance(conv[k], list))
    for _, key in sessions:
        date = _date(str(conv.get(f"{key}_date_time", "")))
        for turn in conv[key]:
            text = str(turn.get("text", "")).strip()
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            if not text:
                continue
            speaker = str(turn.get("speaker", "")).strip()
            out.memories.append({"id": str(turn["dia_id"]), "content": f"[{date}] {speaker}: {text}",
                                 "tags": [speaker.lower(), date.lower()]})
    have = {m["id"] for m in out.memories}
    for item in qa:
        if item.get("category") not in CATEGORIES:
            continue
        # some evidence fields join several ids or misspell one ("D8:6; D9:17", "D:11:26")
        relevant = []
        for ev in item.get("evidence") or ():
            for s, t in _TURN_ID.findall(str(ev).replace("D:", "D")):
                turn = f"D{int(s)}:{int(t)}"
                if turn in have and turn not in relevant:
                    relevant.append(turn)
        if relevant:
            out.questions.append({"q": str(item["question"]), "relevant": relevant,
                                  "category": item["category"]})
    return out


def load(path: str | Path) -> list[Conversation]:
    """The conversations at ``path``: a folder of per-conversation JSON files or one list."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.json"), key=lambda p: (len(p.stem), p.stem))
        if not files:
            raise SystemExit(f"{path}: no LoCoMo JSON files here (see tests/benchmarks/locomo.py)")
        return [_conversation(f.stem, d, d.get("qa", [])) for f in files for d in [json.loads(f.read_text())]]
    data = json.loads(path.read_text())
    if not isinstance(data, list):
        raise SystemExit(f"{path}: expected the list of LoCoMo samples")
    return [_conversation(str(s.get("sample_id", i)), s["conversation"], s.get("qa", []))
            for i, s in enumerate(data)]
