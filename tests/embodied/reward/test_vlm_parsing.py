"""Reading VLM answers: progress, yes/no and preferences from real answer strings."""

from __future__ import annotations

import random

import pytest

from embodied.reward.vlm.parsing import parse_preference, parse_progress, parse_yes_no


@pytest.mark.parametrize(("answer", "expected"), [
    ("75%", 0.75),
    ("Progress: 40 %", 0.4),
    ("About 75 percent of the task is done.", 0.75),
    ("The task is roughly 3/4 complete", 0.75),
    ("2 out of 5 steps are done", 0.4),
    ("Step 2 of 5: 40%", 0.4),  # a percentage wins over an earlier fraction
    ("0.75", 0.75),
    ("0,5", 0.5),
    ("1", 1.0),
    ("60", 0.6),
    ("seventy-five percent", 0.75),
    ("ninety", 0.9),
    ("one hundred percent", 1.0),
    ("halfway there", 0.5),
    ("three quarters of the way", 0.75),
    ("about a quarter", 0.25),
    ("The task is complete.", 1.0),
    ("Done!", 1.0),
    ("The robot has not started yet", 0.0),
    ("no progress", 0.0),
    ("120%", 1.0),  # clamped
    ("-5%", 0.0),
])
def test_parse_progress_reads_numbers_fractions_and_words(answer, expected):
    assert parse_progress(answer) == pytest.approx(expected)


@pytest.mark.parametrize("answer", [
    "", "   ", "banana", "I cannot see the robot", "The task is not yet complete",
    "It isn't done", "150", "\ufffd\ufffdEBac", "<|im_end|>",
])
def test_parse_progress_returns_none_for_unreadable_answers(answer):
    assert parse_progress(answer) is None


def test_parsers_never_raise_on_arbitrary_text():
    rng = random.Random(0)
    alphabet = "0123456789%/.,- abcdefghijklmnopqrstuvwxyz\n\t\ufffd\u00e9\u4e2d"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        value = parse_progress(text)
        assert value is None or 0.0 <= value <= 1.0
        assert parse_yes_no(text) in (True, False, None)
        assert parse_preference(text) in (0.0, 0.5, 1.0, None)


@pytest.mark.parametrize(("answer", "expected"), [
    ("Yes", True), ("yes, it is", True), (" Yes.", True), ("No", False), ("no.", False),
    ("Nope", False), ("maybe", None), ("", None), ("The answer is yes", None),
])
def test_parse_yes_no(answer, expected):
    assert parse_yes_no(answer) is expected


@pytest.mark.parametrize(("answer", "expected"), [
    ("1", 1.0), ("Image 1", 1.0), ("The first one", 1.0), ("A", 1.0),
    ("2", 0.0), ("Image 2.", 0.0), ("second", 0.0), ("B", 0.0),
    ("Image 1 shows more progress than image 2", 1.0),
    ("2. Image 2 is closer to the goal than image 1", 0.0),
    ("0", 0.5), ("Neither", 0.5), ("They look the same", 0.5), ("I can't tell", 0.5),
    ("no preference", 0.5),
    ("???", None), ("a robot arm", None), ("", None),
    ("In image 2 the arm moved, in image 1 it did not", None),  # names both, no lead
])
def test_parse_preference(answer, expected):
    assert parse_preference(answer) == expected
