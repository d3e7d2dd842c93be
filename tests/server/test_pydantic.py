"""Pydantic as an optional type system (#27): detection, schemas, errors, forms, and the cost
to servers that never use it (none: pydantic is not even imported)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Literal

import annotated_types
import jsonschema  # type: ignore[import-untyped]
import msgspec
import pydantic
import pytest
from pydantic import BaseModel, EmailStr, Field, field_validator

from mrtr import AskIfMissing, Context, Server
from mrtr.client import Client, Handlers, StdioTransport
from mrtr.protocol import ElicitRequestParams, ElicitResult, TextContent
from mrtr.server import Header
from mrtr.server._forms import render_form
from mrtr.server._outputs import return_schema
from mrtr.server._pydantic import involves, is_model
from mrtr.server._schema import signature_schema
from mrtr.testing import TestClient, then
from tests.transports.conftest import ROOT, cli_env


class Address(BaseModel):
    street: str
    city: str = "Oslo"


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pydantic.dataclasses.dataclass
class Seats:
    seats: int = Field(ge=1, le=4)


class PlainStruct(msgspec.Struct):
    x: int


@dataclasses.dataclass
class PlainData:
    x: int


@pytest.mark.parametrize("annotation,default", [
    (Annotated[int, Field(ge=1)], None),
    (int, Field(3, ge=1)),
    (Address, None),
    (list[Address], None),
    (Address | None, None),
    (dict[str, Address], None),
    (EmailStr, None),
    (Annotated[int, annotated_types.Ge(1)], None),
    (Seats, None),
])
def test_pydantic_types_are_detected(annotation: object, default: object) -> None:
    assert involves(annotation, default)


@pytest.mark.parametrize("annotation", [
    int, str, Annotated[int, msgspec.Meta(ge=1)], PlainStruct, PlainData, list[PlainStruct],
    Literal["a", "b"], Colour, dict[str, int], None,
])
def test_other_types_are_not_pydantic(annotation: object) -> None:
    assert not involves(annotation, None)
    assert not is_model(annotation)


def test_a_dataclass_with_pydantic_fields_is_pydantic() -> None:
    @dataclasses.dataclass
    class Wrapped:
        n: Annotated[int, Field(le=5)]

    assert involves(Wrapped) and not is_model(Wrapped)


# -- parameters ------------------------------------------------------------------------------------
def test_field_defaults_headers_and_unknown_keys() -> None:
    def tool(ctx: Context, region: Annotated[str, Header("Region")],
             n: int = Field(2, ge=1, description="How many"),
             tags: list[str] = Field(default_factory=list),  # noqa: B008 - pydantic style
             note: str = "") -> None: ...

    sig = signature_schema(tool, skip={"ctx"})
    props = sig.input_schema["properties"]
    assert props == {  # type: ignore[comparison-overlap]
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer", "minimum": 1, "default": 2, "description": "How many"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "note": {"type": "string", "default": ""},
    }
    assert sig.input_schema["required"] == ["region"]
    convert = sig.converter()
    assert convert({"region": "eu", "other": 1}) == {"region": "eu", "n": 2, "tags": [],
                                                    "note": ""}
    first, second = convert({"region": "eu"}), convert({"region": "eu"})
    assert first["tags"] is not second["tags"]  # a fresh default per call


def test_a_model_parameter_with_recursive_refs_keeps_defs() -> None:
    def plant(tree: Tree) -> None: ...

    schema = signature_schema(plant, skip=()).input_schema
    assert schema["type"] == "object" and "Tree" in schema["$defs"]  # type: ignore[operator]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"tree": {"name": "a", "children": [{"name": "b"}]}}, schema)
    value = signature_schema(plant, skip=()).converter()({"tree": {"name": "a"}})
    assert value == {"tree": Tree(name="a")}


def test_invalid_arguments_name_every_failing_path() -> None:
    def tool(n: Annotated[int, Field(le=5)], address: Address) -> None: ...

    convert = signature_schema(tool, skip=()).converter()
    with pytest.raises(ValueError) as caught:
        convert({"n": 9, "address": {"city": 3}})
    assert str(caught.value) == (
        "Invalid arguments: Input should be less than or equal to 5 - at `$.n`; Field required "
        "- at `$.address.street`; Input should be a valid string - at `$.address.city`")
    with pytest.raises(ValueError, match="Invalid arguments: expected an object"):
        convert(["n"])  # type: ignore[arg-type]


def test_msgspec_types_beside_pydantic_ones_are_refused_naming_the_fix() -> None:
    def tool(a: Annotated[int, Field(ge=1)], b: Annotated[int, msgspec.Meta(le=5)]) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'b' uses msgspec .* use pydantic.Field"):
        signature_schema(tool, skip=())


class Opaque:
    """Neither pydantic nor msgspec can validate it."""


def test_a_type_pydantic_cannot_read_fails_at_registration() -> None:
    app = Server("t")
    with pytest.raises(TypeError, match="tool: unsupported parameter type"):
        @app.tool()
        def tool(a: Annotated[int, Field(ge=1)], b: Opaque) -> None: ...


def test_ask_if_missing_takes_its_form_from_the_field() -> None:
    app = Server("t")

    @app.tool()
    def book(seats: Annotated[int, Field(ge=1, le=4, description="Seats"),
                              AskIfMissing("How many seats?")]) -> str:
        return f"{seats} seat(s)"

    with TestClient(app) as client:
        flow = client.call_tool("book", answers={"args:seats": then({"seats": 9}, {"seats": 3})})
    assert flow.text == "3 seat(s)" and flow.rounds == 3
    asked = flow.asked(1)["args:seats"]["params"]
    assert asked["requestedSchema"]["properties"]["seats"] == {
        "type": "integer", "title": "Seats", "description": "Seats", "minimum": 1, "maximum": 4}
    assert flow.asked(2)["args:seats"]["params"]["message"].startswith("seats: must be at most 4")


# -- returns -------------------------------------------------------------------------------------
def test_return_schemas() -> None:
    def tree() -> Tree: ...
    def stars() -> Annotated[int, Field(ge=1)]: ...
    def plain() -> PlainStruct: ...

    root = return_schema(tree)
    assert root is not None and root["type"] == "object" and "$ref" not in root
    jsonschema.validate({"name": "a", "children": [{"name": "b"}]}, root)
    assert return_schema(stars) == {"type": "object", "required": ["result"],
                                    "properties": {"result": {"type": "integer", "minimum": 1}}}
    assert return_schema(plain) == {"type": "object", "properties": {"x": {"type": "integer"}},
                                    "required": ["x"]}


def test_a_wrong_return_is_an_error_result(caplog: pytest.LogCaptureFixture) -> None:
    app = Server("t")

    @app.tool()
    def good() -> Address:
        return {"street": "Main 1"}  # type: ignore[return-value]  # a dict of the right shape

    @app.tool()
    def bad() -> Address:
        return {"city": 3}  # type: ignore[return-value]

    @app.tool()
    def opaque() -> Address:
        return object()  # type: ignore[return-value]

    with TestClient(app) as client, caplog.at_level(logging.ERROR):
        assert client.call_tool("good").result["structuredContent"] == {"street": "Main 1"}
        assert client.call_tool("bad").text == (
            "Tool bad returned a result that does not match its output schema.")
        assert client.call_tool("opaque").text == (
            "Tool opaque returned a result that cannot be serialised.")
    assert "'street' is a required property" in caplog.text


def test_a_task_tool_returns_its_model_as_structured_content() -> None:
    app = Server("t")

    @app.tool(task="optional")
    async def slow() -> Address:
        return Address(street="Main 1")

    with TestClient(app) as client:
        client.capabilities = {**client.capabilities,
                               "extensions": {"io.modelcontextprotocol/tasks": {}}}
        created = client.request("tools/call", {"name": "slow", "arguments": {}})
        for _ in range(200):
            task = client.request("tasks/get", {"taskId": created["taskId"]})
            if task["status"] == "completed":
                break
        assert task["result"]["structuredContent"] == {"street": "Main 1", "city": "Oslo"}


# -- forms -------------------------------------------------------------------------------------
class Booking(BaseModel):
    seats: int = Field(gt=0, lt=5)
    colour: Colour = Colour.RED
    extras: set[Literal["tea", "cake"]] = set()
    note: str | None
    code: str = Field("AB", pattern="^[A-Z]+$", title="Booking code", max_length=4)
    nickname: str = Field("", alias="nick")

    @field_validator("seats")
    @classmethod
    def not_three(cls, value: int) -> int:
        if value == 3:
            raise ValueError("three seats are never free")
        return value


def test_the_form_subset_of_a_model() -> None:
    schema = render_form(Booking).schema
    assert schema == {"type": "object", "required": ["seats"], "properties": {
        "seats": {"type": "integer", "title": "Seats", "minimum": 1, "maximum": 4},
        "colour": {"type": "string", "title": "Colour", "enum": ["red", "blue"],
                   "default": "red"},
        "extras": {"type": "array", "title": "Extras", "default": [],
                   "items": {"type": "string", "enum": ["tea", "cake"]}},
        "note": {"type": "string", "title": "Note"},
        "code": {"type": "string", "title": "Booking code", "maxLength": 4, "default": "AB"},
        "nick": {"type": "string", "title": "Nick", "default": ""},
    }}
    assert render_form(Booking) is render_form(Booking)  # rendered once


def test_model_answers_are_validated_by_pydantic_and_asked_again() -> None:
    app = Server("t")

    @app.tool()
    async def book(ctx: Context) -> str:
        booking = await ctx.elicit("Book?", Booking, key="b")
        assert isinstance(booking, Booking)
        return f"{booking.seats} {booking.colour.value} {sorted(booking.extras)} {booking.note}"

    with TestClient(app) as client:
        flow = client.call_tool("book", answers={"b": then(
            {"seats": 3}, {"seats": 2, "code": "ab"}, {"seats": 2, "extras": ["cake"]})})
    assert flow.text == "2 red ['cake'] None" and flow.rounds == 4
    assert flow.asked(2)["b"]["params"]["message"] == "seats: three seats are never free\n\nBook?"
    assert flow.asked(3)["b"]["params"]["message"].startswith("code: string should match")


class WithAddress(BaseModel):
    name: str
    address: Address


class WithList(BaseModel):
    addresses: list[Address]


class WithDict(BaseModel):
    scores: dict[str, int]


class WithUnion(BaseModel):
    value: int | str


class WithNumbers(BaseModel):
    values: list[int]


@pytest.mark.parametrize("model,reason", [
    (WithAddress, "WithAddress.address: a form cannot carry a nested model (Address)"),
    (WithList, "WithList.addresses: a form cannot carry a list of Address models"),
    (WithDict, "WithDict.scores: a form cannot carry an object"),
    (WithUnion, "WithUnion.value: a union cannot be a form field"),
    (WithNumbers, "WithNumbers.values: a form cannot carry a list of integers"),
])
def test_fields_a_form_cannot_carry_are_named(model: type, reason: str) -> None:
    with pytest.raises(TypeError, match="^" + reason.replace("(", r"\(").replace(")", r"\)")):
        render_form(model)


def test_a_form_that_cannot_be_rendered_fails_the_tool_with_the_reason_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    app = Server("t")

    @app.tool()
    async def book(ctx: Context) -> str:
        await ctx.elicit("Where?", WithAddress)
        return "never"

    with TestClient(app) as client, caplog.at_level(logging.ERROR):
        flow = client.call_tool("book")
    assert flow.result["isError"] is True and flow.rounds == 1
    assert "WithAddress.address: a form cannot carry a nested model (Address)" in caplog.text


def test_a_pydantic_dataclass_is_a_form() -> None:
    app = Server("t")

    @app.tool()
    async def book(ctx: Context) -> str:
        seats = await ctx.elicit("Seats?", Seats, key="s")
        return f"{type(seats).__name__}({seats.seats})"

    with TestClient(app) as client:
        flow = client.call_tool("book", answers={"s": then({"seats": 5}, {"seats": 4})})
    assert flow.text == "Seats(4)" and flow.rounds == 3


# -- servers without pydantic never import it ---------------------------------------------------
PLAIN_SERVER = '''
import sys
from dataclasses import dataclass
from typing import Annotated

import msgspec

from mrtr import AskIfMissing, Context, Form, Server

app = Server("plain")


class Details(Form):
    boxes: Annotated[int, msgspec.Meta(ge=1, le=5)]


@dataclass
class Note:
    text: str


class Quote(msgspec.Struct):
    price: float


@app.tool()
async def book(ctx: Context, order_id: str,
               n: Annotated[int, msgspec.Meta(ge=1), AskIfMissing("How many?")]) -> Quote:
    """Book."""
    details = await ctx.elicit("Details?", Details, key="details")
    await ctx.elicit("Note?", Note, key="note")
    return Quote(price=details.boxes * n)


@app.prompt()
def hello(name: str) -> str:
    return f"Hello {name}"


@app.tool()
def loaded() -> list[str]:
    """The pydantic modules this process has imported."""
    return sorted(m for m in sys.modules
                  if m.split(".")[0] in ("pydantic", "pydantic_core", "annotated_types"))
'''

BLOCK = '''
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pydantic", "pydantic_core"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, NotInstalled())
'''
IN_PROCESS = '''
import importlib.util, json, sys
def pydantic_modules():
    return sorted(m for m in sys.modules
                  if m.split(".")[0] in ("pydantic", "pydantic_core", "annotated_types"))
try:
    stages = {"installed": importlib.util.find_spec("pydantic") is not None}
except ModuleNotFoundError:
    stages = {"installed": False}
import mrtr, mrtr.server
stages["import mrtr, mrtr.server"] = pydantic_modules()
import plain_server
stages["register"] = pydantic_modules()
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.testing import TestClient, then
McpApp(Dispatcher(plain_server.app))
with TestClient(plain_server.app) as client:
    flow = client.call_tool("book", {"order_id": "A-1"}, answers={
        "args:n": {"n": 2}, "details": then({"boxes": 9}, {"boxes": 2}),
        "note": {"text": "fragile"}})
    prompt = client.get_prompt("hello", {"name": "Ann"})
stages["serve"] = pydantic_modules()
print(json.dumps({"stages": stages, "result": flow.result.get("structuredContent"),
                  "prompt": prompt.result["messages"][0]["content"]["text"]}))
'''


@pytest.mark.parametrize("installed", [True, False], ids=["installed", "not-installed"])
def test_a_server_without_pydantic_types_never_imports_it(tmp_path: Path, installed: bool) -> None:
    (tmp_path / "plain_server.py").write_text(PLAIN_SERVER)
    env = {**cli_env(), "PYTHONPATH": f"{tmp_path}:{cli_env()['PYTHONPATH']}"}
    code = IN_PROCESS if installed else BLOCK + IN_PROCESS
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["stages"] == {"installed": installed, "import mrtr, mrtr.server": [],
                              "register": [], "serve": []}
    assert seen["result"] == {"price": 4.0} and seen["prompt"] == "Hello Ann"


def test_mrtr_serve_of_a_server_without_pydantic_never_imports_it(tmp_path: Path) -> None:
    server = tmp_path / "plain_server.py"
    server.write_text(PLAIN_SERVER)

    async def answer(params: ElicitRequestParams) -> ElicitResult:
        schema = params.requested_schema
        fields = set(schema.get("properties", {})) if isinstance(schema, dict) else set()
        known = {"n": 2, "boxes": 2, "text": "fragile"}
        return ElicitResult(action="accept", content={k: known[k] for k in fields})

    async def drive() -> tuple[object, list[str]]:
        command = [sys.executable, "-m", "mrtr.cli", "serve", f"{server}:app", "--stdio"]
        transport = StdioTransport(command, env=cli_env(), cwd=str(ROOT))
        async with Client(transport, handlers=Handlers(elicitation=answer), timeout=60) as client:
            booked = await client.call_tool("book", {"order_id": "A-1"})
            modules = await client.call_tool("loaded", {})
        text = modules.content[0]
        assert isinstance(text, TextContent)
        return booked.structured_content, json.loads(text.text)

    structured, modules = asyncio.run(drive())
    assert structured == {"price": 4.0}
    assert modules == []


def test_the_docs_pydantic_section_runs() -> None:
    docs = ROOT / "docs" / "server.md"
    section = docs.read_text().split("### Pydantic models and `Field`", 1)[1]
    code = textwrap.dedent(section.split("```python\n", 1)[1].split("```", 1)[0])
    module = type(sys)("docs_pydantic")
    sys.modules[module.__name__] = module
    try:
        exec(compile(code, str(docs), "exec", dont_inherit=True), vars(module))
    finally:
        del sys.modules[module.__name__]


def test_models_returned_without_an_annotation_are_json() -> None:
    app = Server("t")

    @app.tool()
    def untyped():  # type: ignore[no-untyped-def]  # as many FastMCP tools are written
        return [Address(street="Main 1")]

    @app.resource("shop://address")
    def address():  # type: ignore[no-untyped-def]
        return Address(street="Main 2")

    @app.tool()
    def broken():  # type: ignore[no-untyped-def]
        return Opaque()

    with TestClient(app) as client:
        flow = client.call_tool("untyped")
        assert json.loads(flow.text) == [{"street": "Main 1", "city": "Oslo"}]
        assert "structuredContent" not in flow.result
        read = client.read_resource("shop://address").result["contents"][0]
        assert json.loads(read["text"]) == {"street": "Main 2", "city": "Oslo"}
        assert client.call_tool("broken").text == (
            "Tool broken returned a result that cannot be serialised.")


def test_prompts_without_pydantic_types_are_as_before() -> None:
    app = Server("t")

    @app.prompt()
    def loose(topic: Unresolvable) -> str:  # type: ignore[name-defined]  # noqa: F821
        return f"About {topic}"

    @app.prompt()
    def spread(**extra: str) -> str:
        return ", ".join(extra)

    with TestClient(app) as client:  # registered: annotations are not read for pydantic's sake
        flow = client.get_prompt("loose", {"topic": "tea"})
        assert flow.result["messages"][0]["content"]["text"] == "About tea"
        assert {p["name"] for p in client.request("prompts/list")["prompts"]} == {"loose",
                                                                                  "spread"}
