"""Parse a VLM's free-text answers into progress, yes/no, preferences and published formats.

Parsed are progress in [0, 1], yes/no, pairwise preferences, and the answer formats of
published reward models (RoboReward's 1-5 score, Robo-Dopamine's hop, a SARM-style stage
and progress).

Every parser returns None for an answer it cannot read; callers count those and use a
documented fallback. Nothing here raises on any string.

Progress (``parse_progress``), first match wins, in this order:

1. a percentage: ``"75%"``, ``"75 percent"``, ``"seventy-five percent"`` -> 0.75;
2. a fraction: ``"3/4"``, ``"3 out of 4"``, ``"3 of 4"`` -> 0.75;
3. a bare number: at most 1 reads as a fraction (``"0.75"``, ``"1"`` -> 1.0), above 1
   and up to 100 as a percentage (``"75"`` -> 0.75), above 100 is unreadable;
4. fraction words: ``"half"``, ``"a quarter"``, ``"three quarters"``; then number
   words as a percentage: ``"seventy five"`` -> 0.75 (``"one"`` -> 1.0);
5. ``"complete"``/``"done"``/``"finished"`` -> 1.0 unless negated (``"not done"``,
   ``"not yet complete"`` -> unreadable); ``"not started"``/``"no progress"`` -> 0.0.

Values are clamped to [0, 1] (``"120%"`` -> 1.0, ``"-5%"`` -> 0.0).
"""

from __future__ import annotations

import re

_NUM = r"[-+]?\d+(?:[.,]\d+)?"
_PERCENT = re.compile(rf"({_NUM})\s*(?:%|percent\b|per\s*cent\b|pct\b)")
_FRACTION = re.compile(rf"({_NUM})\s*(?:/|\bout\s+of\b|\bof\b)\s*({_NUM})")
_BARE = re.compile(rf"(?<![\w.]){_NUM}(?![\w])")

_UNIT_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve "
               "thirteen fourteen fifteen sixteen seventeen eighteen nineteen")
