"""Candidate temporal rules measured over the default profile's top 50, leaving one conversation out.

A rule that multiplies a turn's final score by a factor of its own (or of its session neighbours'
scores) re-orders what the default search ranked; this measures it without searching again. Step
one (`dump`) searches LoCoMo dev once with the default profile (turn level, auto, k 50; the stores
of bench/temporal.py, its de-dated stress set too) and keeps each result's final score, fusion
score, session, position and text. Step two (`rules`) scores every rule of a family on every
question and chooses, for each conversation left out, the rule (default included) with the best
R@5 + R@10 over the other four's questions plus their de-dated temporal questions, as
bench/temporal.py --loco does, and prints the per-fold per-category deltas.

The approximation: a turn outside the default's top 50 cannot enter (a factor below 1 on the
turns above it could let one in); for the `asks` rule it gave the same figures as the pipeline
(bench/temporal.py with the experiment's `asks` adjustment, bench/results/temporal-undated.md).

Run: python bench/temporal_rules.py dump; python bench/temporal_rules.py rules [--family NAME] [--moves RULE]
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import temporal as T  # bench/ is on the path when a script of it runs

from memsearch.embedding import load_encoder, resolve_model
from memsearch.eval.strata import question_shape, question_strata
from memsearch.retrieval.dates import asks_when, mentioned_ranges, says_when
from memsearch.text import STOPWORDS, WORD

DUMP = T.CACHE / "top50-default.pickle"
CATEGORIES = T.CATEGORIES
GROUPS = ["all", *CATEGORIES.values(), "undated", "dedated"]
Item = dict[str, Any]
Rule = Callable[[Item], list[float]]


def dump() -> None:
    data = T.load_locomo(T.DATA)
    encoder = load_encoder(resolve_model(None))
    profile = T.load_profile("default")
    out: dict[tuple[str, str, str], Item] = {}
    for tag in ("dev", "dedated"):
        for conversation, questions in data:
            if tag == "dedated":
                conversation = T.dedated(conversation, questions)
                questions = [q for q in questions if q.category == 2]
            turns = {t.key: t for t in conversation.turns}
            store = T.store_for(conversation, encoder.info.name)
            for q, outcome in T.search_questions(conversation, questions, profile, store):
                rows = [
                    {"key": c.memory.key.removeprefix(f"{conversation.id}/"), "final": c.final, "fusion": c.fusion,
                     "session": c.memory.session, "position": c.memory.position, "text": c.memory.text,
                     "factors": {f.name: f.value for f in c.factors}}
                    for c in outcome.results
                    if c.memory.kind == "turn" and c.memory.key is not None
                ]  # fmt: skip
                strata = question_strata(q.text, [turns[k].text for k in q.evidence_keys])
                out[(tag, conversation.id, q.id)] = {
                    "text": q.text, "category": q.category, "gold": list(q.evidence_keys), "strata": strata,
                    "rows": rows, "conversation": conversation.id,
                }  # fmt: skip
            print(tag, conversation.id, flush=True)
    DUMP.write_bytes(pickle.dumps(out))


# -- rules --------------------------------------------------------------------------------------

_NOTE = re.compile(r"(?:\s*\[[^\[\]]*\])+\s*$")  # a trailing " [image: …]"
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def question_share(text: str) -> float:
    """The share of the words in the turn's questions; 0 unless its last sentence is one (as the
    experiment's memsearch/retrieval/asking.py)."""
    spoken = _NOTE.sub("", text).strip()
    if not spoken.endswith("?"):
        return 0.0
    asked = told = 0
    for sentence in _SENTENCE.findall(spoken):
        words = len(WORD.findall(sentence))
        asked, told = (asked + words, told) if sentence.rstrip().endswith("?") else (asked, told + words)
    return asked / (asked + told) if asked + told else 0.0


_UNIT = r"(?:minutes?|hours?|days?|nights?|weeks?|weekends?|months?|years?)"
_SPAN = re.compile(rf"\b(?:how (?:many|much) {_UNIT}|how much time|(?:what|which) (?:week|weekend|season)s?)\b", re.I)


def asks_time(question: str) -> bool:
    """asks_when, or a span or date shape it does not read ("how many weeks", "which week")."""
    return asks_when(question) or _SPAN.search(question) is not None


