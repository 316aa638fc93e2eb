"""Every link in the README and docs/ leads somewhere: a file of the repository, and a heading in it."""

from __future__ import annotations

import os
import re

from conftest import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^a-z0-9 _\-]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: str) -> set[str]:
    text = open(path, encoding="utf-8").read()
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def documents() -> list[str]:
    docs = os.path.join(ROOT, "docs")
    return [os.path.join(ROOT, "README.md")] + [
        os.path.join(docs, n) for n in sorted(os.listdir(docs)) if n.endswith(".md")
    ]


def test_every_link_resolves():
    broken = []
    for path in documents():
        text = open(path, encoding="utf-8").read()
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # a URL: not checked offline
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                broken.append(f"{os.path.relpath(path, ROOT)}: {target} (no such file)")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                broken.append(f"{os.path.relpath(path, ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_landing_page():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert readme.count("\n") <= 250
    # every page of docs/ is in its index
    for path in documents()[1:]:
        assert f"](docs/{os.path.basename(path)})" in readme, path
