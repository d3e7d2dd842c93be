"""`mrtr serve` and `mrtr keys`: run a server, make requestState keys."""

from __future__ import annotations

import argparse
import sys

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `serve` and `keys` subcommands."""
    serve = subparsers.add_parser(
        "serve",
        help="serve a Server over Streamable HTTP (uvicorn) or stdio",
        description="Serve module:attribute or path/to/file.py:attribute (a Server, a Dispatcher "
        "or a factory of either). requestState keys come from MRTR_STATE_KEYS "
        "(comma-separated, newest first).",
    )
    serve.add_argument("target", help="module:attribute or file.py:attribute, "
                       "e.g. examples.bookings:app or examples/bookings.py:app")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    serve.add_argument("--workers", type=_positive, default=1, help="worker processes")
    serve.add_argument("--path", default="/mcp", help="the MCP endpoint path (default /mcp)")
    serve.add_argument("--stdio", action="store_true", help="serve stdin/stdout instead of HTTP")
    serve.add_argument("--allow-host", action="append", default=None, metavar="HOST[:PORT]",
                       help="also accept this host name in Host/Origin, on any port unless one "
                       "is given (repeatable; loopback names are always accepted)")
    serve.add_argument("--debug-worker-header", action="store_true",
                       help="add Mcp-Debug-Worker: <pid> to HTTP replies (testing)")
    serve.add_argument("--log-level", default="info",
                       choices=["critical", "error", "warning", "info", "debug"])
    serve.set_defaults(run=_run_serve)

    keys = subparsers.add_parser("keys", help="manage requestState keys")
    actions = keys.add_subparsers(dest="action", metavar="ACTION", required=True)
    generate = actions.add_parser("generate", help="print a new random key (for MRTR_STATE_KEYS)")
    generate.set_defaults(run=_run_generate)


def _run_serve(args: argparse.Namespace) -> int:
    from mrtr.transports._serve import serve

    stdout = sys.stdout
    if args.stdio:
        # stdout belongs to the protocol: stray print() calls in tools must not corrupt it.
        sys.stdout = sys.stderr
    try:
        return serve(
            args.target,
            host=args.host,
            port=args.port,
            workers=args.workers,
            path=args.path,
            stdio=args.stdio,
            allowed_hosts=args.allow_host,
            expose_worker=args.debug_worker_header,
            log_level=args.log_level,
        )
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"mrtr serve: {exc}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout  # main() may be called in-process (tests, embedding)


def _run_generate(args: argparse.Namespace) -> int:
    from mrtr.server import generate_key

    print(generate_key())
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
