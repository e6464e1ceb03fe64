"""docs/how-to-add.md stays true where a test can tell: every repository path it names in
backticks exists, every `make` target it names is one, its links lead to pages that exist,
and docs/ARCHITECTURE.md links to it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "how-to-add.md"
SUFFIXES = (".py", ".yaml", ".md", ".tpl", ".json")


def _spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", PAGE.read_text())


def _paths() -> list[str]:
    """The words of backticked spans that look like repository paths (a '/' or a file suffix)."""
    found = []
    for span in _spans():
        for word in span.split():
            word = word.strip(",;:()")
            if ("/" in word or word.endswith(SUFFIXES)) and not word.startswith(("-", "@", "<")):
                found.append(word)
    return sorted(set(found))


def _make_targets() -> set[str]:
    """Every target that Makefile and mk/*.mk define or declare phony (variables left out)."""
    targets: set[str] = set()
    for mk in [REPO / "Makefile", *sorted((REPO / "mk").glob("*.mk"))]:
        for line in mk.read_text().splitlines():
            if line.startswith(".PHONY:"):
                targets.update(line.removeprefix(".PHONY:").split())
                continue
            rule = re.match(r"^([A-Za-z0-9_.%/ -]+?)\s*&?::?(?!=)", line)
            if rule and not line.startswith(("\t", "#")):
                targets.update(rule.group(1).split())
    return targets - {"\\"}  # a continued line's backslash


def _named_targets() -> list[str]:
    return sorted({m for span in _spans() for m in re.findall(r"\bmake ([A-Za-z0-9_.-]+)", span)})


def test_the_page_names_paths_and_targets():
    assert len(_paths()) > 40 and len(_named_targets()) >= 5


@pytest.mark.parametrize("path", _paths())
def test_every_path_exists(path):
    assert (REPO / path).exists(), f"docs/how-to-add.md names `{path}`, which is not in the repository"


@pytest.mark.parametrize("target", _named_targets())
def test_every_make_target_exists(target):
    assert target in _make_targets(), f"docs/how-to-add.md names `make {target}`: no such target"


def test_links_lead_to_pages_that_exist():
    for link in re.findall(r"\]\(([^)#]+)\)", PAGE.read_text()):
        if "://" not in link:
            assert (PAGE.parent / link).exists(), link


def test_architecture_links_to_the_page():
    assert "(how-to-add.md)" in (REPO / "docs" / "ARCHITECTURE.md").read_text()
