"""fetch_json: one bounded HTTP exchange with an authorization server (metadata, JWKS, RFC 7662)."""

# Design: a fresh httpx client per fetch. Fetches are rare (keys are cached), and a client tied
# to no event loop works under any ASGI server, worker or test loop. Every fetch is bounded in
# time (one deadline over connect, headers and body, so a slow drip cannot hold a request) and
# in size; redirects are not followed (the URLs come from configuration or signed-off metadata).
from __future__ import annotations

import asyncio
from collections.abc import Mapping

import msgspec

__all__ = ["FetchFailed", "fetch_json"]

MAX_BYTES = 256 * 1024


class FetchFailed(Exception):
    """The authorization server did not answer with a JSON object in time."""


async def fetch_json(
    url: str,
    *,
    timeout: float,
    form: Mapping[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> dict[str, object]:
    """GET `url` (POST `form` when given) and return its JSON object.

    `timeout` bounds the whole exchange, in seconds. Raises FetchFailed.
    """
    import httpx  # only a server with auth configured pays for the HTTP client

    try:
        async with asyncio.timeout(timeout), httpx.AsyncClient(timeout=timeout) as client:
            request = client.build_request(
                "GET" if form is None else "POST", url, data=form,
                headers={"accept": "application/json"},
            )
            response = await client.send(request, auth=auth or httpx.USE_CLIENT_DEFAULT,
                                         stream=True)
            try:
                if response.status_code != 200:
                    raise FetchFailed(f"{url}: HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise FetchFailed(f"{url}: response over {max_bytes} bytes")
            finally:
                await response.aclose()
    except TimeoutError:
        raise FetchFailed(f"{url}: no answer within {timeout:g}s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise FetchFailed(f"{url}: {type(exc).__name__}: {exc}") from None
    try:
        value = msgspec.json.decode(bytes(body))
    except msgspec.DecodeError:
        raise FetchFailed(f"{url}: not JSON") from None
    if not isinstance(value, dict):
        raise FetchFailed(f"{url}: not a JSON object")
    return value