def finals(item: Item) -> list[float]:
    return [row["final"] for row in item["rows"]]


def asks_rule(factor: float, share: float, gate: str, spans_when: bool = False) -> Rule:
    """× factor for a turn whose questions hold ≥ share of its words (its last sentence one);
    gate: all questions, `other` (not asking when), `spans` (not asking when nor a span)."""

    def rule(item: Item) -> list[float]:
        question = item["text"]
        timed = asks_time(question) if gate == "spans" else asks_when(question)
        scores = finals(item)
        if spans_when and asks_time(question) and not asks_when(question):  # `when` for the new shapes
            scores = [s * 1.2 if says_when(row["text"]) else s for s, row in zip(scores, item["rows"], strict=True)]
        if gate != "all" and timed:
            return scores
        return [
            s * factor if (found := question_share(row["text"])) > 0 and found >= share else s
            for s, row in zip(scores, item["rows"], strict=True)
        ]

    return rule


def pool_rule(weight: float, reach: int, before_only: bool) -> Rule:
    """When-questions: a turn scores at least weight × its best neighbour's score within `reach`
    turns of its session (`before_only`: only from the turns after it, i.e. the turns before a
    telling turn inherit: the question or greeting that prompted it)."""

    def rule(item: Item) -> list[float]:
        scores = finals(item)
        if not asks_when(item["text"]):
            return scores
        at = {(row["session"], row["position"]): s for row, s in zip(item["rows"], scores, strict=True)}
        out = []
        for row, s in zip(item["rows"], scores, strict=True):
            offsets = [d for d in range(1, reach + 1)] + ([] if before_only else [-d for d in range(1, reach + 1)])
            near = [at.get((row["session"], row["position"] + d)) for d in offsets if row["position"] is not None]
            out.append(max([s, *(weight * n for n in near if n is not None)]))
        return out

    return rule


_SUFFIX = re.compile(r"(?:'s|ing|ed|es|s)$")
_QUESTION_WORDS = frozenset(["long", "many", "much", "often", "year", "month", "week", "day", "date", "time", "ago",
                             "when", "did", "go", "get", "start"])  # fmt: skip


def stems(text: str) -> set[str]:
    found = set()
    for word in WORD.findall(text.lower()):
        if word not in STOPWORDS:
            stem = _SUFFIX.sub("", word)
            found.add(stem if len(stem) >= 3 else word)
    return found


def event_rule(strength: float, reach: int, turn_text: Mapping[tuple[str, str], str],
               speakers: Mapping[str, set[str]]) -> Rule:  # fmt: skip
    """When-questions: × (1 + strength · share of the question's event words said by the turn and
    its `reach` neighbours either side (reach 0: the turn alone))."""

    def rule(item: Item) -> list[float]:
        scores = finals(item)
        if not asks_when(item["text"]):
            return scores
        conversation = item["conversation"]
        event = stems(item["text"]) - _QUESTION_WORDS - {s for name in speakers[conversation] for s in stems(name)}
        if not event:
            return scores
        out = []
        for row, s in zip(item["rows"], scores, strict=True):
            session, _, index = row["key"].partition(":")
            keys = [f"{session}:{int(index) + d}" for d in range(-reach, reach + 1)]
            said = stems(" ".join(turn_text.get((conversation, key), "") for key in keys))
            out.append(s * (1 + strength * len(event & said) / len(event)))
        return out

    return rule


_PLAN = re.compile(r"\b(?:tomorrow|tonight|next \w+|coming \w+)\b", re.I)


def when_rule(mode: str, factor: float = 1.2) -> Rule:
    """The `when` adjustment (×1.2 for when-questions) given to other turns: `past` only for turns
    whose words date something past (as the time leg reads them), `noplan` not for plans
    ("tomorrow", "next week"), `every` for every turn (each turn dated by its session)."""

    def rule(item: Item) -> list[float]:
        scores = finals(item)
        if not asks_when(item["text"]):
            return scores
        out = []
        for row, s in zip(item["rows"], scores, strict=True):
            had = row["factors"].get("when", 1.0) != 1.0
            text = row["text"]
            if mode == "past":
                keep = bool(mentioned_ranges(text, date(2023, 6, 1)))
            elif mode == "noplan":
                keep = says_when(_PLAN.sub("", text))
            else:
                keep = True
            out.append(s / factor if had and not keep else s * factor if keep and not had else s)
        return out

    return rule


