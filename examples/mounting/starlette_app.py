"""Mount the returns desk inside a Starlette app: the MCP endpoint is the mount prefix + /mcp.

    uvicorn examples.mounting.starlette_app:api --port 8000
    mrtr call http://127.0.0.1:8000/returns/mcp book_return order_id=A-1001
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from examples.bookings import app

mcp = app.http_app()  # keys from MRTR_STATE_KEYS, store from MRTR_STORE


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


api = Starlette(
    routes=[Route("/health", health), Mount("/returns", app=mcp)],  # POST /returns/mcp
    lifespan=mcp.lifespan,  # mounted apps get no lifespan events of their own
)
