"""Server: decorators build the wire Tool/Prompt/Resource objects once, at registration."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Literal

import msgspec
import pytest
from msgspec import Meta

from mrtr import AskIfMissing, Context, Form, Server
from mrtr.protocol import PROTOCOL_VERSION, Resource, ResourceTemplate, ToolAnnotations
from mrtr.server import CachePolicy, Dispatcher, Peer
from mrtr.testing import TestClient


class Quote(msgspec.Struct):
    price: int


def test_tool_registration() -> None:
    app = Server("r")

    @app.tool(title="Add", annotations=ToolAnnotations(read_only_hint=True))
    async def add(ctx: Context, a: int, b: int = 2) -> int:
        """Add two numbers.

        Details that stay out of the description.
        """
        return a + b

    entry = app.tables.tools["add"]
    assert entry.wants_ctx and entry.tool.description == "Add two numbers."
    assert entry.tool.title == "Add"
    schema = entry.tool.input_schema
    assert schema["required"] == ["a"] and "ctx" not in schema["properties"]
    assert entry.tool.output_schema is msgspec.UNSET


def test_context_found_by_annotation_or_name() -> None:
    app = Server("r")

    @app.tool()
    async def by_type(c: Context) -> str:
        return ""

    @app.tool()
    def plain(x: str) -> str:
        return x

    assert app.tables.tools["by_type"].wants_ctx
    assert not app.tables.tools["plain"].wants_ctx
    assert app.tables.tools["plain"].tool.description == "plain"


def test_structured_output_schema() -> None:
    app = Server("r")

    @app.tool("quote")
    async def make_quote() -> Quote:
        return Quote(price=3)

    assert app.tables.tools["quote"].tool.output_schema["properties"] == {  # type: ignore[index]
        "price": {"type": "integer"}}
    check = app.tables.tools["quote"].check_output  # compiled once, here
    assert check is not None and check({"price": 3}) is None
    assert check({"price": "3"}) == "price: '3' is not of type 'integer'"


def test_tools_without_output_schema_have_no_output_check() -> None:
    app = Server("r")

    @app.tool()
    async def echo(text: str) -> str:
        return text

    assert app.tables.tools["echo"].check_output is None


def test_verbatim_input_schema() -> None:
    app = Server("r")
    schema: dict[str, object] = {"type": "object", "properties": {"q": {"type": "string"}}}

    @app.tool(input_schema=schema, description="Raw.")
    async def raw(q: str) -> str:
        return q

    assert app.tables.tools["raw"].tool.input_schema == schema


@pytest.mark.parametrize("name", ["", "has space", "x" * 129, "slash/y"])
def test_bad_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        Server("r").tool(name)(lambda: None)


def test_prompt_arguments() -> None:
    app = Server("r")

    @app.prompt(title="Greet")
    async def greet(ctx: Context, name: str, tone: str = "warm") -> str:
        return name

    entry = app.tables.prompts["greet"]
    assert entry.required == ("name",)
    assert [(a.name, a.required) for a in entry.prompt.arguments] == [  # type: ignore[union-attr]
        ("name", True), ("tone", False)]


def test_resources_and_templates() -> None:
    app = Server("r")

    @app.resource("mem://static", mime_type="text/plain")
    def static() -> str:
        return "s"

    @app.resource("mem://items/{kind}/{id}", name="item")
    def item(kind: str, id: str) -> str:
        return id

    assert isinstance(app.tables.resources["mem://static"].resource, Resource)
    template = app.tables.templates["mem://items/{kind}/{id}"].resource
    assert isinstance(template, ResourceTemplate) and template.name == "item"
    found = app.match_template("mem://items/book/42")
    assert found is not None and found[1] == {"kind": "book", "id": "42"}
    assert app.match_template("mem://items/book/42/more") is None
    assert app.match_template("mem://items/a.b/1") is not None
    assert app.match_template("mem://other") is None


def test_template_literal_parts_are_escaped() -> None:
    app = Server("r")

    @app.resource("mem://a.b/{x}")
    def t(x: str) -> str:
        return x

    assert app.match_template("mem://aXb/1") is None


def test_completion_needs_exactly_one_ref() -> None:
    with pytest.raises(ValueError):
        Server("r").completion()
    with pytest.raises(ValueError):
        Server("r").completion(prompt="p", resource_template="t")


def test_decorators_return_the_function() -> None:
    app = Server("r")

    async def fn() -> str:
        return ""

    assert app.tool()(fn) is fn and app.prompt()(fn) is fn and app.resource("mem://x")(fn) is fn


def test_defaults() -> None:
    app = Server("r")
    assert (app.version, app.page_size, app.cache) == ("0.0.0", 100, CachePolicy())
    assert CachePolicy().scope in ("public", "private") and CachePolicy().ttl_ms >= 0


# -- sync handlers and cancellation ---------------------------------------------------------------
@pytest.mark.parametrize("ending", ["cancelled", "timed-out"])
def test_sync_handler_sees_the_request_cancelled(ending: str) -> None:
    app = Server("r")
    started, stopped = threading.Event(), threading.Event()

    @app.tool()
    def crunch(ctx: Context) -> str:
        started.set()
        if ctx.cancelled.wait(5):  # a long job, polling for cancellation between its steps
            stopped.set()
        return "done"

    request = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "crunch", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {}}}})

    async def main() -> None:
        handling = Dispatcher(app).handle_bytes(request, Peer())
        if ending == "timed-out":
            task = asyncio.create_task(asyncio.wait_for(handling, timeout=0.2))
        else:
            task = asyncio.create_task(handling)
        assert await asyncio.to_thread(started.wait, 5)
        if ending == "cancelled":
            task.cancel()
        await asyncio.wait({task}, timeout=5)
        assert task.done()
        assert await asyncio.to_thread(stopped.wait, 2), "the handler never saw the cancellation"

    asyncio.run(main())


def test_sync_handler_not_cancelled_finishes_normally() -> None:
    app = Server("r")

    @app.tool()
    def quick(ctx: Context) -> str:
        return f"cancelled={ctx.cancelled.is_set()}"

    with TestClient(app) as client:
        result = client.request("tools/call", {"name": "quick", "arguments": {}})
    assert result["content"] == [{"type": "text", "text": "cancelled=False"}]


# -- issue 19: bare decorators (`@app.tool`, `@app.prompt`) and a clear error for a bare resource --


def _bare_app() -> Server:
    app = Server("bare")

    @app.tool
    async def shout(ctx: Context, text: str) -> str:
        """Shout the text."""
        return text.upper() + "!"

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    @app.prompt
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello {name}"

    assert shout.__name__ == "shout" and add(1, 2) == 3  # the functions stay themselves
    return app


def test_19_bare_tool_decorator_registers_a_listed_callable_tool() -> None:
    from mrtr.testing import TestClient

    with TestClient(_bare_app()) as client:
        listed = client.request("tools/list")["tools"]
        assert [t["name"] for t in listed] == ["shout", "add"]
        assert listed[0]["description"] == "Shout the text."
        assert client.call_tool("shout", {"text": "hi"}).text == "HI!"
        assert client.call_tool("add", {"a": 2, "b": 40}).text == "42"


def test_19_bare_prompt_decorator_registers_a_prompt() -> None:
    from mrtr.testing import TestClient

    with TestClient(_bare_app()) as client:
        listed = client.request("prompts/list")["prompts"]
        assert [p["name"] for p in listed] == ["greet"]
        got = client.get_prompt("greet", {"name": "Ann"}).result
        assert got["messages"][0]["content"]["text"] == "Hello Ann"


def test_19_decorators_with_parentheses_still_work() -> None:
    app = Server("r")

    @app.tool()
    def a() -> str:
        return ""

    @app.tool("renamed", title="T")
    def b() -> str:
        return ""

    @app.tool(name="kw")
    def c() -> str:
        return ""

    @app.prompt()
    def p() -> str:
        return ""

    @app.prompt(name="q")
    def p2() -> str:
        return ""

    assert list(app.tables.tools) == ["a", "renamed", "kw"]
    assert list(app.tables.prompts) == ["p", "q"]


def test_19_bare_resource_decorator_fails_at_decoration_naming_the_fix() -> None:
    app = Server("r")
    with pytest.raises(TypeError, match=r"@app\.resource needs a URI: .*@app\.resource\('file:///"):

        @app.resource  # type: ignore[arg-type]
        def readme() -> str:
            return ""

    assert not app.tables.resources and not app.tables.templates


# -- registration refuses what would fail later (#27) -------------------------------------------
def test_27_a_second_tool_of_the_same_name_is_refused_unless_it_replaces_the_first() -> None:
    app = Server("r")

    @app.tool()
    def book() -> str:
        return "first"

    with pytest.raises(ValueError, match=r"a tool named 'book' is registered already \(by "
                       r".*book\): give this one another name, or pass replace=True"):

        @app.tool("book")
        def book_again() -> str:
            return "second"

    assert app.tables.tools["book"].tool.description == "book"

    @app.tool("book", replace=True, description="the second")
    def book_replaced() -> str:
        return "second"

    assert app.tables.tools["book"].tool.description == "the second"


def test_27_duplicate_prompts_and_resources_are_refused_too() -> None:
    app = Server("r")
    app.prompt("p")(lambda: "a")
    app.resource("mem://x")(lambda: "a")
    app.resource("mem://{k}")(lambda k: k)
    with pytest.raises(ValueError, match=r"a prompt named 'p' is registered already"):
        app.prompt("p")(lambda: "b")
    with pytest.raises(ValueError, match=r"a resource with the URI 'mem://x' is registered "
                       r"already .*another URI, or pass replace=True"):
        app.resource("mem://x")(lambda: "b")
    with pytest.raises(ValueError, match=r"a resource template with the URI 'mem://\{k\}'"):
        app.resource("mem://{k}")(lambda k: k)
    app.prompt("p", replace=True)(lambda: "b")
    app.resource("mem://x", replace=True)(lambda: "b")


@pytest.mark.parametrize("decorator", ["tool", "prompt", "resource"])
def test_27_a_class_is_refused_naming_a_function_or_an_instance_method(decorator: str) -> None:
    app = Server("r")

    class Booker:
        def __init__(self, show: str) -> None:
            self.show = show

    register = app.resource("mem://b") if decorator == "resource" else getattr(app, decorator)()
    with pytest.raises(TypeError, match=rf"@app\.{decorator} got the class .*Booker, but a "
                       r"handler is a function: decorate a def or async def, or register a "
                       r"method of an instance"):
        register(Booker)
    assert not app.tables.tools and not app.tables.prompts and not app.tables.resources


@pytest.mark.parametrize("uri", ["not a uri", "notes", "/etc/passwd", "mem:// x"])
def test_27_a_resource_uri_needs_a_scheme(uri: str) -> None:
    with pytest.raises(ValueError, match=r"is not a URI: it needs a scheme and no spaces, e\.g\. "
                       r"'notes://today'"):
        Server("r").resource(uri)(lambda: "")


@pytest.mark.parametrize("uri", ["mem://{a-b}", "mem://{+path}", "mem://{day", "mem://{?q}"])
def test_27_a_template_variable_must_be_written_as_a_name_in_braces(uri: str) -> None:
    with pytest.raises(ValueError, match=r"write each variable as \{name\}"):
        Server("r").resource(uri)(lambda **kw: "")


def test_27_a_template_variable_without_a_parameter_is_refused() -> None:
    app = Server("r")
    with pytest.raises(TypeError, match=r"resource template 'mem://\{kind\}/\{id\}': .*item has "
                       r"no parameter for the URI variable \{id\}: add `id: str` to it, or take "
                       r"the variable out of the URI"):

        @app.resource("mem://{kind}/{id}")
        def item(kind: str) -> str:
            return kind

    @app.resource("mem://any/{kind}/{id}")
    def anything(**variables: str) -> str:  # takes every variable
        return ",".join(variables)


def test_27_a_parameter_the_uri_does_not_fill_is_refused_unless_it_has_a_default_or_asks() -> None:
    app = Server("r")
    with pytest.raises(TypeError, match=r"template 'mem://notes/\{day\}': parameter 'author' of "
                       r".*notes is not a variable of the URI, so nothing fills it: put "
                       r"\{author\} in the URI, give it a default, or mark it "
                       r"Annotated\[str, AskIfMissing\(\.\.\.\)\]"):

        @app.resource("mem://notes/{day}")
        def notes(day: str, author: str) -> str:
            return day

    with pytest.raises(TypeError, match=r"resource 'mem://motd': parameter 'lang' of"):
        app.resource("mem://motd")(lambda lang: lang)

    @app.resource("mem://fine/{day}")
    def fine(ctx: Context, day: str, author: str = "me",
             editor: Annotated[str, AskIfMissing()] = "x") -> str:
        return day


def test_27_a_form_default_outside_its_own_bounds_is_refused_when_the_form_is_defined() -> None:
    with pytest.raises(TypeError, match=r"Boxes\.count: the default 9 does not fit its own field "
                       r"\(must be at most 5\): change the default or the bound"):

        class Boxes(Form):
            count: Annotated[int, Meta(ge=1, le=5)] = 9

    with pytest.raises(TypeError, match=r"Size\.size: the default 'xl' does not fit its own "
                       r"field \(must be one of: s, m\)"):

        class Size(Form):
            size: Literal["s", "m"] = "xl"

    with pytest.raises(TypeError, match=r"parameter 'code': .*the default 'ABCD' does not fit "
                       r"its own field \(must be at most 3 characters long\)"):

        @Server("r").tool()
        def ship(code: Annotated[str, Meta(max_length=3), AskIfMissing()] = "ABCD") -> str:
            return code


class Thing:
    """No JSON Schema: a plain class."""


def test_27_an_unsupported_parameter_type_names_the_parameter_and_the_types_to_use() -> None:
    with pytest.raises(TypeError, match=r"parameter 'where' \(dict\[str, Thing\]\): Thing has no "
                       r"JSON Schema to tell a client what to send: use str, int, float, bool, "
                       r".*a msgspec\.Struct, a dataclass or a TypedDict") as caught:

        @Server("r").tool()
        def ship(order: str, where: dict[str, Thing]) -> str:
            return order

    assert "schema_hook" not in str(caught.value)
