"""The commit-message hook enforces a short subject, a blank line and a body."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[1] / "scripts" / "check_commit_message.py"


def run_hook(tmp_path: Path, message: str) -> subprocess.CompletedProcess:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message)
    return subprocess.run([sys.executable, str(HOOK), str(path)], capture_output=True,
                          text=True, check=False)


@pytest.mark.parametrize("message", [
    "Ship configs inside the package\n\nSo a wheel install finds them.\n",
    "Merge branch 'docs'\n",
    "Subject\n\nBody.\n# Please enter the commit message\n",
])
def test_accepts_conventional_messages(tmp_path: Path, message: str) -> None:
    assert run_hook(tmp_path, message).returncode == 0


@pytest.mark.parametrize(("message", "problem"), [
    ("x" * 73 + "\n\nBody.\n", "subject is 73 characters"),
    ("A subject without a body\n", "body that says why"),
    ("Subject\nno blank line before the body\n", "body that says why"),
    ("\n", "empty"),
])
def test_refuses_with_one_line_naming_the_problem(tmp_path: Path, message: str,
                                                  problem: str) -> None:
    result = run_hook(tmp_path, message)
    assert result.returncode == 1
    assert problem in result.stderr
    assert result.stderr.count("\n") <= 2


def test_a_missing_message_file_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(HOOK), str(tmp_path / "nothing")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "cannot read the commit message file" in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
