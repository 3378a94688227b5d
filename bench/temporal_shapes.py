"""Question-shape invariance of temporal questions on LoCoMo dev (issue 33, fourth round).

The held-out half of LoCoMo asks "how long…", "how many…", "which year…" more often than "when
did…". The same information need worded differently should rank the same, so `build` rewrites
every dev temporal question of the form "When did/was/is … X?" into the other shapes, by fixed
templates (no model), with the same evidence, and writes the set to
bench/results/temporal-shapes-set.json:

- "How long ago did X?", "How many weeks ago did X?", "What was the date when S <past verb> …?"
  (only for questions about the past: "When did", "When was", "When were");
- "Which year did X?", "In which month did X?", "On what date did X?", "Around what time did X?"
  (every question of the form).

`measure` searches the set and the original dev questions with the default profile (turn level,
auto, k 50, the cached stores of bench/temporal.py) under each parsing of the question: `main`
(asks_when / asks_name as they were before this round, patched in) and `current` (the code as it
is). It prints recall per shape, paired with "when" on the same questions, per conversation; the
leave-one-conversation-out choice between the parsings on the original dev questions (plus their
de-dated temporal questions, as bench/temporal.py --loco); and every dev question, of any
category, whose shape is `how long` or `how many` (memsearch.eval.strata).

Run: python bench/temporal_shapes.py build; python bench/temporal_shapes.py measure [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import temporal as T  # bench/ is on the path when a script of it runs

from memsearch.embedding import load_encoder, resolve_model
from memsearch.eval.datasets import Question, load_locomo
from memsearch.eval.strata import question_shape
from memsearch.profiles import load_profile
from memsearch.retrieval import query as query_module

SET = Path(__file__).resolve().parent / "results" / "temporal-shapes-set.json"

# -- the rewrite ----------------------------------------------------------------------------------

_WHEN = re.compile(r"^\s*when\s+(did|was|were|is|are|does|do|will)\s+(.+?)\s*\??\s*$", re.IGNORECASE)
_PAST = {"did", "was", "were"}
# Templates: the shape's name and its opening; {aux} and {rest} are the question's.
NEUTRAL = {
    "which year": "Which year {aux} {rest}?",
    "in which month": "In which month {aux} {rest}?",
    "on what date": "On what date {aux} {rest}?",
    "around what time": "Around what time {aux} {rest}?",
}
PAST_ONLY = {
    "how long ago": "How long ago {aux} {rest}?",
    "how many weeks ago": "How many weeks ago {aux} {rest}?",
}
DATE_WHEN = "what was the date when"
SHAPES = ["when", *PAST_ONLY, *NEUTRAL, DATE_WHEN]

# "What was the date when S <verb>-ed …": the past tense of the base verbs dev's "When did S …"
# questions use (a fixed list; a question whose verb is not in it gets no such rewrite).
_IRREGULAR = {
    "be": "was", "buy": "bought", "do": "did", "draw": "drew", "get": "got", "give": "gave", "go": "went",
    "have": "had", "hurt": "hurt", "make": "made", "meet": "met", "read": "read", "run": "ran",
    "take": "took", "win": "won", "write": "wrote", "see": "saw", "begin": "began", "leave": "left",
    "lose": "lost", "find": "found", "become": "became", "come": "came", "hold": "held", "teach": "taught",
    "send": "sent", "spend": "spent", "tell": "told", "think": "thought", "feel": "felt", "build": "built",
}  # fmt: skip
_REGULAR = frozenset([
    "achieve", "adopt", "apply", "attend", "crash", "decide", "design", "develop", "donate", "encounter", "finish",
    "help", "hike", "host", "interview", "join", "launch", "mention", "open", "organize", "paint", "participate",
    "pass", "plan", "receive", "reconnect", "share", "sign", "start", "team", "visit", "watch", "walk", "move",
    "play", "learn", "travel", "return",
])  # fmt: skip
_DOUBLED = {"plan": "planned", "stop": "stopped", "shop": "shopped", "jog": "jogged"}


def past(verb: str) -> str:
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb in _DOUBLED:
        return _DOUBLED[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _subject_end(words: Sequence[str]) -> int:
    """How many leading words name the subject: capitalised words (with possessives) joined by
    "and" ("Caroline and Melanie", "Melanie's friend": a possessive takes the word after it)."""
    n = 0
    while n < len(words):
        word = words[n]
        if word[:1].isupper() or (word == "and" and n > 0) or word.lower() in {"someone", "she", "he", "they"}:
            n += 1
            if word.endswith("'s") and n < len(words):
                n += 1  # "Melanie's friend"
            continue
        break
    return n


def date_when(aux: str, rest: str) -> str | None:
    """ "What was the date when S <verb>-ed …?" from "When did S <verb> …" (the verb in the list
    above) or "When was S …" (S plain names); None when the question does not read so."""
    words = rest.split()
    end = _subject_end(words)
    if end == 0 or end >= len(words):
        return None
    subject, verb, tail = words[:end], words[end], words[end + 1 :]
    if aux.lower() == "did":
        if verb.lower() not in _IRREGULAR and verb.lower() not in _REGULAR and verb.lower() not in _DOUBLED:
            return None
        return f"What was the date when {' '.join([*subject, past(verb.lower()), *tail])}?"
    if any(w.endswith("'s") for w in subject):  # "When was John's old area hit…": its subject is not plain
        return None
    return f"What was the date when {' '.join([*subject, aux.lower(), verb, *tail])}?"


def rewrites(question: str) -> dict[str, str]:
    """The question in each shape it can be rewritten to ({} unless it reads "When <aux> …?")."""
    found = _WHEN.match(question)
    if found is None:
        return {}
    aux, rest = found.group(1).lower(), found.group(2).rstrip(" ?")
    out = {"when": question.strip()}
    if aux in _PAST:
        out |= {shape: template.format(aux=aux, rest=rest) for shape, template in PAST_ONLY.items()}
    out |= {shape: template.format(aux=aux, rest=rest) for shape, template in NEUTRAL.items()}
    if aux in {"did", "was"} and (text := date_when(aux, rest)) is not None:
        out[DATE_WHEN] = text
    return out


def build() -> None:
    rows = []
    for conversation, questions in load_locomo(T.DATA):
        for q in questions:
            if q.category != 2 or not q.is_scored:
                continue
            for shape, text in rewrites(q.text).items():
                rows.append({"conversation": conversation.id, "question": q.id, "shape": shape, "text": text,
                             "evidence": list(q.evidence_keys)})  # fmt: skip
    SET.write_text(json.dumps({
        "source": "LoCoMo (Maharana et al., ACL 2024; snap-research/LoCoMo, CC BY-NC 4.0): dev conversations "
                  "conv-26, -30, -41, -42, -43; temporal questions rewritten by bench/temporal_shapes.py",
        "shapes": SHAPES,
        "questions": rows,
    }, indent=1) + "\n")  # fmt: skip
    counts = {shape: sum(r["shape"] == shape for r in rows) for shape in SHAPES}
    print(f"{len(rows)} questions written to {SET}: {counts}")


# -- the parsings compared ------------------------------------------------------------------------

# asks_when and asks_name as they were before this round (main at 2341bd0), patched in for `main`.
_MAIN_ASKS_WHEN = re.compile(
    r"\b(?:when|what (?:date|day|time|year|month)|which (?:year|month|day|date)|how long)\b", re.IGNORECASE
)
_MAIN_ASKS_NAME = re.compile(
    r"\b(?:who|whom|whose|where|which|what (?:\w+ )?(?:is|was|are|were) (?:the )?names?|name of|called)\b",
    re.IGNORECASE,
)


def main_asks_when(query: str) -> bool:
    return _MAIN_ASKS_WHEN.search(query) is not None


def main_asks_name(query: str) -> bool:
    return _MAIN_ASKS_NAME.search(query) is not None


def as_written(query: str) -> str:
    return query


# Each parsing: the functions patched in (module, name, function); `current` is the code as it is.
# The rules of this round, each alone: `asks_when` reads the span shapes ("how many weeks ago",
# "which week", "what was the date"); `asks_name` leaves "which year/month/…" out; `as_when` reads
# a time frame opening the question as "When" for the legs (dates.as_when).
Patch = tuple[object, str, Callable[..., object]]
_OLD_WHEN, _OLD_NAME = (query_module, "asks_when", main_asks_when), (query_module, "asks_name", main_asks_name)
_NO_FRAME = (query_module, "as_when", as_written)
PARSINGS: dict[str, list[Patch]] = {
    "main": [_OLD_WHEN, _OLD_NAME, _NO_FRAME],
    "asks_when": [_OLD_NAME, _NO_FRAME],
    "asks_name": [_OLD_WHEN, _NO_FRAME],
    "as_when": [_OLD_WHEN, _OLD_NAME],
    "current": [],
}


@contextmanager
def parsing(name: str) -> Iterator[None]:
    patches = PARSINGS[name]
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in patches]
    for module, attr, function in patches:
        setattr(module, attr, function)
    try:
        yield
    finally:
        for module, attr, function in saved:
            setattr(module, attr, function)


# -- measuring ------------------------------------------------------------------------------------


def shape_questions(data: Sequence[tuple[object, list[Question]]]) -> dict[str, list[tuple[object, list[Question]]]]:
    """The set as Questions per shape, per conversation (ids `<id>#<shape>`)."""
    rows = json.loads(SET.read_text())["questions"]
    by_id = {(c.id, q.id): q for c, qs in data for q in qs}  # type: ignore[attr-defined]
    out: dict[str, list[tuple[object, list[Question]]]] = {}
    for shape in SHAPES:
        per = []
        for conversation, _ in data:
            qs = [
                replace(
                    by_id[(row["conversation"], row["question"])], text=row["text"], id=f"{row['question']}#{shape}"
                )
                for row in rows
                if row["shape"] == shape and row["conversation"] == conversation.id  # type: ignore[attr-defined]
            ]
            per.append((conversation, qs))
        out[shape] = per
    return out


def r_cell(items: Sequence[T.Scored]) -> str:
    return T.cell(T.r(items))


def shape_table(results: Mapping[str, Mapping[str, list[T.Scored]]], convs: Sequence[str]) -> list[str]:
    """Per shape: n, R@5/R@10 whole dev and per conversation, and "when" on the same questions."""
    lines = ["| shape | n | all | " + " | ".join(convs) + " | `when` on the same questions |",
             "|---" * (len(convs) + 4) + "|"]  # fmt: skip
    when = {s.question.id.split("#")[0]: s for items in results["when"].values() for s in items}
    for shape in SHAPES:
        every = [s for items in results[shape].values() for s in items]
        paired = [when[s.question.id.split("#")[0]] for s in every]
        per = [r_cell(results[shape][c]) for c in convs]
        lines.append(f"| {shape} | {len(every)} | {r_cell(every)} | " + " | ".join(per) + f" | {r_cell(paired)} |")
    means = [T.r([s for items in results[shape].values() for s in items]) for shape in SHAPES]
    fives = [m[0] for m in means if m]
    tens = [m[1] for m in means if m]
    lines.append(f"\nspread over shapes (max − min): R@5 {max(fives) - min(fives):.3f}, "
                 f"R@10 {max(tens) - min(tens):.3f}; lowest R@5 {min(fives):.3f}")  # fmt: skip
    return lines


def counting_table(runs: Mapping[str, Mapping[str, list[T.Scored]]]) -> list[str]:
    """Every dev question (any category) of shape `how long` or `how many`, per parsing."""
    lines = ["| shape | category | n | " + " | ".join(runs) + " |", "|---" * (len(runs) + 3) + "|"]
    first = next(iter(runs.values()))
    for shape in ("how long", "how many"):
        for number, category in T.CATEGORIES.items():
            ids = {s.question.id for items in first.values() for s in items
                   if s.question.category == number and question_shape(s.question.text) == shape}  # fmt: skip
            if not ids:
                continue
            cells = [
                r_cell([s for items in run.values() for s in items if s.question.id in ids]) for run in runs.values()
            ]
            lines.append(f"| {shape} | {category} | {len(ids)} | " + " | ".join(cells) + " |")
    return lines


def shape_loco(
    baseline: str,
    runs: Mapping[str, Mapping[str, list[T.Scored]]],
    stressed: Mapping[str, Mapping[str, list[T.Scored]]],
    shape_runs: Mapping[str, Mapping[str, Mapping[str, list[T.Scored]]]],
    convs: Sequence[str],
) -> list[str]:
    """Leave one conversation out with the shape set in the choice: for each conversation, the
    parsing with the best R@5 + R@10 over the other four's original questions, their de-dated
    temporal questions and their shape-set questions; scored on the one left out, per category of
    the original questions (falls listed) and per shape of the set."""
    lines = ["| held out | chose | categories that fell | undated | de-dated | shape set, lowest shape R@5 |",
             "|---|---|---|---|---|---|"]  # fmt: skip

    def shaped(name: str, on: Sequence[str]) -> list[T.Scored]:
        return [s for per in shape_runs[name].values() for c in on for s in per[c]]

    chosen_shapes: dict[str, list[T.Scored]] = {shape: [] for shape in SHAPES}
    for held in convs:
        train = [c for c in convs if c != held]

        def score(name: str, train: Sequence[str] = train) -> float:
            originals = [s for c in train for s in runs[name][c]]
            dedated = [s for c in train for s in stressed[name][c]]
            return round(T.objective(originals) + T.objective(dedated) + T.objective(shaped(name, train)), 9)

        best = max(runs, key=lambda name: (score(name), name == baseline))
        before, after = T.groups(runs[baseline][held]), T.groups(runs[best][held])
        falls = []
        for category in T.CATEGORIES.values():
            b, a = T.r(before[category]), T.r(after[category])
            if b and a and (a[0] < b[0] - 1e-9 or a[1] < b[1] - 1e-9):
                falls.append(f"{category} {a[0] - b[0]:+.3f}/{a[1] - b[1]:+.3f}")
        undated = f"{r_cell(before['temporal evidence=undated'])} → {r_cell(after['temporal evidence=undated'])}"
        dedated = f"{r_cell(stressed[baseline][held])} → {r_cell(stressed[best][held])}"
        lows = []
        for name in (baseline, best):
            means = [T.r(shape_runs[name][shape][held]) for shape in SHAPES]
            lows.append(min(m[0] for m in means if m))
        for shape in SHAPES:
            chosen_shapes[shape] += shape_runs[best][shape][held]
        lines.append(f"| {held} | {best} | {'; '.join(falls) or 'none'} | {undated} | {dedated} | "
                     f"{lows[0]:.3f} → {lows[1]:.3f} |")  # fmt: skip
    lines += ["", "Held out, the shape set per shape (baseline → chosen on the other four):", ""]
    for shape in SHAPES:
        base = [s for per in shape_runs[baseline][shape].values() for s in per]
        lines.append(f"- {shape}: {r_cell(base)} → {r_cell(chosen_shapes[shape])}")
    return lines


def measure(names: Sequence[str], out: Path | None) -> None:
    data = load_locomo(T.DATA)
    encoder = load_encoder(resolve_model(None))
    stores = {c.id: T.store_for(c, encoder.info.name) for c, _ in data}
    stress = [(T.dedated(c, qs), [q for q in qs if q.category == 2]) for c, qs in data]
    stress_stores = {c.id: T.store_for(c, encoder.info.name) for c, _ in stress}
    convs = [c.id for c, _ in data]
    shaped = shape_questions(data)  # type: ignore[arg-type]
    base = load_profile("default")
    digest = hashlib.sha256(SET.read_bytes()).hexdigest()[:8]  # the kept rankings are the set's
    lines: list[str] = []
    runs: dict[str, dict[str, list[T.Scored]]] = {}
    stressed: dict[str, dict[str, list[T.Scored]]] = {}
    shape_runs: dict[str, dict[str, dict[str, list[T.Scored]]]] = {}
    for name in names:
        with parsing(name):
            profile = replace(base, name=f"default-{name}-parsing")
            runs[name] = T.run_variant(profile, data, stores)
            stressed[name] = T.run_variant(replace(profile, name=f"{profile.name}-dedated"), stress, stress_stores)
            shape_runs[name] = {
                shape: T.run_variant(replace(profile, name=f"{profile.name}-shape-{shape}-{digest}"), per, stores)  # type: ignore[arg-type]
                for shape, per in shaped.items()
            }
        block = [f"\n## parsing `{name}`\n", "### the shape stress set (R@5/R@10)\n"]
        block += shape_table(shape_runs[name], convs)
        block += ["", "### original dev", "```", *T.describe(name, runs[name]),
                  f"  temporal, evidence de-dated n={sum(len(v) for v in stressed[name].values())} "
                  f"{r_cell([s for v in stressed[name].values() for s in v])}", "```"]  # fmt: skip
        print("\n".join(block), flush=True)
        lines += block
    block = []
    for name in names[1:]:  # each parsing against the baseline alone, then all of them at once
        pair = [names[0], name]
        report = T.loco(names[0], {n: runs[n] for n in pair}, convs, {n: stressed[n] for n in pair})
        block += [f"\n## leave one conversation out on original dev: `{names[0]}` or `{name}`\n", "```", *report, "```"]
    if len(names) > 2:
        block += [f"\n## leave one conversation out on original dev: any of {', '.join(names)}\n", "```",
                  *T.loco(names[0], runs, convs, stressed), "```"]  # fmt: skip
    block += [f"\n## leave one conversation out, the shape set in the choice (any of {', '.join(names)})\n",
              *shape_loco(names[0], runs, stressed, shape_runs, convs)]  # fmt: skip
    block += ["\n## `how long` and `how many` questions of every category on dev\n", *counting_table(runs)]
    print("\n".join(block), flush=True)
    lines += block
    if out:
        out.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("build", "measure"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--parsings", default=",".join(PARSINGS), help="comma-separated, the first the baseline")
    args = parser.parse_args()
    if args.step == "build":
        build()
    else:
        measure(args.parsings.split(","), args.out)


if __name__ == "__main__":
    main()
