"""A yes-or-no spelled as text means the same wherever it is read: an environment variable
(MEMSEARCH_READ_ONLY, MEMSEARCH_AUTOSERVE, CEMS_ENABLE_PROJECT_PENALTY), config.toml, a URL
parameter of the HTTP API."""

from __future__ import annotations

import pytest

from memsearch.choices import SWITCH_OFF, SWITCH_ON, switch
from memsearch.config import AUTOSERVE_IDLE_S, load_config
from memsearch.errors import InvalidInputError
from memsearch.operations import SEARCH
from memsearch.paths import read_only_requested
from memsearch.profiles import load_profile, with_environment

SPELLINGS = [(word, True) for word in SWITCH_ON] + [(word, False) for word in SWITCH_OFF]
SPELLINGS += [(word.upper(), on) for word, on in SPELLINGS] + [(" yes ", True), (" Off", False)]


@pytest.mark.parametrize(("text", "on"), SPELLINGS)
def test_every_reader_takes_the_same_words(text: str, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    assert switch(text) is on
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", text)
    assert read_only_requested() is on
    assert load_config({"MEMSEARCH_AUTOSERVE": text})["autoserve"] == (AUTOSERVE_IDLE_S if on else None)
    assert SEARCH.field("touch").from_text([text]) is on
    cems = with_environment(load_profile("cems"), {"CEMS_ENABLE_PROJECT_PENALTY": text})
    project = next(a for a in cems.adjust if a.kind == "project")
    assert (project.other == 1.0) is not on


@pytest.mark.parametrize("text", ["maybe", "2", "enable", "tru"])
def test_other_words_are_refused_or_err_towards_not_writing(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert switch(text) is None
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", text)
    assert read_only_requested()  # a misspelt value opens the store for reading only
    with pytest.raises(InvalidInputError, match="true or false"):
        SEARCH.field("touch").from_text([text])
    with pytest.raises(InvalidInputError, match="CEMS_ENABLE_PROJECT_PENALTY"):
        with_environment(load_profile("cems"), {"CEMS_ENABLE_PROJECT_PENALTY": text})


def test_unset_or_empty_is_not_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSEARCH_READ_ONLY", raising=False)
    assert not read_only_requested()
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", "  ")
    assert not read_only_requested()
