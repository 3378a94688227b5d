"""Temporal questions on LoCoMo dev, split by what their evidence says (issue 33).

Each conversation's store is built once into a cache folder (keyed by a hash of the memories the
importer makes, so a change to the views builds it again) and every profile variant searches all
five in one process. Reported per variant: R@5 / R@10 overall, per category, and for the temporal
questions per evidence stratum (`dated`: an evidence turn dates something by `says_when`'s
lexicon; `undated`: none does) and per question shape (memsearch.eval.strata), per conversation.

`--loco` chooses, for each conversation left out, the variant with the best R@5 + R@10 over the
other four (over all categories: a rule must not buy temporal with another category) and scores
it on the one left out, against the baseline variant; the per-fold per-category deltas follow.

Run: python bench/temporal.py [--variants NAME,…] [--loco] [--out bench/results/temporal-dev-loco.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchdata import LOCOMO_DEV  # bench/ is on the path when a script of it runs

from memsearch.api import Memsearch
from memsearch.embedding import load_encoder, resolve_model
from memsearch.eval.datasets import Question, load_locomo
from memsearch.eval.scoring import last_date, turn_ranking
from memsearch.eval.strata import EVIDENCE_VALUES, SHAPES, question_strata
from memsearch.ingest.conversations import conversation_memories
from memsearch.ingest.readers import Conversation
from memsearch.profiles import Adjustment, Profile, load_profile
from memsearch.retrieval import dates
from memsearch.retrieval.explain import SearchOutcome
from memsearch.retrieval.request import SearchRequest
from memsearch.store import Scope

DATA = LOCOMO_DEV
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memsearch-bench" / "temporal"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
K = 50


@dataclass(frozen=True)
class Scored:
    question: Question
    strata: Mapping[str, str]
    ranked: tuple[str, ...]

    def recall(self, k: int) -> float:
        gold = set(self.question.evidence_keys)
        return sum(key in gold for key in self.ranked[:k]) / len(gold)


def store_for(conversation: Conversation, encoder_name: str) -> Path:
    """The conversation's store, built once per content of its memories."""
    memories = conversation_memories(conversation, sessions=True)
    digest = hashlib.sha256(
        json.dumps([[m.key, m.text, sorted(m.views.items()), str(m.created_at)] for m in memories]).encode()
        + encoder_name.encode()
    ).hexdigest()[:16]
    path = CACHE / f"{conversation.id}-{digest}.db"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        for leftover in CACHE.glob(f"{partial.name}*"):
            leftover.unlink()
        with Memsearch(partial) as ms:
            ms.add_many(memories)
        for suffix in ("-wal", "-shm"):
            Path(f"{partial}{suffix}").unlink(missing_ok=True)
        partial.rename(path)
    return path


def code_version() -> str:
    """A hash of the retrieval code: a run is kept while neither it nor the profile changes."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent / "memsearch"
    for file in sorted([*root.glob("retrieval/*.py"), *root.glob("profiles/*.py"), *root.glob("store/*.py")]):
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _date_expressions() -> list[re.Pattern[str]]:
    """Every date expression memsearch reads: the `when` lexicon, the relative words the time leg
    resolves, and the absolute dates (most specific first)."""
    patterns = [pattern for _, pattern in dates._date_patterns()]
    return [*patterns, dates._mention(), dates._says_when(), dates._bare_month()]


def without_dates(text: str) -> str:
    """The text with every date expression taken out ("I finished the marathon last Sunday!" →
    "I finished the marathon !")."""
    for pattern in _date_expressions():
        text = pattern.sub("", text)
    return " ".join(text.split())


def dedated(conversation: Conversation, questions: Sequence[Question]) -> Conversation:
    """The conversation with the date expressions taken out of the evidence turns of its temporal
    questions: what the issue says of the other half, whose evidence is more often an undated
    statement whose date is its session's, with the same conversations around it."""
    keys = {key for q in questions if q.category == 2 for key in q.evidence_keys}
    sessions = tuple(
        replace(
            session,
            turns=tuple(
                replace(turn, text=without_dates(turn.text)) if turn.key in keys else turn for turn in session.turns
            ),
        )
        for session in conversation.sessions
    )
    return replace(conversation, sessions=sessions)


