"""MkDocs hooks: the reference tables are generated from the code while the site builds
(imagekit/cli/reference.py), so no page holds a hand copy that could drift."""

from __future__ import annotations

import re

from imagekit.cli.reference import TABLES

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")


def on_page_markdown(markdown, page, config, files):
    def table(match: re.Match) -> str:
        name = match[1]
        if name not in TABLES:
            raise ValueError(f"{page.file.src_path}: no generated table named {name!r}")
        return TABLES[name]()

    return MARKER.sub(table, markdown)