_DURATION = re.compile(
    r"\b(?:(?:for|since) (?:about|around|almost|nearly|over|roughly|just|only) (?:\d+|a|an|one|two|three|four|five|six"
    r"|seven|eight|nine|ten|a few|a couple of|several) (?:minutes?|hours?|days?|weeks?|months?|years?)"
    r"|(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten) (?:days?|weeks?|months?|years?) (?:now|already)"
    r"|since I was \d+|ever since)\b",
    re.I,
)


def duration_rule(factor: float, gate: str) -> Rule:
    """The `when` factor also for turns that tell a duration the `when` lexicon does not read ("for
    about four months", "seven years now", "since I was 17"); gate `when`: every question that asks
    when, `long`: "how long" / "how many <unit>" questions only."""

    def rule(item: Item) -> list[float]:
        scores = finals(item)
        question = item["text"]
        if not asks_when(question) or (gate == "long" and question_shape(question) != "how long"):
            return scores
        return [
            s * factor if not says_when(row["text"]) and _DURATION.search(row["text"]) else s
            for s, row in zip(scores, item["rows"], strict=True)
        ]

    return rule


def families() -> dict[str, dict[str, Rule]]:
    raw = json.loads(Path(T.DATA).read_text())
    turn_text: dict[tuple[str, str], str] = {}
    speakers: dict[str, set[str]] = {}
    for sample in raw:
        for name, session in sample["conversation"].items():
            if name.startswith("session_") and isinstance(session, list):
                for turn in session:
                    caption = f" {turn['blip_caption']}" if turn.get("blip_caption") else ""
                    turn_text[(sample["sample_id"], turn["dia_id"])] = turn["text"] + caption
                    speakers.setdefault(sample["sample_id"], set()).add(turn["speaker"].lower())
    shares = (0.0, 0.1, 0.2, 0.3, 0.5)
    return {
        "asks_all": {f"asks_all_s{s:g}": asks_rule(0.8, s, "all") for s in shares},
        "asks_other": {f"asks_other_s{s:g}": asks_rule(0.8, s, "other") for s in shares},
        "asks_spans": {f"asks_spans_s{s:g}": asks_rule(0.8, s, "spans") for s in shares},
        "asks_spans_when": {f"asks_spans_when_s{s:g}": asks_rule(0.8, s, "spans", True) for s in shares},
        "pool": {
            f"pool_r{r}_w{w:g}{'_before' if b else ''}": pool_rule(w, r, b)
            for r in (1, 2)
            for w in (0.5, 0.6, 0.7, 0.8, 0.9)
            for b in (False, True)
        },
        "pool_before": {
            f"pool_r{r}_w{w:g}_before": pool_rule(w, r, True) for r in (1, 2) for w in (0.5, 0.6, 0.7, 0.8, 0.9)
        },
        "event": {
            f"event_r{r}_s{s:g}": event_rule(s, r, turn_text, speakers) for r in (0, 1, 2) for s in (0.1, 0.2, 0.3, 0.5)
        },
        "when": {f"when_{m}": when_rule(m) for m in ("past", "noplan", "every")},
        "duration": {f"duration_{g}_{f:g}": duration_rule(f, g) for g in ("when", "long") for f in (1.1, 1.2)},
    }


# -- scoring ------------------------------------------------------------------------------------

Key = tuple[str, str, str]


def recalls(items: Mapping[Key, Item], rule: Rule | None) -> dict[Key, tuple[float, float]]:
    out = {}
    for key, item in items.items():
        rows = item["rows"]
        scores = rule(item) if rule else finals(item)
        order = sorted(range(len(rows)), key=lambda n: (-scores[n], -rows[n]["fusion"]))
        ranked = [rows[n]["key"] for n in order]
        gold = set(item["gold"])
        out[key] = (sum(k in gold for k in ranked[:5]) / len(gold), sum(k in gold for k in ranked[:10]) / len(gold))
    return out


