"""Requirement units (imagekit/requirements) the suite judges without code of their own: one
check each, made here from the registry, so a new unit needs nothing in the suite. Units of
the image config judge its ENV; probed units judge what their probe script printed, each
probe run once (one exec) for all the units that read it, its facts joined by the image
config's architecture (CONFIG_ARCH_FACT), which no container can see."""

from __future__ import annotations

import pytest

from imagekit.checks import check
from imagekit.checks.facts import expect_judgement, image_env
from imagekit.checks.runner import parse_probe_output
from imagekit.datafiles import data_text
from imagekit.requirements import REGISTRY, EnvRequirement, ProbedRequirement, Requirement
from imagekit.requirements.platform import CONFIG_ARCH_FACT


def _probed(ctx, unit: type[ProbedRequirement]) -> dict[str, str]:
    args = unit.probe_args(ctx.labels)
    key = ("probe", unit.probe, args)
    if key not in ctx.shared:
        script = data_text(unit.probe)
        code, out = ctx.container.read(["/bin/sh", "-c", script, "sh", *args])
        facts = parse_probe_output(out if code == 0 else "")
        if "end" not in facts:
            pytest.fail(f"{unit.probe} did not run in the image (exit {code}): {out[-300:]}")
        facts = {k: v for k, v in facts.items() if isinstance(v, str)}
        ctx.shared[key] = {**facts, CONFIG_ARCH_FACT: ctx.architecture}
    return ctx.shared[key]


def _judged(ctx, unit: type[Requirement]):
    if issubclass(unit, EnvRequirement):
        skip = unit.skip_reason(ctx.profile)
        return None if skip else unit.judge(image_env(ctx), ctx.profile), skip
    judgement = unit.judge(_probed(ctx, unit), ctx.labels, ctx.profile)
    return judgement, (judgement.evidence if judgement.status == "skip" else None)


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