def run_variant(
    profile: Profile, data: Sequence[tuple[Conversation, list[Question]]], stores: Mapping[str, Path]
) -> dict[str, list[Scored]]:
    """Every scored question of every conversation, searched with the profile (turn level, auto);
    the rankings are kept in the cache folder by profile, stores and code."""
    key = hashlib.sha256(
        json.dumps([profile.to_dict(), sorted(str(p) for p in stores.values()), code_version()], default=str).encode()
    ).hexdigest()[:16]
    kept = CACHE / "runs" / f"{profile.name}-{key}.json"
    if kept.is_file():
        rankings = json.loads(kept.read_text())
        out = {}
        for conversation, questions in data:
            turns = {t.key: t for t in conversation.turns}
            out[conversation.id] = [
                Scored(q, question_strata(q.text, [turns[k].text for k in q.evidence_keys]), tuple(rankings[q.id]))
                for q in questions
                if q.is_scored
            ]
        return out
    out = _run_variant(profile, data, stores)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps({s.question.id: list(s.ranked) for items in out.values() for s in items}))
    return out


def search_questions(
    conversation: Conversation, questions: Sequence[Question], profile: Profile, store: Path
) -> list[tuple[Question, SearchOutcome]]:
    """Each scored question searched as the benchdata protocol does (turn level, the
    conversation's scope, as of its last date, k K, no access recorded), with its outcome."""
    scored = [q for q in questions if q.is_scored]
    requests = [
        SearchRequest(q.text, k=K, scope=Scope(conversation=conversation.id), as_of=last_date(conversation),
                      touch=False, granularity="turn", profile=profile)
        for q in scored
    ]  # fmt: skip
    with Memsearch(store) as ms:
        outcomes = ms.search_many(requests)
    return list(zip(scored, outcomes, strict=True))


def _run_variant(
    profile: Profile, data: Sequence[tuple[Conversation, list[Question]]], stores: Mapping[str, Path]
) -> dict[str, list[Scored]]:
    out: dict[str, list[Scored]] = {}
    for conversation, questions in data:
        turns = {t.key: t for t in conversation.turns}
        out[conversation.id] = [
            Scored(
                q,
                question_strata(q.text, [turns[key].text for key in q.evidence_keys]),
                tuple(turn_ranking(o.results, conversation.id)),
            )
            for q, o in search_questions(conversation, questions, profile, stores[conversation.id])
        ]
    return out


def mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return math.fsum(values) / len(values) if values else None


def r(items: Sequence[Scored]) -> tuple[float, float] | None:
    if not items:
        return None
    return mean(s.recall(5) for s in items) or 0.0, mean(s.recall(10) for s in items) or 0.0


def cell(pair: tuple[float, float] | None) -> str:
    return "—" if pair is None else f"{pair[0]:.3f}/{pair[1]:.3f}"


def groups(items: Sequence[Scored]) -> dict[str, list[Scored]]:
    """All, each category, and the temporal questions by evidence stratum and by shape."""
    found: dict[str, list[Scored]] = {"all": list(items)}
    for number, name in CATEGORIES.items():
        found[name] = [s for s in items if s.question.category == number]
    temporal = found["temporal"]
    for key, values in (("evidence", EVIDENCE_VALUES), ("shape", SHAPES)):
        for value in values:
            found[f"temporal {key}={value}"] = [s for s in temporal if s.strata[key] == value]
    return found


def describe(name: str, results: Mapping[str, list[Scored]]) -> list[str]:
    every = [s for items in results.values() for s in items]
    lines = [f"{name}"]
    for group, items in groups(every).items():
        per = "  ".join(f"{c}:{cell(r(groups(s)[group]))}" for c, s in results.items())
        lines.append(f"  {group:<32} n={len(items):>3} {cell(r(items))}   {per}")
    return lines


def objective(items: Sequence[Scored]) -> float:
    pair = r(items)
    return 0.0 if pair is None else pair[0] + pair[1]


