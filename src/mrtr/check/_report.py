"""`mrtr check` output: a table for people, JSON for scripts, SARIF for code scanning and
JUnit XML for CI test reports."""

from __future__ import annotations

import json
from collections import Counter
from xml.sax.saxutils import escape, quoteattr

from mrtr.check._rules import RULES, Finding, Status, rule
from mrtr.check._run import Report

__all__ = ["as_json", "as_junit", "as_sarif", "as_table"]

_MARK = {"pass": "PASS", "fail": "FAIL", "warn": "WARN", "skip": "skip", "info": "info"}
_LEVEL = {"fail": "error", "warn": "warning", "info": "note"}


def _grouped(findings: list[Finding]) -> list[Finding]:
    """One line for a rule whose findings all agree (pass, skip, info); others stay apart."""
    out: list[Finding] = []
    for r in RULES:
        mine = [f for f in findings if f.rule == r.id]
        kinds = Counter(f.status for f in mine)
        if len(mine) < 2 or kinds["fail"] or kinds["warn"]:
            out += mine
            continue
        status: Status = "pass" if kinds["pass"] else "info" if kinds["info"] else "skip"
        first = next(f for f in mine if f.status == status)
        counts = ", ".join(f"{kinds[s]} {s}" for s in ("pass", "info", "skip") if kinds[s])
        tools = len({f.subject for f in mine if f.subject})
        over = f" over {tools} tool{'' if tools == 1 else 's'}" if tools else ""
        example = f"{first.subject}: {first.detail}" if first.subject else first.detail
        out.append(Finding(r.id, status, f"{counts}{over}; e.g. {example}" if example.strip()
                           else f"{counts}{over}"))
    return out


def as_table(report: Report, *, verbose: bool = False) -> str:
    """Readable lines; agreeing findings of a rule are folded unless `verbose`."""
    findings = report.findings if verbose else _grouped(report.findings)
    width = max(len(f.rule) for f in findings) if findings else 10
    lines = [f"mrtr check {report.target}"]
    for f in findings:
        subject = f" [{f.subject}]" if f.subject else ""
        lines.append(f"{_MARK[f.status]}  {f.rule:<{width}}{subject}  {f.detail}")
        if f.status in ("fail", "warn"):
            r = rule(f.rule)
            lines.append(f"      {'':<{width}}  fix: {r.fix}")
            lines.append(f"      {'':<{width}}  {r.level}: {r.cite}")
    counts: Counter[str] = Counter(f.status for f in report.findings)
    summary = ", ".join(f"{counts[s]} {s}" for s in _MARK if counts[s])
    lines.append(f"{summary}; {report.requests} requests sent in {report.seconds:g} s")
    return "\n".join(lines)


def as_json(report: Report) -> str:
    return json.dumps({
        "target": report.target, "requests": report.requests, "failed": report.failed,
        "unreachable": report.unreachable, "exit_code": report.exit_code(),
        "findings": [{"rule": f.rule, "status": f.status, "subject": f.subject,
                      "detail": f.detail, "level": rule(f.rule).level}
                     for f in report.findings],
    }, indent=2)


def as_sarif(report: Report) -> str:
    """SARIF 2.1.0: one run, the rule catalogue as the driver's rules, a result per finding."""
    rules = [{"id": r.id, "name": r.id, "shortDescription": {"text": r.title},
              "fullDescription": {"text": r.why}, "help": {"text": f"{r.fix} ({r.cite})"},
              "defaultConfiguration": {"level": "error" if r.level == "MUST" else "warning"
                                       if r.level != "INFO" else "note"},
              "properties": {"level": r.level, "spec": r.cite}}
             for r in RULES]
    index = {r.id: i for i, r in enumerate(RULES)}
    results = [{"ruleId": f.rule, "ruleIndex": index[f.rule], "level": _LEVEL[f.status],
                "message": {"text": f"{f.subject}: {f.detail}" if f.subject else f.detail},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": report.target}}}]}
               for f in report.findings if f.status in _LEVEL]
    return json.dumps({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "mrtr check", "rules": rules}},
                  "results": results}],
    }, indent=2)


def as_junit(report: Report) -> str:
    """JUnit XML: a test suite per rule group, a test case per finding; FAIL is a failure,
    skip is skipped, WARN passes with its text in system-out (CI shows it, the build goes on)."""
    groups: dict[str, list[Finding]] = {}
    for f in report.findings:
        groups.setdefault(f.rule.split(".")[0], []).append(f)
    suites = []
    for group, found in groups.items():
        cases = []
        for f in found:
            name = quoteattr(f"{f.rule} [{f.subject}]" if f.subject else f.rule)
            text = escape(f"{f.status.upper()}: {f.detail}")
            inner = ""
            if f.status == "fail":
                inner = (f"<failure message={quoteattr(f.detail)} type={quoteattr(f.rule)}>"
                         f"{escape(rule(f.rule).cite)}</failure>")
            elif f.status == "skip":
                inner = f"<skipped message={quoteattr(f.detail)}/>"
            cases.append(f'    <testcase classname="mrtr.check.{group}" name={name}>{inner}'
                         f"<system-out>{text}</system-out></testcase>")
        fails = sum(f.status == "fail" for f in found)
        skips = sum(f.status == "skip" for f in found)
        suites.append(f'  <testsuite name="mrtr check {group}" tests="{len(found)}" '
                      f'failures="{fails}" errors="0" skipped="{skips}">\n'
                      + "\n".join(cases) + "\n  </testsuite>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<testsuites name={quoteattr('mrtr check ' + report.target)}>\n"
            + "\n".join(suites) + "\n</testsuites>")
