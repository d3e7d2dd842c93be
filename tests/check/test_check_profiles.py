"""`mrtr check --client-profile NAME`: every shipped profile breaks a fixture server built to
break on it, and passes on one that does not; the profiles are data (profiles.toml) in the
package."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mrtr.check import Options, Report, profile_names, run
from mrtr.check._profiles import load
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from tests.check.defects import App
from tests.transports.conftest import LiveServer

ROOT = Path(__file__).resolve().parents[2]
MRTR_STDIO = f"{sys.executable} -m mrtr.cli serve examples.bookings:app --stdio"
DEFECTS_STDIO = f"{sys.executable} -m tests.check.defects --stdio"


def check(options: Options) -> Report:
    return asyncio.run(asyncio.wait_for(run(options), 120))


@contextmanager
def http(app: object, path: str = "") -> Iterator[str]:
    with LiveServer(app) as server:
        yield server.url + path


def mrtr_http() -> object:
    from examples.bookings import app
    return McpApp(Dispatcher(app))


# profile -> (breaking server, good server); a server is ("http", app factory, path) or
# ("stdio", command)
CASES = {
    "discover-then-initialize": (("http", App, ""), ("http", mrtr_http, "/mcp")),
    "no-probe": (("http", lambda: App("needs-probe"), ""), ("http", App, "")),
    "stdio-2025-default": (("stdio", DEFECTS_STDIO), ("stdio", MRTR_STDIO)),
    "capability-not-rendered": (("http", lambda: App("cancel-crash"), ""), ("http", App, "")),
    "strict-accept": (("http", lambda: App("strict-accept"), ""), ("http", App, "")),
}


def test_every_profile_is_a_valid_data_file_with_evidence() -> None:
    assert set(profile_names()) == set(CASES)
    for name in profile_names():
        profile = load(name)
        assert profile.name == name and profile.summary
        assert profile.evidence and all({"client", "version", "behaviour", "source"} <= set(e)
                                        for e in profile.evidence)


def verdict(server: tuple[object, ...], name: str) -> str:
    kind = server[0]
    if kind == "stdio":
        report = check(Options(str(server[1]), stdio=True, profiles=[name],
                               only=["client-profile"], allow_tools=["ask"]))
    else:
        factory, path = server[1], server[2]
        with http(factory(), str(path)) as url:  # type: ignore[operator]
            report = check(Options(url, profiles=[name], only=["client-profile"],
                                   allow_tools=["ask"]))
    found = [f for f in report.findings if f.rule == "client-profile" and f.subject == name]
    assert len(found) == 1, report.findings
    return found[0].status


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_profile_breaks_its_fixture_and_passes_a_good_server(name: str) -> None:
    breaking, good = CASES[name]
    assert verdict(breaking, name) == "warn"  # ADVICE level: a break is a WARN
    assert verdict(good, name) == "pass"


@pytest.mark.slow
def test_the_profiles_ship_in_the_wheel(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT),
                            "-w", str(tmp_path)], capture_output=True, text=True, timeout=300,
                           check=False)
    if built.returncode != 0:
        pytest.skip(f"cannot build the wheel here: {built.stderr.strip()[-200:]}")
    (wheel,) = tmp_path.glob("mrtr-*.whl")
    assert "mrtr/check/profiles.toml" in zipfile.ZipFile(wheel).namelist()