def loco(
    baseline: str,
    runs: Mapping[str, Mapping[str, list[Scored]]],
    conversations: Sequence[str],
    stressed: Mapping[str, Mapping[str, list[Scored]]] | None = None,
) -> list[str]:
    """Leave one conversation out: the variant best on the other four (R@5 + R@10 over all their
    questions, plus over their temporal questions de-dated when `stressed` has them) against the
    baseline on the one left out, with the per-category deltas of each fold."""
    stressed = stressed or {}

    def train_score(variant: str, train: Sequence[str]) -> float:
        score = objective([s for c in train for s in runs[variant][c]])
        if variant in stressed:
            score += objective([s for c in train for s in stressed[variant][c]])
        return score

    lines = [
        "leave one conversation out (chosen by R@5+R@10 over all questions of the other four"
        + (", plus R@5+R@10 of their temporal questions de-dated)" if stressed else ")")
    ]
    chosen_all: list[Scored] = []
    base_all: list[Scored] = []
    stress_base: list[Scored] = []
    stress_chosen: list[Scored] = []
    falls = []
    for held in conversations:
        train = [c for c in conversations if c != held]
        best = max(runs, key=lambda v: (train_score(v, train), v == baseline))
        lines.append(f"  {held}: chose {best}")
        base_groups, chosen_groups = groups(runs[baseline][held]), groups(runs[best][held])
        for group in base_groups:
            before, after = r(base_groups[group]), r(chosen_groups[group])
            if before is None or after is None:
                continue
            delta = (after[0] - before[0], after[1] - before[1])
            if group in CATEGORIES.values() and (delta[0] < -1e-9 or delta[1] < -1e-9):
                falls.append(f"{held} {group} {delta[0]:+.3f}/{delta[1]:+.3f}")
            lines.append(
                f"    {group:<32} n={len(base_groups[group]):>3} {cell(before)} -> {cell(after)}"
                f"  ({delta[0]:+.3f}/{delta[1]:+.3f})"
            )
        if stressed:
            before, after = r(stressed[baseline][held]), r(stressed[best][held])
            lines.append(f"    {'temporal, evidence de-dated':<32} n={len(stressed[baseline][held]):>3} "
                         f"{cell(before)} -> {cell(after)}")  # fmt: skip
            stress_base += stressed[baseline][held]
            stress_chosen += stressed[best][held]
        chosen_all += runs[best][held]
        base_all += runs[baseline][held]
    lines.append("  all held out:")
    base_groups, chosen_groups = groups(base_all), groups(chosen_all)
    for group in base_groups:
        lines.append(
            f"    {group:<32} n={len(base_groups[group]):>3} {cell(r(base_groups[group]))} -> "
            f"{cell(r(chosen_groups[group]))}"
        )
    if stressed:
        lines.append(f"    {'temporal, evidence de-dated':<32} n={len(stress_base):>3} {cell(r(stress_base))} -> "
                     f"{cell(r(stress_chosen))}")  # fmt: skip
    lines.append("  categories that fell on a fold: " + ("; ".join(falls) if falls else "none"))
    return lines


# -- variants: the default profile with one rule changed ------------------------------------------


def with_adjustment(profile: Profile, kind: str, **changes: object) -> Profile:
    """The profile with its adjustment of this kind changed (or added before decay, or removed with
    `remove=True`)."""
    remove = bool(changes.pop("remove", False))
    adjust = list(profile.adjust)
    index = next((n for n, a in enumerate(adjust) if a.kind == kind), None)
    if remove:
        adjust = [a for a in adjust if a.kind != kind]
    elif index is None:
        at = next((n for n, a in enumerate(adjust) if a.kind == "decay"), len(adjust))
        adjust.insert(at, Adjustment(kind, **changes))  # type: ignore[arg-type]
    else:
        adjust[index] = replace(adjust[index], **changes)  # type: ignore[arg-type]
    return replace(profile, adjust=tuple(adjust))