def in_group(key: Key, item: Item, group: str) -> bool:
    if key[0] == "dedated":
        return group == "dedated"
    if group == "all":
        return True
    if group == "undated":
        return item["category"] == 2 and item["strata"]["evidence"] == "undated"
    return CATEGORIES.get(item["category"]) == group


def mean_of(items: Mapping[Key, Item], res: Mapping[Key, tuple[float, float]], convs: Sequence[str],
            group: str) -> tuple[float, float] | None:  # fmt: skip
    values = [res[k] for k in res if k[1] in convs and in_group(k, items[k], group)]
    if not values:
        return None
    return sum(v[0] for v in values) / len(values), sum(v[1] for v in values) / len(values)


def report(items: Mapping[Key, Item], runs: Mapping[str, Mapping[Key, tuple[float, float]]]) -> list[str]:
    convs = sorted({k[1] for k in items})
    lines = ["| rule | " + " | ".join(GROUPS) + " |", "|---" * (len(GROUPS) + 1) + "|"]
    for name, res in runs.items():
        cells = [mean_of(items, res, convs, g) for g in GROUPS]
        lines.append(f"| {name} | " + " | ".join("—" if c is None else f"{c[0]:.3f}/{c[1]:.3f}" for c in cells) + " |")
    lines += ["", "Leave one conversation out (chosen by R@5+R@10 over the other four, plus their de-dated):", ""]
    falls = []
    chosen: dict[Key, tuple[float, float]] = {}
    for held in convs:
        train = [c for c in convs if c != held]

        def objective(name: str, train: Sequence[str] = train) -> float:
            every, stress = mean_of(items, runs[name], train, "all"), mean_of(items, runs[name], train, "dedated")
            assert every is not None and stress is not None
            return round(sum(every) + sum(stress), 9)

        best = max(runs, key=lambda name: (objective(name), name == "default"))
        chosen |= {k: v for k, v in runs[best].items() if k[1] == held}
        deltas = []
        for group in GROUPS:
            before, after = mean_of(items, runs["default"], [held], group), mean_of(items, runs[best], [held], group)
            if before is None or after is None:
                continue
            d5, d10 = after[0] - before[0], after[1] - before[1]
            deltas.append(f"{group} {d5:+.3f}/{d10:+.3f}")
            if group in CATEGORIES.values() and (d5 < -1e-9 or d10 < -1e-9):
                falls.append(f"{held} {group} {d5:+.3f}/{d10:+.3f}")
        lines.append(f"- {held}: chose {best}: " + "; ".join(deltas))
    lines.append("- categories that fell on a fold: " + ("; ".join(falls) if falls else "none"))
    held_out = []
    for group in GROUPS:
        before, after = mean_of(items, runs["default"], convs, group), mean_of(items, chosen, convs, group)
        if before is not None and after is not None:
            held_out.append(f"{group} {before[0]:.3f}/{before[1]:.3f} → {after[0]:.3f}/{after[1]:.3f}")
    lines.append("- all held out: " + "; ".join(held_out))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("dump", "rules"))
    parser.add_argument("--family", default=None, help="one family (default: each in turn)")
    parser.add_argument("--moves", default=None, help="list the questions this rule moves")
    args = parser.parse_args()
    if args.step == "dump":
        dump()
        return
    items: dict[Key, Item] = pickle.loads(DUMP.read_bytes())
    found = families()
    base = recalls(items, None)
    for family, rules in found.items():
        if args.family and family != args.family:
            continue
        runs = {"default": base, **{name: recalls(items, rule) for name, rule in rules.items()}}
        print(f"\n## {family}\n")
        print("\n".join(report(items, runs)))
        if args.moves and args.moves in runs:
            for key, after in runs[args.moves].items():
                if after != base[key]:
                    item = items[key]
                    stratum = item["strata"]["evidence"] if item["category"] == 2 else ""
                    moved = f"{base[key][0]:.2f}/{base[key][1]:.2f} -> {after[0]:.2f}/{after[1]:.2f}"
                    print(f"  {key[0]} {key[2]} [{CATEGORIES[item['category']]} {stratum}] {moved} {item['text']}")


if __name__ == "__main__":
    main()
