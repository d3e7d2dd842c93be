"""The benchmark tool contract (../shared/bench/README.md), written the way an mrtr user would.

`echo` answers in one round, `greet` asks for one string then answers, `deploy` asks for a
string, then a yes/no confirmation, then answers. Serve it with
`mrtr serve benchmarks.server:app --port 9000`.
"""

from __future__ import annotations

from mrtr import Context, Form, Server

app = Server("mrtr-bench", version="1.0.0")


class Name(Form):
    name: str


class Target(Form):
    env: str


@app.tool()
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@app.tool()
async def greet(ctx: Context, greeting: str) -> str:
    """Ask who to greet, then greet them."""
    who = await ctx.elicit("Who should be greeted?", Name, key="name")
    return f"{greeting}, {who.name}"


@app.tool()
async def deploy(ctx: Context, service: str) -> str:
    """Ask for the environment, confirm, then deploy."""
    target = await ctx.elicit(f"Where should {service} go?", Target, key="target")
    if not await ctx.confirm(f"Deploy {service} to {target.env}?", key="confirm"):
        return f"{service} not deployed."
    return f"deployed {service} to {target.env}"