def variants() -> dict[str, Callable[[], Profile]]:
    """The default profile and its variants that profile data can express. The variants of the
    experiment commit (an event-word match, `when` for a dated turn's neighbours, the dense query
    without its when-frame) needed code that was reverted; their figures are in
    bench/results/temporal-dev-loco.md. So did the second round's (who in the window says it,
    turns that end by asking: commit 7ce825f), in bench/results/temporal-attribution.md; the
    third's `asks` adjustment (turns that ask rather than tell: commit 7b0b1b0) and the rules
    bench/temporal_rules.py measures over the default's top 50, in bench/results/temporal-undated.md."""
    base = load_profile("default")

    def named(name: str, profile: Profile) -> Profile:
        return replace(profile, name=name)

    found: dict[str, Callable[[], Profile]] = {
        "default": lambda: base,
        "no_when": lambda: named("no_when", with_adjustment(base, "when", remove=True)),
    }
    for weight in (1.0, 1.75, 2.0, 2.5):  # the time leg's RRF weight (1.5 in the default)
        found[f"time_w{weight:g}"] = lambda w=weight: named(
            f"time_w{w:g}", replace(base, fusion=replace(base.fusion, weights={**base.fusion.weights, "time": w}))
        )
    for weight in (0.5, 1.0):  # BM25 over the turn's own text beside the context legs
        found[f"own_lexical{weight:g}"] = lambda w=weight: named(
            f"own_lexical{w:g}",
            replace(
                base,
                legs={**base.legs, "lexical_own": "lexical"},
                fusion=replace(base.fusion, weights={**base.fusion.weights, "lexical_own": w}),
            ),
        )
    for factor in (1.05, 1.1, 1.15, 1.3):
        found[f"when{factor:g}"] = lambda f=factor: named(f"when{f:g}", with_adjustment(base, "when", factor=f))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="default", help="comma-separated names (see variants())")
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--loco", action="store_true", help="leave one conversation out over the variants")
    parser.add_argument("--baseline", default="default")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--dedate", action="store_true", help="also on the de-dated conversations (see dedated)")
    parser.add_argument("--misses", default=None, help="print the temporal misses at R@5 of this variant")
    args = parser.parse_args()
    data = load_locomo(DATA)[: args.conversations]
    encoder = load_encoder(resolve_model(None))
    stores = {conversation.id: store_for(conversation, encoder.info.name) for conversation, _ in data}
    known = variants()
    runs: dict[str, dict[str, list[Scored]]] = {}
    stressed: dict[str, dict[str, list[Scored]]] = {}
    lines: list[str] = []
    if args.dedate:
        stress = [(dedated(c, qs), qs) for c, qs in data]
        stress_stores = {c.id: store_for(c, encoder.info.name) for c, _ in stress}
    for name in args.variants.split(","):
        tick = time.perf_counter()
        runs[name] = run_variant(known[name](), data, stores)
        lines += describe(name, runs[name])
        print("\n".join(describe(name, runs[name])), f"\n  ({time.perf_counter() - tick:.0f} s)", flush=True)
        if args.dedate:
            profile = replace(known[name](), name=f"{name}-dedated")
            temporal = [(c, [q for q in qs if q.category == 2]) for c, qs in stress]
            stressed[name] = run_variant(profile, temporal, stress_stores)
            every = [s for items in stressed[name].values() for s in items]
            per = "  ".join(f"{c}:{cell(r(items))}" for c, items in stressed[name].items())
            line = f"  {'temporal, evidence de-dated':<32} n={len(every):>3} {cell(r(every))}   {per}"
            lines.append(line)
            print(line, flush=True)
    if args.misses:
        for items in runs[args.misses].values():
            for s in items:
                if s.question.category == 2 and s.recall(5) < 1:
                    first = next((n for n, k in enumerate(s.ranked, 1) if k in s.question.evidence_keys), None)
                    print(s.question.id, dict(s.strata), f"first={first}", repr(s.question.text))
                    print("   gold", s.question.evidence_keys, "top", s.ranked[:5])
    if args.loco:
        report = loco(args.baseline, runs, [c.id for c, _ in data], stressed)
        print("\n".join(report))
        lines += report
    if args.out:
        args.out.write_text("```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
