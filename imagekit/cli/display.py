"""How results look on a terminal: rich renderables and markup lines built from result data.
Nothing here prints; cli.main (the only module that prints) hands these to its consoles."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from imagekit.cli.console import escape

if TYPE_CHECKING:  # rich.table costs start-up time; only check and smoke draw tables
    from rich.table import Table

STATUS_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "info": "cyan",
    "skip": "dim",
    "fail": "bold red",
}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def verdict(passed: bool) -> str:
    return "[green]PASSED[/]" if passed else "[bold red]FAILED[/]"


def plan_lines(plan) -> list[str]:
    base = f"  base   {plan.base_image}" + (" (bootstrapped locally)" if plan.bootstrap else "")
    lines = [f"[bold]plan[/] {plan.name}: {', '.join(plan.tags)}", escape(base)]
    lines += [f"  {key:<10} {escape(value)}" for key, value in plan.expected.items()]
    lines.append(f"  stages {', '.join('pip-' + s.stage for s in plan.pip_steps)}")
    return lines


def build_lines(result) -> list[str]:
    lines = [f"[green]built[/] {result.image_id}"]
    lines += [f"  tag   {escape(tag)}" for tag in result.tags]
    lines.append(f"  size  {result.size / 1e9:.2f} GB   time {result.seconds:.0f}s")
    if result.plan.locked:
        lines.append("  lock  every apt and pip package pinned")
    n = result.normalized
    if n is not None:
        detail = (
            "reused"
            if n.reused
            else f"{n.bytes / 1e9:.2f} GB rewritten, {n.clamped} mtimes clamped, {n.seconds:.0f}s"
        )
        lines.append(f"  normalized from {n.source_id[:19]} ({detail})")
    return lines


def adapt_lines(result) -> list[str]:
    plan = result.plan
    if result.tag is None:
        return [
            f"[green]nothing to add[/]: {escape(plan.image)} already has what profile "
            f"{plan.profile} needs; nothing built"
        ]
    return [
        f"[green]adapted[/] {escape(plan.image)} -> {escape(result.tag)}",
        f"  added {len(plan.fixes)} fixes in one layer: {result.added_bytes / 1e6:.1f} MB, "
        f"{result.seconds:.0f}s",
    ]


def lock_lines(result) -> list[str]:
    lock = result.lock
    if not result.written:
        return [f"[green]up to date[/] {escape(str(result.path))} (--upgrade re-resolves)"]
    apt, pip = lock.counts
    lines = [f"[green]wrote[/] {escape(str(result.path))}: {apt} apt, {pip} pip packages pinned"]
    if not result.changes:
        lines.append("  no changes")
    for what, old, new in result.changes:
        if old is None:
            lines.append(f"  [green]+[/] {escape(what)} {escape(new)}")
        elif new is None:
            lines.append(f"  [red]-[/] {escape(what)} {escape(old)}")
        else:
            lines.append(f"  [yellow]~[/] {escape(what)} {escape(old)} -> {escape(new)}")
    return lines


def check_table(report) -> tuple[Table, str]:
    from rich.table import Table

    table = Table(
        title=f"imagekit check {escape(report.image)} (profile {escape(report.profile)})",
        title_justify="left",
    )
    for column in ("check", "req", "status", "evidence / fix"):
        table.add_column(column, overflow="fold")
    for r in report.results:
        detail = escape(r.evidence)
        if r.fix:
            detail += f"\n[bold]fix:[/] {escape(r.fix)}"
        table.add_row(
            r.id, r.requirement, f"[{STATUS_STYLE.get(r.status, '')}]{r.status}[/]", detail
        )
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.counts().items()))
    summary = (
        f"{verdict(report.passed)} {counts} in {report.seconds:.1f}s "
        f"(expected versions: {escape(report.expected_source or 'none declared')})"
    )
    return table, summary


def smoke_table(result) -> tuple[Table | None, list[str]]:
    from rich.table import Table

    top = result.topology
    table = None
    if result.ranks:
        table = Table(title=f"ranks (hosts are {top.job}-...)", title_justify="left")
        for column in ("rank", "host", "local rank", "world size", "allreduce", "expected host"):
            table.add_column(column)
        for r in result.ranks:
            want = top.expected_host(r.rank)
            style = "green" if r.host == want else "red"
            table.add_row(
                str(r.rank),
                f"[{style}]{escape(r.host.removeprefix(top.job + '-'))}[/]",
                str(r.local_rank),
                str(r.size),
                str(r.allreduce),
                want.removeprefix(top.job + "-"),
            )
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
    lines = [f"{verdict(result.passed)} {len(top.workers)} workers x {top.slots} slots; {timings}"]
    if result.pml:
        chosen = sorted(set(result.pml.values()))
        lines.append(f"  PML selected by {len(result.pml)} ranks: {', '.join(chosen)} (F1)")
    lines += [f"  [red]-[/] {escape(problem)}" for problem in result.problems]
    return table, lines


def lint_lines(findings) -> list[str]:
    if not findings:
        return ["[green]ok[/] no problems found"]
    lines = []
    for f in findings:
        lines.append(
            f"[{SEVERITY_STYLE[f.severity]}]{f.severity:<7}[/] {f.lid:<4} {escape(f.message)}"
        )
        lines.append(f"             fix: {escape(f.fix)}")
    return lines


def diff_lines(result, limit: int = 200) -> list[str]:
    if result.same:
        return [f"[green]no differences[/] between {escape(result.a)} and {escape(result.b)}"]
    lines = []
    for section, changes in result.sections().items():
        lines.append(f"[bold]{section}[/] ({len(changes)} changed)")
        lines += ["  " + escape(change_line(section, c)) for c in changes[:limit]]
        if len(changes) > limit:
            lines.append(f"  ... and {len(changes) - limit} more (--format json for all)")
    return lines


def change_line(section: str, change) -> str:
    if section == "files":
        return file_change_line(change)

    def show(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    if change.before is None:
        return f"+ {change.key}: {show(change.after)}"
    if change.after is None:
        return f"- {change.key}: {show(change.before)}"
    return f"~ {change.key}: {show(change.before)} -> {show(change.after)}"


def file_change_line(change) -> str:
    """`~ run/sshd: mode 0755 -> 0777`, `+ opt/x: file 12 bytes`, `> a -> b (moved)`."""
    if change.what == "moved":
        return f"> {change.before['path']} -> {change.key} (moved)"
    if change.what == "added":
        return f"+ {change.key}: {_entry_words(change.after)}"
    if change.what == "removed":
        return f"- {change.key}: {_entry_words(change.before)}"
    parts = []
    for key, before in change.before.items():
        after = change.after[key]
        if key == "sha256":
            parts.append("content")
        else:
            parts.append(f"{key} {_short(before)} -> {_short(after)}")
    return f"~ {change.key}: " + ", ".join(parts)


def _entry_words(props: dict) -> str:
    words = [props.get("kind", "?")]
    if props.get("link"):
        words.append(f"-> {props['link']}")
    if props.get("kind") == "file":
        words.append(f"{props.get('size', 0)} bytes")
    words.append(f"mode {props.get('mode')}")
    return " ".join(str(w) for w in words)


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return json.dumps(value) if value else "{}"
    return "none" if value is None else str(value)


def cache_line(verb: str, cache: Any) -> str:
    """`removed cache layers: 1,234 files, 56.7 MB (/root/.cache/imagekit/layers)`."""
    size = f"{cache.size / 1e6:.1f} MB"
    return f"{verb} cache {cache.name}: {cache.files:,} files, {size} ({escape(str(cache.path))})"
