"""Connect a third-party calendar: OAuth-style sign-in through URL elicitation, then confirm.

`connect_calendar` sends the user to the provider's sign-in page; the provider redirects the
browser to this server's completion route (`/mcp/elicitation/complete/<id>?code=...`), which
records the completion in the store; the client's next retry finds it and the tool exchanges the
code. Until then each retry is a "not yet" round. `disconnect_calendar` is destructive: clients
that cannot show the question (no elicitation) confirm through the model with a `_confirm` token.

Serve it with `mrtr serve examples.connect:app` (PUBLIC_URL: where browsers reach this server;
PROVIDER_URL: the provider, faked below by `provider`), then call `connect_calendar`.
"""

from __future__ import annotations

import os
import secrets
from urllib.parse import urlencode

from mrtr import Context, Server
from mrtr.protocol import ToolAnnotations

PUBLIC_URL = os.environ.get("PUBLIC_URL", "http://127.0.0.1:8000")
PROVIDER_URL = os.environ.get("PROVIDER_URL", "https://calendar.example")
app = Server("calendar-connect", version="1.0.0",
             instructions="Connects and disconnects the user's calendar.")


class Provider:
    """A stand-in for the third party: issues one-time codes and exchanges them for tokens."""

    def __init__(self) -> None:
        self.codes: dict[str, str] = {}  # code -> account
        self.tokens: dict[str, str] = {}  # account -> access token

    def sign_in(self, account: str) -> str:
        """The user signed in on the provider's page: a one-time code for the redirect."""
        code = secrets.token_urlsafe(8)
        self.codes[code] = account
        return code

    def exchange(self, code: str) -> dict[str, str]:
        account = self.codes.pop(code)  # KeyError for a used or unknown code
        self.tokens[account] = secrets.token_urlsafe(16)
        return {"account": account}


provider = Provider()


def sign_in_url(elicitation_id: str) -> str:
    redirect = f"{PUBLIC_URL}/mcp/elicitation/complete/{elicitation_id}"
    query = urlencode({"client_id": "calendar-connect", "redirect_uri": redirect})
    return f"{PROVIDER_URL}/authorize?{query}"


@app.tool()
async def connect_calendar(ctx: Context) -> str:
    """Connect the user's calendar (they sign in on the provider's page)."""
    done = await ctx.elicit_url_done("Sign in to your calendar provider to connect it.",
                                     sign_in_url, key="sign-in")
    code = done.get("code", "") if isinstance(done, dict) else ""
    connected = await ctx.once("exchange", lambda: provider.exchange(code))
    return f"Calendar of {connected['account']} connected."


@app.tool(annotations=ToolAnnotations(destructive_hint=True))
async def disconnect_calendar(ctx: Context, account: str) -> str:
    """Disconnect a calendar and forget its access token."""
    if not await ctx.confirm(f"Disconnect the calendar of {account}? Its events stop syncing."):
        return f"Calendar of {account} stays connected."
    provider.tokens.pop(account, None)
    return f"Calendar of {account} disconnected."
