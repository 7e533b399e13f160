"""Compliance checks of any image against a platform profile (R1-R12 and security)."""

from __future__ import annotations


def check(id: str, req: str, title: str, fix: str = ""):  # noqa: A002 - the check's ID
    """Mark a check function with its ID, the requirement it proves, and the fix to print."""
    import pytest  # loaded with the suite (checks/collector.py), not with every import of this

    return pytest.mark.imagekit(id=id, req=req, title=title, fix=fix)
