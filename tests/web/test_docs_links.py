"""The README a newcomer reads first: its first screen holds the two commands, and every relative
link in README.md and docs/*.md leads to a file that exists (and, for ``#anchor``, to a heading
of that file, by GitHub's slug rules)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIRST_SCREEN_LINES = 40

# [text](target) or [text](target "title"); images too (the leading ! is not needed).
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)", re.MULTILINE)
HTML_LINK = re.compile(r"<(?:a|img)\s[^>]*?(?:href|src)=\"([^\"]+)\"", re.IGNORECASE)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """``text`` without code (a link-like string in a code sample is not a link)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than ``-``
    and ``_`` removed, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of ``path``; a repeated heading gets -1, -2… as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def relative_links(path: Path) -> list[str]:
    text = prose(path.read_text())
    links = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text) + HTML_LINK.findall(text)
    return [
        link
        for link in links
        if not re.match(r"^[a-z][a-z0-9+.-]*:", link, re.IGNORECASE)  # http:, mailto:…
        and not link.startswith("//")
    ]


def broken(path: Path, link: str, root: Path = ROOT) -> str | None:
    """Why ``link`` in ``path`` leads nowhere, or None (``path`` named relative to ``root``)."""
    target, _, anchor = link.partition("#")
    file = (path.parent / unquote(target)).resolve() if target else path
    if not file.exists():
        return f"{path.relative_to(root)}: {link}: no file {target}"
    if anchor and file.suffix == ".md" and unquote(anchor).lower() not in anchors(file):
        return f"{path.relative_to(root)}: {link}: no heading #{anchor} in {file.name}"
    return None


def test_the_first_screen_holds_the_two_commands():
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:FIRST_SCREEN_LINES])
    assert "make run" in first_screen
    assert "make test" in first_screen


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: path.name)
def test_every_relative_link_resolves(path):
    problems = [why for link in relative_links(path) if (why := broken(path, link))]
    assert not problems, "\n".join(problems)


def test_the_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path):
    """The check above can fail: a missing file and a missing heading are both reported."""
    (tmp_path / "other.md").write_text(
        "# Other page\n\n## Set-up, step 1 (`make run`)\n\n## Notes\n## Notes\n"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#set-up-step-1-make-run) [dup](other.md#notes-1) [self](#top)\n"
        "[gone](missing.md) [bad](other.md#nowhere) `[code](ignored.md)`\n# Top\n"
    )
    links = relative_links(page)
    assert "ignored.md" not in links
    problems = [why for link in links if (why := broken(page, link, tmp_path))]
    assert problems == [
        "page.md: missing.md: no file missing.md",
        "page.md: other.md#nowhere: no heading #nowhere in other.md",
    ]
