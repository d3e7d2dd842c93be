"""A round is named by its state's GCM nonce (#31): one draw from the system's random source per
sealed state, not two. The name is still sealed in the body, so states sealed before (a round id
of 16 random bytes of its own) are redeemed exactly once, as every state sealed now."""

from __future__ import annotations

import asyncio
import binascii
from typing import Any

import msgspec

from mrtr.server import Binding, Dispatcher, Sealer
from mrtr.server._journal import decode_flow
from mrtr.server._sealing import digest_arguments
from mrtr.stores import MemoryStore
from tests.server.test_ledger_writes import PEER, Effects, answer, body, branching_server

CLOCK = 4e9  # the clock the state below was sealed with (its deadlines are far ahead)
KEY = b"k" * 32
BINDING = Binding(method="tools/call", target="pay", arguments_digest=digest_arguments({}),
                  principal=None)
# Round 1 of `pay` sealed by the code before this change (ca638e0), Sealer(keys=[KEY],
# audience="shop", clock=lambda: CLOCK): its round id is 32 hex digits of its own.
OLD_STATE = (
    "v1.K0TribFbr6Al9jD_QMo7i_cNMMmiMUpXFwP9ydIgib9sfpsNZpZ6ryqTkD52nhGBxDxLPH4RK6fVB5yyMK2pOUQDZ"
    "rBzVG16eZXhCUQI5q9dw0zmi-e19spChbwFqP6NFJks5IbPSs5XED4TWfaW1RKsUnkTigsl2Sdqyi9MbOgzsB4n7L9us"
    "6PmNSx2XLN2LKATjn0YTiB5iY_me-n9y-lVu-A3lJ9wI8h1qzKVXc__JQTno_OrUTm1fS4ra5yEoJWT1z_k1Xo-5fhNJ"
    "H_CI3aFa_fFZLAgtjEkuIwea1Zt-Mxixw"
)


def sealer() -> Sealer:
    return Sealer(keys=[KEY], audience="shop", clock=lambda: CLOCK + 60)


def nonce_of(state: str) -> bytes:
    text = state.removeprefix("v1.")
    blob = binascii.a2b_base64((text + "=" * (-len(text) % 4)).translate(
        bytes.maketrans(b"-_", b"+/")))
    return blob[8:20]  # kid(8) ‖ nonce(12) ‖ ciphertext


def round_id(state: str) -> str:
    return decode_flow(sealer().unseal(state, BINDING).body).round_id


def test_31_a_state_sealed_before_is_redeemed_once_and_replayed_byte_for_byte() -> None:
    old_id = round_id(OLD_STATE)
    assert len(old_id) == 32 and bytes.fromhex(old_id) != nonce_of(OLD_STATE)  # the old format
    effects = Effects()

    async def go() -> list[bytes]:
        dispatcher = Dispatcher(branching_server(effects), sealer=sealer(), store=MemoryStore())

        async def send(request_id: int, invoice: str) -> bytes:
            params = {"requestState": OLD_STATE,
                      "inputResponses": {"which": answer({"id": invoice})}}
            reply = await dispatcher.handle_bytes(body(request_id, "pay", params), PEER)
            assert reply is not None
            return reply.body

        burst = await asyncio.gather(*(send(1, f"INV-{i % 2}") for i in range(6)))
        return [*burst, await send(1, effects.charged[0])]

    replies = asyncio.run(go())
    # Without the old round id read from the body, the duplicates would each pay.
    assert len(effects.charged) == 1, effects.charged
    paid = effects.charged[0]
    winners = [r for r in replies if b'"result"' in r]
    assert len(winners) == 4 and len(set(winners)) == 1  # the later replay too, byte for byte
    assert msgspec.json.decode(winners[0])["result"]["content"][0]["text"] == f"CH-{paid}"
    errors = [msgspec.json.decode(r)["error"]["code"] for r in replies if r not in winners]
    assert errors == [-32602] * 3


def test_31_a_round_is_named_by_its_states_nonce() -> None:
    async def go() -> list[Any]:
        dispatcher = Dispatcher(branching_server(Effects()), sealer=sealer(), store=MemoryStore())
        states = []
        for request_id in (1, 2):
            reply = await dispatcher.handle_bytes(body(request_id, "pay", {}), PEER)
            assert reply is not None
            states.append(msgspec.json.decode(reply.body)["result"]["requestState"])
        return states

    states = asyncio.run(go())
    ids = [round_id(state) for state in states]
    assert ids == [nonce_of(state).hex() for state in states]
    assert ids[0] != ids[1]


def test_31_without_a_store_a_state_names_no_round() -> None:
    async def go() -> str:
        dispatcher = Dispatcher(branching_server(Effects()), sealer=sealer(), store=None)
        reply = await dispatcher.handle_bytes(body(1, "pay", {}), PEER)
        assert reply is not None
        return str(msgspec.json.decode(reply.body)["result"]["requestState"])

    assert round_id(asyncio.run(go())) == ""
