"""Consent through the model (#29): confirmation tokens for clients that cannot render a form.

TestClient drives the Dispatcher in process; `capabilities={}` is a client that declares no
elicitation (claude.ai). The model's side is the test: it reads the token from the result and
calls again with `_confirm`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mrtr.protocol import ToolAnnotations
from mrtr.server import ConsentPolicy, Context, Sealer, Server
from mrtr.stores import MemoryStore
from mrtr.testing import Clock, TestClient

NO_FORMS: dict[str, object] = {}
FORMS: dict[str, object] = {"elicitation": {"form": {}}}


def make_app(policy: ConsentPolicy | None = None) -> tuple[Server, list[str]]:
    app = Server("consent-test", consent=policy)
    deleted: list[str] = []

    @app.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def delete_repo(ctx: Context, name: str) -> str:
        if not await ctx.confirm(f"Delete the repository {name} and all its issues?"):
            return "Kept."
        deleted.append(name)
        return f"Deleted {name}."

    @app.tool
    async def rename(ctx: Context, name: str) -> str:  # not destructive: native only
        if not await ctx.confirm(f"Rename {name}?"):
            return "Kept."
        return "Renamed."

    @app.tool
    async def always(ctx: Context, name: str) -> str:
        if not await ctx.confirm(f"Archive {name}?", consent="token"):
            return "Kept."
        deleted.append(f"archived {name}")
        return "Archived."

    return app, deleted


def test_a_client_without_elicitation_gets_the_question_and_a_token() -> None:
    app, deleted = make_app()
    with TestClient(app, capabilities=NO_FORMS, principal="ada") as client:
        first = client.call_tool("delete_repo", {"name": "mrtr"})
        assert first.rounds == 1 and deleted == []  # nothing ran
        assert first.result.get("isError") is not True
        token = first.consent_token
        assert token is not None and token in first.text
        assert "Delete the repository mrtr and all its issues?" in first.text
        assert "_confirm" in first.text
        again = client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
        assert again.text == "Deleted mrtr." and deleted == ["mrtr"]
        replay = client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
        assert replay.result["isError"] is True and "used already" in replay.text
        assert deleted == ["mrtr"]  # once


def test_the_token_fits_only_its_arguments_principal_and_tool() -> None:
    app, deleted = make_app()
    with TestClient(app, capabilities=NO_FORMS, principal="ada") as client:
        token = client.call_tool("delete_repo", {"name": "mrtr"}).consent_token
        other = client.call_tool("delete_repo", {"name": "prod", "_confirm": token})
        assert other.result["isError"] is True and "does not fit" in other.text
        client.principal = "mallory"
        stolen = client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
        assert stolen.result["isError"] is True and "does not fit" in stolen.text
        client.principal = "ada"
        forged = client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token[:-4] + "AAAA"})
        assert forged.result["isError"] is True
        assert client.call_tool("always", {"name": "mrtr", "_confirm": token}).result["isError"]
        assert deleted == []
        # a refused token was not used up: the right call still works once
        assert client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token}).text == (
            "Deleted mrtr.")


def test_the_token_expires() -> None:
    clock = Clock()
    app, deleted = make_app()
    sealer = Sealer(keys=[b"k" * 32], audience=app.name, clock=clock)
    with TestClient(app, capabilities=NO_FORMS, sealer=sealer, clock=clock) as client:
        token = client.call_tool("delete_repo", {"name": "mrtr"}).consent_token
        clock.advance(301)
        late = client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
        assert late.result["isError"] is True and deleted == []


def test_a_client_with_forms_is_asked_natively() -> None:
    app, deleted = make_app()
    with TestClient(app, capabilities=FORMS) as client:
        flow = client.call_tool("delete_repo", {"name": "mrtr"}, answers={"confirm-1": True})
        assert flow.rounds == 2 and flow.text == "Deleted mrtr." and deleted == ["mrtr"]
        assert client.call_tool("delete_repo", {"name": "x"},
                                answers={"confirm-1": False}).text == "Kept."


def test_the_operator_override_sends_a_named_client_down_the_token_path() -> None:
    app, deleted = make_app(ConsentPolicy(ignore_elicitation=["mrtr-testclient"]))
    with TestClient(app, capabilities=FORMS) as client:
        first = client.call_tool("delete_repo", {"name": "mrtr"})
        assert first.rounds == 1 and first.consent_token is not None
        done = client.call_tool("delete_repo", {"name": "mrtr", "_confirm": first.consent_token})
        assert done.text == "Deleted mrtr."
    other, _ = make_app(ConsentPolicy(ignore_elicitation=["mrtr-testclient/1"]))  # version 0
    with TestClient(other, capabilities=FORMS) as client:
        asked = client.call_tool("delete_repo", {"name": "a"}, answers={"confirm-1": True})
        assert asked.rounds == 2  # asked natively


def test_native_only_keeps_the_missing_capability_error_and_token_always_tokens() -> None:
    from mrtr.errors import MissingRequiredClientCapability

    app, deleted = make_app()
    with TestClient(app, capabilities=NO_FORMS) as client:
        with pytest.raises(MissingRequiredClientCapability):
            client.call_tool("rename", {"name": "a"}).result  # noqa: B018
    with TestClient(app, capabilities=FORMS) as client:
        flow = client.call_tool("always", {"name": "a"})
        assert flow.consent_token is not None  # "token" even where forms render
        assert client.call_tool("always", {"name": "a", "_confirm": flow.consent_token}).text == (
            "Archived.")


def test_only_tools_with_the_token_path_advertise_confirm() -> None:
    app, _ = make_app()
    with TestClient(app) as client:
        tools = {t["name"]: t for t in client.request("tools/list")["tools"]}
    assert "_confirm" in tools["delete_repo"]["inputSchema"]["properties"]
    assert "_confirm" not in tools["rename"]["inputSchema"]["properties"]


def test_a_token_is_single_use_across_dispatchers_sharing_a_store() -> None:
    app, deleted = make_app()
    store = MemoryStore()
    with TestClient(app, capabilities=NO_FORMS, store=store) as one, \
            TestClient(app, capabilities=NO_FORMS, store=store) as two:
        token = one.call_tool("delete_repo", {"name": "mrtr"}).consent_token
        assert two.call_tool("delete_repo", {"name": "mrtr", "_confirm": token}).text == (
            "Deleted mrtr.")  # the same keys: any replica redeems it
        assert one.call_tool("delete_repo", {"name": "mrtr", "_confirm": token}).result["isError"]
    assert deleted == ["mrtr"]


def test_every_decision_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    app, _ = make_app()
    caplog.set_level(logging.INFO, logger="mrtr.consent")
    with TestClient(app, capabilities=NO_FORMS, principal="ada") as client:
        token = client.call_tool("delete_repo", {"name": "mrtr"}).consent_token
        client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
        client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
    with TestClient(app, capabilities=FORMS, principal="ada") as client:
        client.call_tool("delete_repo", {"name": "a"}, answers={"confirm-1": True})
        client.call_tool("delete_repo", {"name": "b"}, answers={"confirm-1": False})
    lines = [r for r in caplog.records if r.name == "mrtr.consent"]
    assert [r.consent for r in lines] == ["token", "refused", "form", "declined"]  # type: ignore[attr-defined]
    for record in lines:
        fields = record.__dict__
        assert fields["tool"] == "delete_repo"
        assert fields["principal"] == __import__("hashlib").sha256(b"ada").hexdigest()[:16]
        assert set(fields) >= {"flow_id", "question", "consent_id"}
    assert lines[0].question == lines[1].question  # type: ignore[attr-defined]
    assert lines[0].consent_id == lines[1].consent_id != "-"  # type: ignore[attr-defined]
    assert lines[0].flow_id == lines[1].flow_id != "-"  # type: ignore[attr-defined]


def test_the_policy_names_clients_by_name_or_version_and_reads_a_file(tmp_path: Path) -> None:
    policy = ConsentPolicy(ignore_elicitation=["acme", "desk/1.4"])
    assert policy.ignores({"name": "acme", "version": "9"})
    assert policy.ignores({"name": "desk", "version": "1.4"})
    assert policy.ignores({"name": "desk", "version": "1.4.2"})
    assert not policy.ignores({"name": "desk", "version": "1.40"})
    assert not policy.ignores({"name": "other", "version": "1.4"}) and not policy.ignores(None)
    toml = tmp_path / "consent.toml"
    toml.write_text('ignore_elicitation = ["acme"]\n')
    assert ConsentPolicy.from_file(toml).ignore_elicitation == ("acme",)
    bad = tmp_path / "consent.json"
    bad.write_text('{"ignore_elicitation": "acme"}')
    with pytest.raises(ValueError, match="list of strings"):
        ConsentPolicy.from_file(bad)


def test_a_handler_with_two_confirms_gets_a_token_that_covers_both() -> None:
    app = Server("two")
    done: list[str] = []

    @app.tool(consent="auto")
    async def wipe(ctx: Context, name: str) -> str:
        if not await ctx.confirm(f"Wipe {name}?"):
            return "no"
        if not await ctx.confirm(f"Really wipe {name}, backups too?"):
            return "no"
        done.append(name)
        return "wiped"

    with TestClient(app, capabilities=NO_FORMS) as client:
        first = client.call_tool("wipe", {"name": "db"}).consent_token
        second = client.call_tool("wipe", {"name": "db", "_confirm": first})
        assert "backups too" in second.text and done == []
        third = client.call_tool("wipe", {"name": "db", "_confirm": second.consent_token})
        assert third.text == "wiped" and done == ["db"]


def test_a_bad_consent_mode_is_refused_at_registration() -> None:
    with pytest.raises(ValueError, match="consent must be one of"):
        Server("x").tool(consent="maybe")(lambda: "x")  # type: ignore[call-overload]


def test_the_json_log_carries_the_consent_fields() -> None:
    import io
    import json

    from mrtr.serving._logging import JsonFormatter, RequestContext

    app, _ = make_app()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestContext())
    logger = logging.getLogger("mrtr.consent")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        with TestClient(app, capabilities=NO_FORMS, principal="ada") as client:
            token = client.call_tool("delete_repo", {"name": "mrtr"}).consent_token
            client.call_tool("delete_repo", {"name": "mrtr", "_confirm": token})
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 1  # minting is no decision; the redemption is one
    line = lines[0]
    assert line["logger"] == "mrtr.consent" and line["consent"] == "token"
    assert line["tool"] == "delete_repo" and len(line["question"]) == 32
    assert line["principal"] == __import__("hashlib").sha256(b"ada").hexdigest()[:16]
    assert line["consent_id"] != "-" and len(line["flow_id"]) == 24  # the flow that minted it
