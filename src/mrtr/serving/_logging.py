"""Log records that name their request: a context filter, JSON lines, `mrtr serve`'s config."""

# Design: the Dispatcher puts a Probe (request id, flow id, round, principal) in a ContextVar
# for the request's duration (server/_probe.py); RequestContext copies it onto every record a
# handler sees, whatever logger made it (sealing, ledger, stores, the user's tools). The
# principal is logged as a digest only, and bearer tokens in messages are masked: secrets never
# reach a log shipper. The request line (`mrtr.requests`, server/_request_log.py) carries its
# own fields as record attributes; JSON writes them as keys. `log_config` is a logging.config
# dict, which uvicorn applies in every worker process as well.
from __future__ import annotations

import contextlib
import json
import logging
import logging.config
import re
import time
from collections.abc import Iterator
from typing import Any

import msgspec

from mrtr.server._probe import current_probe

__all__ = ["JsonFormatter", "RequestContext", "TextFormatter", "announce", "applied",
           "log_config"]

_log = logging.getLogger("mrtr.serve")

FORMATS = ("text", "json")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
_FIELDS = ("request_id", "flow_id", "round", "principal")
# The request line's fields (docs/operations.md), written by JsonFormatter when a record has them.
_LINE_FIELDS = ("method", "target", "outcome", "code", "is_error", "replayed", "duration_ms",
                # and the consent line's (`mrtr.consent`, docs/consent.md)
                "consent", "tool", "question", "consent_id")
_ENCODER = msgspec.json.Encoder(enc_hook=str)  # any other value is written as its str()


class RequestContext(logging.Filter):
    """Adds request_id, flow_id, round and principal (a digest) to each record; "-" outside."""

    def filter(self, record: logging.LogRecord) -> bool:
        probe = current_probe()
        if probe is None:
            for name in _FIELDS:
                if not hasattr(record, name):
                    setattr(record, name, "-")
            return True
        record.request_id = str(probe.request_id)
        record.flow_id = probe.flow_id or "-"
        record.round = probe.round
        record.principal = probe.principal_digest
        return True


def _masked(text: str) -> str:
    return _BEARER.sub(lambda m: f"{m.group(1)} ***", text)


class TextFormatter(logging.Formatter):
    """`LEVEL logger: message`, plus `[request= flow= round= principal=]` inside a request."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = _masked(super().format(record))
        request = getattr(record, "request_id", "-")
        if request == "-":
            return text
        if not str(request).isprintable():  # a client's id: no newline may forge a line
            request = repr(request)
        return (f"{text} [request={request} flow={getattr(record, 'flow_id', '-')} "
                f"round={getattr(record, 'round', '-')} "
                f"principal={getattr(record, 'principal', '-')}]")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the request fields (and the
    request line's: method, target, outcome, code, duration_ms, …), exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _masked(record.getMessage()),
        }
        for name in _FIELDS:
            value = getattr(record, name, "-")
            if value != "-":
                entry[name] = value
        for name in _LINE_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = _masked(self.formatException(record.exc_info))
        try:
            return _ENCODER.encode(entry).decode()  # a fifth of json.dumps's time
        except (TypeError, ValueError, OverflowError):  # what msgspec cannot carry, as text
            return json.dumps(entry, default=str)


def log_config(level: str = "info", log_format: str = "text",
               access_log: bool = False) -> dict[str, Any]:
    """A logging.config dict for `mrtr serve` (and uvicorn's `log_config`).

    Every logger propagates to one stderr handler with RequestContext; uvicorn's access log
    (one line per HTTP request) goes there too when `access_log`. Raises ValueError for an
    unknown `log_format`.
    """
    if log_format not in FORMATS:
        raise ValueError(f"log-format must be one of {', '.join(FORMATS)}, got {log_format!r}")
    formatter = "mrtr.serving._logging." + ("JsonFormatter" if log_format == "json"
                                               else "TextFormatter")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request": {"()": "mrtr.serving._logging.RequestContext"}},
        "formatters": {"mrtr": {"()": formatter}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                "formatter": "mrtr", "filters": ["request"]}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True, "level": level.upper()},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": access_log,
                               "level": "INFO" if access_log else "CRITICAL"},
        },
    }


@contextlib.contextmanager
def applied(config: dict[str, Any]) -> Iterator[None]:
    """Apply a `log_config` dict for the block, then put back what it set on the root logger
    and the loggers it names (level, handlers, propagation), closing the handlers it made:
    `mrtr serve` called in-process (tests, embedding) leaves logging as it found it."""
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in config["loggers"])]
    saved = [(logger, logger.level, logger.handlers[:], logger.propagate) for logger in loggers]
    try:
        logging.config.dictConfig(config)
        yield
    finally:
        kept = {handler for _, _, handlers, _ in saved for handler in handlers}
        made = {handler for logger in loggers for handler in logger.handlers} - kept
        for logger, level, handlers, propagate in saved:
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate
        for handler in made:
            handler.close()


def announce(host: str, port: int, path: str) -> None:
    """Log the URL a local client should use (a wildcard bind address is not a host name)."""
    if host in ("0.0.0.0", "::", ""):
        shown = "[::1]" if host == "::" else "127.0.0.1"
        _log.info("serving on http://%s:%d%s (bound to %s; clients on other hosts need a "
                  "name given with --allow-host)", shown, port, path, host or "0.0.0.0")
    else:
        _log.info("serving on http://%s:%d%s", f"[{host}]" if ":" in host else host, port, path)
