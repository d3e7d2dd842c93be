"""Research a topic: asks the client's model and the client's roots in one round."""

from __future__ import annotations

from mrtr import Context, Server
from mrtr.protocol import TextContent

app = Server("research", version="1.0.0")


@app.tool()
async def research(ctx: Context, topic: str) -> str:
    """Summarise a topic with the client's model and list the workspace roots it may use."""
    summary, roots = await ctx.gather(
        ctx.sample(f"Summarise {topic} in one sentence.", max_tokens=200, key="summary"),
        ctx.roots(key="roots", fallback=[]),
    )
    content = summary.content
    text = content.text if isinstance(content, TextContent) else "(no text)"
    places = ", ".join(root.uri for root in roots) or "no roots"
    return f"{text}\nWorkspace: {places}"
