"""Start-up checks of an McpApp's store: one that several workers would not share."""

from __future__ import annotations

import logging
import sys

from mrtr.server import Dispatcher
from mrtr.stores import MemoryStore

__all__ = ["warn_unshared_store"]


def warn_unshared_store(dispatcher: Dispatcher, log: logging.Logger) -> None:
    """Warn at start-up when this process is likely one of several workers (its parent is a
    Python process manager: uvicorn or hypercorn --workers or --reload, gunicorn) and its store is
    its own (in memory, or none): a replay that reaches another worker would run again."""
    import multiprocessing  # only here: a plain import of the app does not pay for it

    store = dispatcher.store
    if store is not None and not isinstance(store, MemoryStore):
        return
    if multiprocessing.parent_process() is None and "gunicorn" not in sys.modules:
        return
    log.warning("this process was started by another (workers or a reloader) and its store is "
                "%s: if it is one of several workers, a round replayed to another one runs "
                "again and its tasks are its own: give every worker one store, sqlite:///path "
                "on one machine or redis://host across machines (MRTR_STORE for mrtr serve and "
                "http_app(), Dispatcher(store=...) by hand)",
                "in memory" if store is not None else "none")
