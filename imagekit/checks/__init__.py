"""Compliance checks of any image against a platform profile (R1-R12 and security)."""

from __future__ import annotations

from imagekit.requirements.base import SAME_EVERYWHERE


def check(id: str, req: str, title: str, fix: str = "", varies: str = SAME_EVERYWHERE):  # noqa: A002
    """Mark a check function with its ID, the requirement it proves, the fix to print, and
    how profiles change it (`varies`, for the reference `imagekit requirements` prints)."""
    import pytest  # loaded with the suite (checks/collector.py), not with every import of this

    return pytest.mark.imagekit(id=id, req=req, title=title, fix=fix, varies=varies)
