"""`consolidate` (issue 8, item 4): texts that differ in an exact token are distinct facts, never
near-duplicates; the table shows both texts; a dry run works in every output format."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.consolidate import distinct_exact_tokens
from tests.test_cli import run, terminal, unstyled


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Store the subscription_id in the billing table", "Store the invoice_id in the billing table"),
        ("The API listens on port 8080", "The API listens on port 8081"),
        ("Logs go to /var/log/app", "Logs go to /var/log/worker"),
        ("Upgrade the driver to v1.2.3", "Upgrade the driver to v1.2.4"),
        ("The deploy key is held by Alice", "The deploy key is held by Bob"),
        ("parseConfig crashes on empty input", "parseYaml crashes on empty input"),
        ("Read settings from config.yaml", "Read settings from config.toml"),
    ],
)
def test_texts_differing_in_an_exact_token_are_distinct(a: str, b: str) -> None:
    assert distinct_exact_tokens(a, b) and distinct_exact_tokens(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The staging password rotates every month", "The staging password rotates every month."),
        ("Deploy the key to prod.", "the deploy key goes to prod"),  # a capitalised first word found lower-case
        ("Fixed null-deref when JWT was malformed", "Fixed the null-deref when a JWT was malformed"),
        ("Alice prefers dark roast coffee", "Alice prefers dark roast coffee!"),
    ],
)
def test_rewordings_with_the_same_exact_tokens_are_not_distinct(a: str, b: str) -> None:
    assert not distinct_exact_tokens(a, b)


@given(st.text())
def test_a_text_is_never_distinct_from_itself(text: str) -> None:
    assert not distinct_exact_tokens(text, text)


@given(st.text(), st.text())
def test_distinctness_is_symmetric(a: str, b: str) -> None:
    assert distinct_exact_tokens(a, b) == distinct_exact_tokens(b, a)


WEBHOOK = (
    "When the Stripe webhook for a renewed plan arrives, the billing worker validates the signature, "
    "looks up the customer, writes the {} to the ledger table and sends the receipt email."
)


@pytest.fixture
def near_duplicates() -> None:
    """Two texts at cosine ≥ 0.95 that differ in one identifier, and a true rewording."""
    run("add", WEBHOOK.format("subscription_id"), "--at", "2024-05-01")
    run("add", WEBHOOK.format("invoice_id"), "--at", "2024-05-02")
    run("add", "The staging database password rotates every month", "--at", "2024-05-01")
    run("add", "The staging database password rotates every month.", "--at", "2024-05-03")
    run("add", "We upgraded the postgres driver to version 3.1.2 for the billing service", "--at", "2024-05-01")
    run("add", "We upgraded the postgres driver to version 3.1.3 for the billing service", "--at", "2024-05-02")


def test_an_identifier_keeps_two_near_identical_notes_apart(near_duplicates: None) -> None:
    from memsearch.api import Memsearch

    with Memsearch() as ms:
        ids, matrix = ms.store().all_vectors()
        row = {memory_id: position for position, memory_id in enumerate(ids.tolist())}
        for a, b in ((1, 2), (5, 6)):  # the embeddings alone would merge them
            assert float(matrix[row[a]] @ matrix[row[b]]) >= 0.95
    report = json.loads(run("consolidate", "--dry-run", "-f", "json").stdout)
    assert [(row["id"], row["superseded_by"]) for row in report["superseded"]] == [(3, 4)]
    assert report["superseded"][0]["text"] == "The staging database password rotates every month"
    assert report["superseded"][0]["superseded_by_text"] == "The staging database password rotates every month."
    assert {"group_id": 1, "ids": [1, 2]} in report["groups"] and {"group_id": 5, "ids": [5, 6]} in report["groups"]


def test_a_dry_run_works_in_every_format_and_changes_nothing(near_duplicates: None) -> None:
    table = unstyled(run("consolidate", "--dry-run", env=terminal(120)).stdout)
    assert "older text" in table and "newer text" in table
    assert "rotates every month" in table and "month." in table
    assert "would mark 1 superseded" in run("consolidate", "--dry-run").stderr
    plain = run("consolidate", "--dry-run").stdout.splitlines()
    assert plain[0].split("\t") == ["id", "by", "older text", "newer text"]
    assert plain[1].split("\t") == [
        "3", "4", "The staging database password rotates every month",
        "The staging database password rotates every month.",
    ]  # fmt: skip
    lines = [json.loads(line) for line in run("consolidate", "--dry-run", "-f", "jsonl").stdout.splitlines()]
    assert {"id": 3, "superseded_by": 4} in [{k: line[k] for k in ("id", "superseded_by")} for line in lines]
    rows = list(csv.DictReader(io.StringIO(run("consolidate", "--dry-run", "-f", "csv").stdout)))
    superseded = [row for row in rows if row["superseded_by"]]
    assert [(r["id"], r["superseded_by"], r["newer_text"][-6:]) for r in superseded] == [("3", "4", "month.")]
    assert all(m["superseded_by"] is None for m in json.loads(run("list", "-f", "json").stdout))
