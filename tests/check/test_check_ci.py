"""The CI integration of `mrtr check`: the GitHub Action's script (scripts/mrtr-check-action.sh,
the one action.yml runs) run locally against mrtr's example server writes valid SARIF 2.1.0 and
JUnit XML and exits with the check's code; action.yml wires the script and the upload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema

from tests.check.defects import App
from tests.transports.conftest import LiveServer, free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mrtr-check-action.sh"
MRTR = f"{sys.executable} -m mrtr.cli"

# The parts of the SARIF 2.1.0 schema (sarif-schema-2.1.0.json, required properties and enums)
# that code scanning reads; the full schema is not shipped by any package this project uses.
_MESSAGE = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
SARIF_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"}, "$schema": {"type": "string", "format": "uri"},
        "runs": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["tool"],
            "properties": {
                "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
                    "type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string"}, "rules": {
                        "type": "array", "items": {
                            "type": "object", "required": ["id"],
                            "properties": {
                                "id": {"type": "string"},
                                "shortDescription": _MESSAGE, "fullDescription": _MESSAGE,
                                "help": _MESSAGE,
                                "defaultConfiguration": {"type": "object", "properties": {
                                    "level": {"enum": ["none", "note", "warning", "error"]}}},
                            }}}}}}},
                "results": {"type": "array", "items": {
                    "type": "object", "required": ["message"],
                    "properties": {
                        "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer",
                                                                    "minimum": 0},
                        "level": {"enum": ["none", "note", "warning", "error"]},
                        "message": _MESSAGE,
                        "locations": {"type": "array", "items": {"type": "object"}},
                    }}},
            }}},
    },
}


def action(tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "MRTR_CHECK_MRTR": MRTR,
            "MRTR_CHECK_PYTHON": sys.executable, "GITHUB_OUTPUT": str(tmp / "out"), **env}
    return subprocess.run(["bash", str(SCRIPT)], cwd=tmp, env=full, capture_output=True,
                          text=True, timeout=120, check=False)


def valid_sarif(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SARIF_SCHEMA)
    run = doc["runs"][0]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert ids[result["ruleIndex"]] == result["ruleId"]
    return doc


def test_the_action_script_checks_the_example_server_and_writes_sarif(tmp_path: Path) -> None:
    port = free_port()
    done = action(tmp_path, MRTR_CHECK_URL=f"http://127.0.0.1:{port}/mcp",
                  MRTR_CHECK_SERVER_COMMAND=f"{MRTR} serve examples.bookings:app --port {port}"
                                            " --store memory: --ephemeral-key",
                  MRTR_CHECK_JUNIT="report.xml")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out").read_text() == "exit-code=0\n"
    doc = valid_sarif(tmp_path / "mrtr-check.sarif")
    assert not [r for r in doc["runs"][0]["results"] if r["level"] == "error"]
    suites = ET.parse(tmp_path / "report.xml").getroot()
    assert suites.tag == "testsuites" and int(suites[0].get("tests", "0")) > 0
    assert not suites.findall(".//failure")
    with __import__("socket").socket() as probe:  # the server was stopped
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_the_action_script_exits_1_on_a_fail_and_4_without_a_server(tmp_path: Path) -> None:
    with LiveServer(App("unsigned")) as server:
        done = action(tmp_path, MRTR_CHECK_URL=server.url, MRTR_CHECK_JUNIT="j.xml")
    assert done.returncode == 1, done.stderr
    doc = valid_sarif(tmp_path / "mrtr-check.sarif")
    assert "sealed.integrity" in {r["ruleId"] for r in doc["runs"][0]["results"]
                                  if r["level"] == "error"}
    assert ET.parse(tmp_path / "j.xml").getroot().findall(".//failure")
    gone = action(tmp_path, MRTR_CHECK_URL=f"http://127.0.0.1:{free_port()}/mcp",
                  MRTR_CHECK_SERVER_COMMAND="exit 3", MRTR_CHECK_WAIT="5")
    assert gone.returncode == 4 and "exited" in gone.stderr


def test_action_yml_runs_the_script_and_uploads_sarif() -> None:
    text = (ROOT / "action.yml").read_text()
    assert 'bash "$GITHUB_ACTION_PATH/scripts/mrtr-check-action.sh"' in text
    assert "github/codeql-action/upload-sarif@" in text
    for name in ("MRTR_CHECK_URL", "MRTR_CHECK_SERVER_COMMAND", "MRTR_CHECK_ARGS",
                 "MRTR_CHECK_SARIF"):
        assert name in text and name in SCRIPT.read_text()
