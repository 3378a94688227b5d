"""Whether a memory asks rather than tells (the `asks` adjustment).

In a conversation the turns that share a question's words without answering it are often the
other speaker's questions about the event ("What game were you playing?", "How was the event?").
A turn *asks* when its last sentence is a question and its questions hold at least `share` of its
words: "Wow, congrats! What game were you playing?" asks; "Guess what? I just skyped with that
fan, we talked for hours. Have you read it?" tells (most of its words are a statement). A
trailing bracketed note (` [image: …]`, a shared photo's caption: memsearch.ingest.readers) is
not what the speaker said and is left out. Pure: reads the text only.
"""

from __future__ import annotations

import re

_TRAILING_NOTE = re.compile(r"(?:\s*\[[^\[\]]*\])+\s*$")  # " [image: a photo of …]" at the end
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_WORD = re.compile(r"\w+")


def said(text: str) -> str:
    """The text without its trailing bracketed notes (a shared image's caption)."""
    return _TRAILING_NOTE.sub("", text).strip()


def question_share(text: str) -> float:
    """The share of the text's words that are in its questions (sentences ending with "?"); 0 when
    its last sentence is not a question (a turn that ends by telling)."""
    spoken = said(text)
    if not spoken.endswith("?"):
        return 0.0
    asked = told = 0
    for sentence in _SENTENCE.findall(spoken):
        words = len(_WORD.findall(sentence))
        if sentence.rstrip().endswith("?"):
            asked += words
        else:
            told += words
    return asked / (asked + told) if asked + told else 0.0


def asks(text: str, share: float = 0.5) -> bool:
    """Whether the text ends with a question and its questions hold at least `share` of its words
    (share 0: any text whose last sentence is a question)."""
    found = question_share(text)
    return found > 0 and found >= share
