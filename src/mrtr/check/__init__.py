"""`mrtr check`: audit any MCP server (HTTP or stdio) for the 2026-07-28 stateless rules."""

from mrtr.check._profiles import names as profile_names
from mrtr.check._report import as_json, as_junit, as_sarif, as_table
from mrtr.check._rules import RULES, Finding, Rule
from mrtr.check._run import Options, Report, plan, run

__all__ = ["as_json", "as_junit", "as_sarif", "as_table", "Finding", "Options", "plan",
           "profile_names", "Report", "Rule", "RULES", "run"]
