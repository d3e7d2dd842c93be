"""`mrtr check` output: a table for people, JSON for scripts, SARIF for code scanning."""

from __future__ import annotations

import json
from collections import Counter

from mrtr.check._rules import RULES, Finding, Status, rule
from mrtr.check._run import Report

__all__ = ["as_json", "as_sarif", "as_table"]

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
        out.append(Finding(r.id, status, f"{counts}{over}; e.g. {example}"))
    return out


def as_table(report: Report, *, verbose: bool = False) -> str:
    """Readable lines; agreeing findings of a rule are folded unless `verbose`."""
    findings = report.findings if verbose else _grouped(report.findings)
    width = max(len(f.rule) for f in findings) if findings else 10
    lines = [f"mrtr check {report.target}"]
    for f in findings:
        subject = f" [{f.subject}]" if f.subject else ""
        lines.append(f"{_MARK[f.status]}  {f.rule:<{width}}{subject}  {f.detail}")
        if f.status == "fail":
            lines.append(f"      {'':<{width}}  fix: {rule(f.rule).fix}")
    counts: Counter[str] = Counter(f.status for f in report.findings)
    summary = ", ".join(f"{counts[s]} {s}" for s in _MARK if counts[s])
    lines.append(f"{summary}; {report.requests} requests sent")
    return "\n".join(lines)


def as_json(report: Report) -> str:
    return json.dumps({
        "target": report.target, "requests": report.requests, "failed": report.failed,
        "findings": [{"rule": f.rule, "status": f.status, "subject": f.subject,
                      "detail": f.detail} for f in report.findings],
    }, indent=2)


def as_sarif(report: Report) -> str:
    """SARIF 2.1.0: one run, the rule catalogue as the driver's rules, a result per finding."""
    rules = [{"id": r.id, "name": r.id, "shortDescription": {"text": r.title},
              "fullDescription": {"text": r.why}, "help": {"text": r.fix}}
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