_UNITS = {w: i for i, w in enumerate(_UNIT_WORDS.split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate(
    ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"))}
_TENS_RE, _UNITS_RE = "|".join(_TENS), "|".join(_UNITS)
_DIGIT_RE = "|".join(u for u in _UNITS if _UNITS[u] < 10)
_NUMBER_WORDS = re.compile(
    rf"\b(?:(?:one\s+)?hundred|(?:{_TENS_RE})(?:[\s-]+(?:{_DIGIT_RE}))?|{_UNITS_RE})\b")
_WORD_FRACTIONS = [
    (re.compile(r"\bthree[\s-]+quarters?\b"), 0.75),
    (re.compile(r"\b(?:a|one)[\s-]+quarter\b|\bquarter\b"), 0.25),
    (re.compile(r"\b(?:a\s+)?third\b"), 1 / 3),
    (re.compile(r"\btwo[\s-]+thirds\b"), 2 / 3),
    (re.compile(r"\bhalf(?:way)?\b"), 0.5),
]
_NEGATED_DONE = re.compile(
    r"\b(?:not|isn'?t|hasn'?t|never|incomplete|unfinished)\b[\w\s']{0,12}"
    r"\b(?:complete|completed|done|finished|accomplished|achieved)\b|\bincomplete\b")
_DONE = re.compile(r"\b(?:complete|completed|done|finished|accomplished|achieved|full|fully|"
                   r"entirely|succeeded|success)\b")
_NOTHING = re.compile(r"\b(?:not\s+(?:yet\s+)?started|no\s+progress|nothing|none)\b")


def _number(text: str) -> float:
    return float(text.replace(",", "."))


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def _words_to_number(match: str) -> float:
    words = match.replace("-", " ").split()
    if words[-1] == "hundred":
        return 100.0
    return float(sum(_TENS.get(w, _UNITS.get(w, 0)) for w in words))


def parse_progress(answer: str) -> float | None:
    """Progress in [0, 1] from a free-text answer, or None if it has none (module docstring)."""
    text = " ".join(str(answer).lower().split())
    if m := _PERCENT.search(text):
        return _clamp(_number(m.group(1)) / 100.0)
    if m := _FRACTION.search(text):
        den = _number(m.group(2))
        if den > 0:
            return _clamp(_number(m.group(1)) / den)
    if m := _BARE.search(text):
        value = _number(m.group(0))
        if value <= 1.0:
            return _clamp(value)
        return value / 100.0 if value <= 100.0 else None
    for pattern, value in _WORD_FRACTIONS:
        if pattern.search(text):
            return value
    if m := _NUMBER_WORDS.search(text):
        value = _words_to_number(m.group(0))
        return value / 100.0 if value > 1 else value
    if _NEGATED_DONE.search(text):
        return None
    if _NOTHING.search(text):
        return 0.0
    if _DONE.search(text):
        return 1.0
    return None


_YES = re.compile(r"^\W*(?:yes|yeah|yep|true|correct|affirmative|y)\b")
_NO = re.compile(r"^\W*(?:no|nope|false|incorrect|negative|n)\b")


def parse_yes_no(answer: str) -> bool | None:
    """True for an answer starting with yes, False for no, None otherwise."""
    text = str(answer).strip().lower()
    if _YES.search(text):
        return True
    if _NO.search(text):
        return False
    return None


_FIRST = re.compile(r"\b(?:1|one|first|former|1st)\b|^\W*a\W*$")
_SECOND = re.compile(r"\b(?:2|two|second|latter|2nd)\b|^\W*b\W*$")
_TIE = re.compile(r"\b(?:0|zero|neither|equal|equally|same|tie|both|no\s+preference|"
                  r"can(?:no|')t\s+tell|unclear|unsure|undecided|not\s+sure)\b")


def parse_preference(answer: str) -> float | None:
    """Which of two observations shows more progress, as P(the first is preferred).

    1.0 for the first ("1", "Image 1", "the first"), 0.0 for the second, 0.5 for no
    preference ("0", "neither", "equal", "can't tell"); None if unreadable or if the
    answer names both without a tie word. Words like "image"/"set" are ignored.
    """
    text = " ".join(str(answer).lower().split())
    text = re.sub(r"\b(?:image|images|set|sets|observation|view|views|frame|frames|option|"
                  r"number|no\.)\s*", "", text)
    if _TIE.search(text):
        return 0.5
    first, second = _FIRST.search(text), _SECOND.search(text)
    if first and second:  # both named: the one mentioned first is the answer if it leads
        return 1.0 if first.start() < second.start() and first.start() == 0 else (
            0.0 if second.start() == 0 else None)
    if first:
        return 1.0
    if second:
        return 0.0
    return None


_ANSWER_SCORE = re.compile(r"answer\W{0,3}\s*([1-5])\b")
_LONE_SCORE = re.compile(r"(?<![\w.%+-])([1-5])(?!\.\d|\s*%|\w)")


def parse_score(answer: str) -> int | None:
    """RoboReward's discrete progress score 1-5: ``"ANSWER: 4"`` -> 4.

    Without an ``ANSWER:`` field, the first lone digit 1-5 that is not part of a larger
    number, a decimal or a percentage (``"score 3"`` -> 3; ``"30%"``, ``"2.5"`` -> None).
    """
    text = " ".join(str(answer).lower().split())
    m = _ANSWER_SCORE.search(text) or _LONE_SCORE.search(text)
    return int(m.group(1)) if m else None


_SCORE_TAG = re.compile(r"<score>\s*([-+]?\d+(?:\.\d+)?)\s*%?\s*</score>")
_SIGNED_PERCENT = re.compile(r"([-+]?\d+(?:\.\d+)?)\s*%")


def parse_hop(answer: str) -> float | None:
    """Robo-Dopamine's hop in [-1, 1]: ``"<score>+35%</score>"`` -> 0.35.

    The last ``<score>...</score>`` wins (as in the GRM's own evaluation code); without
    tags, the last signed percentage (``"-20%"`` -> -0.2). Values are clipped to
    [-100%, 100%].
    """
    text = str(answer).lower()
    found = _SCORE_TAG.findall(text) or _SIGNED_PERCENT.findall(text)
    if not found:
        return None
    return min(1.0, max(-1.0, float(found[-1]) / 100.0))


_STAGE = re.compile(r"stage\W{0,3}\s*(\d+)")
_PROGRESS_FIELD = re.compile(r"progress\W{0,3}\s*(.*)$")


def parse_stage_progress(answer: str, num_stages: int) -> tuple[int, float] | None:
    """A SARM-style ``"STAGE: 2 PROGRESS: 40%"`` -> (stage index from 0, 0.4).

    The stage is 1-based in the answer and must be in [1, num_stages]; the progress
    within the stage is read by ``parse_progress`` from the text after "progress"
    (missing: None for the whole answer).
    """
    text = " ".join(str(answer).lower().split())
    stage = _STAGE.search(text)
    if stage is None or not 1 <= int(stage.group(1)) <= num_stages:
        return None
    field = _PROGRESS_FIELD.search(text[stage.end():])
    within = parse_progress(field.group(1)) if field else None
    if within is None:
        return None
    return int(stage.group(1)) - 1, within


__all__ = ["parse_hop", "parse_preference", "parse_progress", "parse_score",
           "parse_stage_progress", "parse_yes_no"]
