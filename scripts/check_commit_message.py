#!/usr/bin/env python3
"""Commit-message hook: a subject of at most 72 characters, a blank line, then a body.

Usage (pre-commit's commit-msg stage passes the message file): ``check_commit_message.py
.git/COMMIT_EDITMSG``. Exits 1 with one line naming the problem; merge commits and
fixup!/squash! commits are let through.
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72


def problems(message: str) -> list[str]:
    """What is wrong with ``message`` (empty when it follows the convention)."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return ["the commit message is empty"]
    subject = lines[0]
    if subject.startswith(("Merge ", "fixup! ", "squash! ")):
        return []
    found = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"subject is {len(subject)} characters; at most {MAX_SUBJECT}")
    if len(lines) < 3 or lines[1].strip() or not any(line.strip() for line in lines[2:]):
        found.append("add a blank line after the subject and a body that says why")
    return found


def main(argv: list[str]) -> int:
    """Check the message file named by ``argv[1]``; 0 if it follows the convention."""
    if len(argv) != 2:
        print("usage: check_commit_message.py MESSAGE_FILE", file=sys.stderr)
        return 2
    try:
        found = problems(Path(argv[1]).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read the commit message file {argv[1]} ({exc.__class__.__name__}); "
              "pass the file git gives the commit-msg hook", file=sys.stderr)
        return 2
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
