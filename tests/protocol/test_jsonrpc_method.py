"""MethodTagged.method: the class's tag, read once per class and then a plain attribute."""

from __future__ import annotations

import msgspec

from mrtr import protocol
from mrtr.protocol import MethodTagged


def _tagged() -> list[type]:
    found, todo = [], [MethodTagged]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            found.append(sub)
            todo.append(sub)
    return found


def test_every_message_class_names_its_tag() -> None:
    classes = _tagged()
    assert protocol.CallToolRequest in classes and len(classes) > 20
    for cls in classes:
        tag = str(cls.__struct_config__.tag)
        assert cls.method == tag
        assert cls.__dict__["method"] == tag  # kept on the class after the first read


def test_an_instance_reads_its_own_classs_tag() -> None:
    meta = {protocol.PROTOCOL_VERSION_KEY: protocol.PROTOCOL_VERSION,
            protocol.CLIENT_CAPABILITIES_KEY: {}}
    for method, params in (("tools/list", {}), ("tools/call", {"name": "echo"})):
        body = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": method,
                                    "params": {**params, "_meta": meta}})
        request = protocol.decode_client_message(body)
        assert request.method == method
        assert msgspec.json.encode(request).startswith(b'{"method":"%s"' % method.encode())
