"""The profile's own probes (profiles.yaml `probes:`): checks written as data, run by the
same runner and reported under their own IDs, requirements and fixes."""

from __future__ import annotations

import re
import shlex

from imagekit.checks import check
from imagekit.checks.facts import expect


def pytest_generate_tests(metafunc):
    if "probe" in metafunc.fixturenames:
        probes = metafunc.config.imagekit_context.profile.probes
        metafunc.parametrize("probe", probes, ids=[p.id for p in probes])


@check(
    "probe",
    "PROFILE",
    "a probe the profile defines",
    fix="see the probe's own fix",
    varies="each of the profile's `probes:`, under its own ID",
)
def check_profile_probe(request, host, probe):
    if probe.tcp is not None:
        request.getfixturevalue("sshd")  # ports are probed with the image's sshd running
        port = probe.tcp
        r = host.run(f"timeout 5 bash -c {shlex.quote(f'exec 3<>/dev/tcp/127.0.0.1/{port}')}")
        expect(r.rc == 0, f"nothing listens on TCP port {port}")
        return
    r = host.run(f"timeout 60 bash -c {shlex.quote(probe.exec)}")
    output = (r.stdout + r.stderr).strip()
    expect(
        r.rc == probe.exit_code,
        f"`{probe.exec}` exited {r.rc}, the profile expects {probe.exit_code}: {output[-300:]}",
    )
    if probe.output is not None:
        expect(
            re.search(probe.output, output) is not None,
            f"`{probe.exec}` printed {output[-300:]!r}, which does not match {probe.output!r}",
        )
