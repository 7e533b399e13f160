"""Requirement units judged from the image config alone (imagekit/requirements): one check
each, made here from the registry, so a new unit needs no code in the suite."""

from __future__ import annotations

import pytest

from imagekit.checks import check
from imagekit.checks.facts import expect_judgement, image_env
from imagekit.requirements import EnvRequirement, env_units


def _check_of(unit: type[EnvRequirement]):
    @check(unit.check_id, unit.requirement, unit.title, fix=unit.fix, varies=unit.profiles)
    def judged(ctx, note):
        skip = unit.skip_reason(ctx.profile)
        if skip:
            pytest.skip(skip)
        expect_judgement(unit.judge(image_env(ctx), ctx.profile), note)

    judged.__name__ = f"check_{unit.check_id.replace('-', '_')}"
    judged.__doc__ = unit.__doc__
    return judged


# pytest collects module-level functions named check_*: one per unit.
for _unit in env_units():
    _judged = _check_of(_unit)
    globals()[_judged.__name__] = _judged
