"""Mount the returns desk inside a FastAPI app: the MCP endpoint is the mount prefix + /mcp.

    uvicorn examples.mounting.fastapi_app:api --port 8000
    mrtr call http://127.0.0.1:8000/returns/mcp book_return order_id=A-1001
"""

from __future__ import annotations

from fastapi import FastAPI

from examples.bookings import app

mcp = app.http_app()  # keys from MRTR_STATE_KEYS, store from MRTR_STORE
# Starlette does not pass lifespan events to mounted apps: the parent runs the MCP app's.
api = FastAPI(title="BrightGrid", lifespan=mcp.lifespan)


@api.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


api.mount("/returns", mcp)  # POST /returns/mcp
