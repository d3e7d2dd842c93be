"""2025 sessions: `initialize` clients (2025-11-25 and earlier) served by the same handlers.

`_session` holds the sealed session id and what one session keeps in process, `_table` the
sessions of a process (their caps, and terminations every process sees), `_server` the
SessionServer that answers them (pushed asks), `_era` rewrites requests and replies between
the eras, `_answers` carries an answer that reached another worker or replica.
"""

from mrtr.server.sessions._server import SessionServer
from mrtr.server.sessions._session import Session
from mrtr.server.sessions._table import SessionLimits

__all__ = ["Session", "SessionLimits", "SessionServer"]
