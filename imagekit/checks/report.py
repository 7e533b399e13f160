"""Check results and their reports: a table for the terminal (the command line prints it), and
JSON (versioned), JUnit XML or Markdown files written atomically."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

from imagekit.errors import UsageError
from imagekit.files import check_writable, write_text_atomic

REPORT_SCHEMA = "imagekit.check-report/v1"
FAILING = {"fail"}


@dataclass(frozen=True)
class CheckResult:
    id: str
    requirement: str
    title: str
    status: str  # pass | warn | info | skip | fail
    evidence: str = ""
    fix: str = ""
    seconds: float = 0.0
    order: tuple = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class CheckReport:
    image: str
    image_id: str
    profile: str
    expected_source: str
    results: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return bool(self.results) and not any(r.status in FAILING for r in self.results)

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts

    def failed_requirements(self) -> set[str]:
        return {r.requirement for r in self.results if r.status in FAILING}


def to_json(report: CheckReport) -> str:
    body = {"schema": REPORT_SCHEMA, "passed": report.passed, **asdict(report)}
    for result in body["results"]:
        result.pop("order", None)
    return json.dumps(body, indent=2) + "\n"


def to_junit(report: CheckReport) -> str:
    counts = report.counts()
    suite = ET.Element(
        "testsuite",
        name=f"imagekit check {report.image}",
        tests=str(len(report.results)),
        failures=str(counts.get("fail", 0)),
        skipped=str(counts.get("skip", 0)),
        time=f"{report.seconds:.3f}",
    )
    for r in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{report.profile}.{r.requirement}",
            name=r.id,
            time=f"{r.seconds:.3f}",
        )
        if r.status == "fail":
            ET.SubElement(case, "failure", message=r.evidence).text = f"fix: {r.fix}"
        elif r.status == "skip":
            ET.SubElement(case, "skipped", message=r.evidence)
        elif r.evidence:
            ET.SubElement(case, "system-out").text = f"{r.status}: {r.evidence}"
    return ET.tostring(suite, encoding="unicode") + "\n"


def to_markdown(report: CheckReport) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    lines = [
        f"## imagekit check: {report.image} — {verdict}",
        "",
        f"Profile `{report.profile}`; expected versions from "
        f"{report.expected_source or 'nowhere (reported, not asserted)'}.",
        "",
        "| check | req | status | evidence | fix |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in report.results:
        cells = [r.id, r.requirement, r.status, r.evidence, r.fix]
        lines.append(
            "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
        )
    return "\n".join(lines) + "\n"


FORMATS = {"json": to_json, "junit": to_junit, "markdown": to_markdown}


SUFFIXES = {".json": "json", ".xml": "junit", ".md": "markdown", ".markdown": "markdown"}


def report_format(path: Path, default: str | None) -> str:
    """`--format` when given, else the format the file's suffix names; checked before the
    check runs, with the report's directory (a file in its way fails now, not after it)."""
    check_writable(path)
    if default is not None:
        return default
    found = SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise UsageError(
            f"--report {path}: cannot tell the format from the suffix; use .json, .xml "
            "(JUnit) or .md, or give --format"
        )
    return found


def write_report(report: CheckReport, path: Path, fmt: str) -> Path:
    return write_text_atomic(path, FORMATS[fmt](report))
