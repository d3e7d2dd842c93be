"""One name, one meaning (#24): no public name denotes two objects; old names warn, still work."""

from __future__ import annotations

import importlib
import warnings
from collections import defaultdict

import pytest

PUBLIC = ("mrtr", "mrtr.auth", "mrtr.client", "mrtr.client.auth", "mrtr.client.transports",
          "mrtr.errors", "mrtr.http", "mrtr.protocol", "mrtr.server", "mrtr.serving",
          "mrtr.stdio", "mrtr.stores", "mrtr.testing")

# The one name allowed two objects, each with the reason. `mrtr.Server` is the server core's
# Server plus run() and http_app(): one concept, and the core cannot import the runner.
SAME_CONCEPT = {"Server": ("mrtr", "mrtr.server")}

# (module, old name, the name it now is, where that lives)
DEPRECATED = [
    ("mrtr.server", "NotificationSink", "Notifier", "mrtr.server"),
    ("mrtr.server", "Telemetry", "ServerTelemetry", "mrtr.server"),
    ("mrtr.client", "NotificationSink", "MessageSink", "mrtr.client"),
    ("mrtr.client", "Telemetry", "ClientTelemetry", "mrtr.client"),
    ("mrtr.client.transports", "NotificationSink", "MessageSink", "mrtr.client.transports"),
    ("mrtr.client.auth", "Send", "HTTPSend", "mrtr.client.auth"),
    ("mrtr.client.auth", "Step", "AuthStep", "mrtr.client.auth"),
    ("mrtr.serving", "ServerApp", "McpApp", "mrtr.http"),
    ("mrtr.transports", "ServerApp", "McpApp", "mrtr.http"),
]


def holders() -> dict[str, dict[int, list[str]]]:
    """Each public name: the objects it denotes (by id), with the modules exporting each."""
    found: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for module in PUBLIC:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            found[name][id(getattr(mod, name))].append(module)
    return found


def test_24_no_public_name_denotes_two_objects() -> None:
    ambiguous = {name: sorted(m for ms in objects.values() for m in ms)
                 for name, objects in holders().items() if len(objects) > 1}
    assert ambiguous == {name: sorted(modules) for name, modules in SAME_CONCEPT.items()}
    import mrtr
    import mrtr.server

    assert issubclass(mrtr.Server, mrtr.server.Server)


def test_24_the_check_sees_a_name_that_denotes_two_objects() -> None:
    import mrtr.client
    import mrtr.server

    mrtr.client.__all__.append("Dispatcher")
    mrtr.client.Dispatcher = object  # type: ignore[attr-defined]
    try:
        assert len(holders()["Dispatcher"]) == 2
    finally:
        mrtr.client.__all__.remove("Dispatcher")
        del mrtr.client.Dispatcher  # type: ignore[attr-defined]
    assert len(holders()["Dispatcher"]) == 1 and mrtr.server.Dispatcher


@pytest.mark.parametrize(("module", "old", "new", "home"), DEPRECATED,
                         ids=[f"{m}.{o}" for m, o, _, _ in DEPRECATED])
def test_24_an_old_name_warns_and_is_the_new_object(module: str, old: str, new: str,
                                                    home: str) -> None:
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=new):
        value = getattr(mod, old)
    assert value is getattr(importlib.import_module(home), new)
    assert old not in getattr(mod, "__all__", ()) or module == "mrtr.transports"
    with warnings.catch_warnings(), pytest.raises(ImportError):
        warnings.simplefilter("ignore")
        exec(f"from {module} import NoSuchName{old}", {})  # other names still fail
