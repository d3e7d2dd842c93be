"""2025 sessions: `initialize` clients (2025-11-25 and earlier) served by the same handlers.

`_session` holds the sealed session id and what one session keeps in process, `_server` is
the SessionServer that answers them (pushed asks), `_answers` carries an answer that reached
another worker or replica.
"""

from mrtr.server.sessions._server import SessionServer
from mrtr.server.sessions._session import Session

__all__ = ["Session", "SessionServer"]
