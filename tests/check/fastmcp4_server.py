"""A server on FastMCP 4.2.3 in its 2026-07-28 pattern, for `mrtr check`'s expectation tests.

Its `book` tool returns InputRequiredResult itself, minting its first requestState on round 2
(FastMCP seals it on the wire). Run with a virtualenv holding `fastmcp==4.2.3`:
`python fastmcp4_server.py stdio` or `python fastmcp4_server.py http PORT` (stateless, /mcp).
"""

import json
import sys
from typing import Any

import mcp_types as t  # type: ignore[import-not-found]
from fastmcp import Context, FastMCP  # type: ignore[import-not-found]

server = FastMCP("boxes-fastmcp")

def form(prop: str, schema: dict[str, Any]) -> Any:
    return t.ElicitRequest(params=t.ElicitRequestFormParams(
        message=f"{prop}?", requested_schema={"type": "object", "properties": {prop: schema},
                                              "required": [prop]}))


@server.tool()  # type: ignore[misc]
async def book(item: str, ctx: Context) -> Any:
    """Book boxes: asks how many, then for confirmation (state first minted on round 2)."""
    answers = ctx.input_responses or {}
    if ctx.request_state is None:
        boxes = answers.get("boxes")
        if boxes is None:
            ask = form("boxes", {"type": "integer", "minimum": 1})
            return t.InputRequiredResult(input_requests={"boxes": ask})
        count = boxes.content["boxes"]
        return t.InputRequiredResult(request_state=json.dumps({"boxes": count}),
                                     input_requests={"confirm": form("confirm",
                                                                     {"type": "boolean"})})
    return f"Booked {json.loads(ctx.request_state)['boxes']} boxes of {item}"

if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=True)
    else:
        server.run("stdio")
