"""Confidence and synthesis on a labelled set of sampled answers with known ground truth.

    python tests/benchmarks/synthesis_eval.py [--questions 300] [--samples 5] [--seed 0]

The set is generated (seeded, offline): arithmetic questions with a known answer, K sampled
answers each from a simulated model whose accuracy varies per question, that phrases answers
in several ways ("391", "The answer is 391.", "17 x 23 = 391"), makes a favourite systematic
mistake per question, states an overconfident confidence, and gives a reasoning chain that
sometimes does not lead to its answer.  Reports the AUROC of the confidence for right vs wrong
(per sample and per synthesised result, with the stated confidence alone as the baseline) and
the accuracy of weighted, consensus (with its coverage) and majority vote.
"""

from __future__ import annotations

import argparse
import random
import re

from memfit_jupyter.reliability.confidence import Sample, Similarity, score
from memfit_jupyter.reliability.synthesis import majority, synthesize


def auroc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def phrase(rng, a, b, value):
    return rng.choice([f"{value}", f"The answer is {value}.", f"{a} x {b} = {value}", f"It is {value}"])


def make_question(rng, k):
    a, b = rng.randint(11, 99), rng.randint(11, 99)
    truth = a * b
    p = rng.uniform(0.2, 0.9)
    favourite = truth + rng.choice([-10, 10, 1, -1, 100])
    out = []
    for _ in range(k):
        right = rng.random() < p
        if right:
            value = truth
            stated = min(1.0, max(0.0, rng.gauss(0.75, 0.15)))
            steps = [f"{a} x {b}", f"{a} x {b} = {truth}"]
            hedge = rng.random() < 0.1
        else:
            value = favourite if rng.random() < 0.6 else truth + rng.randint(-300, 300) or truth + 7
            stated = min(1.0, max(0.0, rng.gauss(0.6, 0.2)))
            steps = [f"{a} x {b}", f"{a} x {b} = {truth if rng.random() < 0.5 else value}"]
            hedge = rng.random() < 0.3
        if hedge:
            steps.append("not sure about this")
        out.append((Sample(answer=phrase(rng, a, b, value), stated=round(stated, 2), reasoning=steps), value == truth))
    return truth, out


def is_right(answer, truth):
    return answer is not None and str(truth) in re.findall(r"\d+", answer)[-1:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sim = Similarity()
    s_pos, s_neg, st_pos, st_neg, r_pos, r_neg = [], [], [], [], [], []
    acc = {"weighted": 0, "majority": 0, "exact_majority": 0}
    cons_answered = cons_right = 0
    for _ in range(args.questions):
        truth, labelled = make_question(rng, args.samples)
        samples = score([s for s, _ in labelled], sim)
        for s, right in labelled:
            (s_pos if right else s_neg).append(s.confidence)
            (st_pos if right else st_neg).append(s.stated)
        w = synthesize(samples, "weighted", sim)
        ok = is_right(w.answer, truth)
        acc["weighted"] += ok
        (r_pos if ok else r_neg).append(w.confidence)
        acc["majority"] += is_right(majority(samples, sim), truth)
        counts = {}
        for s in samples:
            counts[s.answer] = counts.get(s.answer, 0) + 1
        acc["exact_majority"] += is_right(max(counts, key=counts.get), truth)
        c = synthesize(samples, "consensus", sim)
        if c.answer is not None:
            cons_answered += 1
            cons_right += is_right(c.answer, truth)
    n = args.questions
    print(f"labelled set: {n} questions x {args.samples} samples, seed {args.seed}")
    print(f"AUROC per sample: confidence {auroc(s_pos, s_neg):.3f}   stated confidence alone {auroc(st_pos, st_neg):.3f}")
    print(f"AUROC per result (weighted synthesis confidence): {auroc(r_pos, r_neg):.3f}")
    print(f"accuracy: weighted {acc['weighted'] / n:.3f}   majority (semantic clusters) {acc['majority'] / n:.3f}   "
          f"majority (exact string) {acc['exact_majority'] / n:.3f}")
    print(f"consensus: answers {cons_answered / n:.3f} of questions, accuracy when it answers "
          f"{(cons_right / cons_answered if cons_answered else float('nan')):.3f}")


if __name__ == "__main__":
    main()
