"""Requirement units (imagekit/requirements) the suite judges without code of their own: one
check each, made here from the registry, so a new unit needs nothing in the suite. Units of
the image config judge its ENV; probed units judge what their probe script printed, each
probe run once for all the units that read it (one exec, which the runner starts before the
first check, its answer kept by image ID where it is the image's alone), its facts joined by
the image config's architecture (CONFIG_ARCH_FACT), which no container can see."""

from __future__ import annotations

from dataclasses import replace

import pytest

from imagekit.checks import check
from imagekit.checks.facts import expect_judgement, image_env
from imagekit.checks.probecache import provenance
from imagekit.requirements import REGISTRY, EnvRequirement, ProbedRequirement, Requirement
from imagekit.requirements.platform import CONFIG_ARCH_FACT


def _probed(ctx, unit: type[ProbedRequirement]) -> dict[str, str]:
    """The unit's probe's facts (prefetched by the runner, or read now), with the config's
    architecture, which no container can see."""
    facts = ctx.unit_facts(unit)
    if "error" in facts:
        pytest.fail(f"{unit.probe} did not run in the image ({facts['error']})")
    return {**facts, CONFIG_ARCH_FACT: ctx.architecture}


def _judged(ctx, unit: type[Requirement]):
    skip = unit.skip_reason(ctx.profile, ctx.labels)
    if skip:  # nothing to read: no probe runs
        return None, skip
    if issubclass(unit, EnvRequirement):
        return unit.judge(image_env(ctx), ctx.profile), None
    facts = _probed(ctx, unit)
    judgement = unit.judge(facts, ctx.labels, ctx.profile)
    if judgement.status == "skip":
        return judgement, judgement.evidence
    return replace(judgement, evidence=judgement.evidence + provenance(facts)), None


def _check_of(unit: type[Requirement]):
    @check(unit.check_id, unit.requirement, unit.title, fix=unit.fix, varies=unit.profiles)
    def judged(ctx, note):
        judgement, skip = _judged(ctx, unit)
        if skip:
            pytest.skip(skip)
        expect_judgement(judgement, note)
        if judgement.passed:  # what was judged, in the report (the fabric's facts)
            note("info", judgement.evidence)

    judged.__name__ = f"check_{unit.check_id.replace('-', '_')}"
    judged.__doc__ = unit.__doc__
    return judged


# pytest collects module-level functions named check_*: one per unit.
for _unit in REGISTRY:
    if issubclass(_unit, EnvRequirement | ProbedRequirement):
        _judged_check = _check_of(_unit)
        globals()[_judged_check.__name__] = _judged_check
