"""The documentation: generated benchmark page up to date, every relative link resolves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def relative_links(path: Path) -> list[str]:
    """The link targets of a markdown file that point into the repository."""
    text = CODE_SPAN.sub("", FENCE.sub("", path.read_text()))
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def anchors(path: Path) -> set[str]:
    """The heading anchors of a markdown file, as GitHub derives them."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


def test_benchmarks_page_matches_results():
    """docs/benchmarks.md is what bench/report.py generates from bench/results/*.json."""
    result = subprocess.run([sys.executable, "bench/report.py", "--check"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path):
    """Every relative link of README.md, CHANGELOG.md and docs/**/*.md names an existing file
    (and, with a #fragment into markdown, an existing heading)."""
    assert doc.exists(), f"{doc.relative_to(ROOT)} is missing"
    broken = []
    for target in relative_links(doc):
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or (anchor and path.suffix == ".md"
                                 and anchor not in anchors(path)):
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: links to missing files or headings: {broken}"
