"""`mrtr serve` and `mrtr keys`: run a server, make requestState keys."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mrtr.auth import AuthSettings
    from mrtr.serving import ConnectionLimits

__all__ = ["register"]

EPHEMERAL_ENV = "MRTR_EPHEMERAL_KEY"

_SERVE_EXAMPLES = """\
examples:
  mrtr serve examples.bookings:app                 module:attribute, from the working directory
  mrtr serve examples/bookings.py:app --port 9000  file.py:attribute
  mrtr serve examples/bookings.py                  its app, mcp or server (or only Server)
  mrtr serve app.py:app --port 0                   any free port (the log shows which)
  mrtr serve app.py:app --stdio                    for `mrtr call --stdio` and desktop clients
  MRTR_STATE_KEYS=$(mrtr keys generate) mrtr serve app.py:app --host 0.0.0.0 \\
      --workers 4 --allow-host mcp.example.com

TARGET is a Server, a Dispatcher, an ASGI app (e.g. an McpApp) or a zero-argument function
returning one. requestState keys come from MRTR_STATE_KEYS (comma-separated, newest first).
Without it, one process on a loopback address (or --stdio) keeps its key in
$XDG_STATE_HOME/mrtr/requeststate.key (~/.local/state/...), mode 0600, so a restart keeps
forms in progress alive, and its exactly-once store beside it (store-<fingerprint>.db), so a
restart does not run a finished round again; --ephemeral-key or MRTR_EPHEMERAL_KEY=1 uses a
fresh key (and a store deleted at exit) instead.
"""

_KEYS_EXAMPLES = """\
examples:
  mrtr keys generate                                      print a new key
  export MRTR_STATE_KEYS=$(mrtr keys generate)            one key for every worker/replica
  MRTR_STATE_KEYS="$(mrtr keys generate),$OLD" mrtr serve app.py:app   rotate: new key first
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `serve` and `keys` subcommands."""
    serve = subparsers.add_parser(
        "serve",
        help="serve a Server over Streamable HTTP (uvicorn) or stdio",
        description="Serve TARGET over Streamable HTTP (uvicorn) or, with --stdio, over "
        "stdin/stdout.",
        epilog=_SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("target", metavar="TARGET", help="module:attribute or file.py:attribute, "
                       "e.g. examples.bookings:app or examples/bookings.py:app")
    serve.add_argument("--stdio", action="store_true",
                       help="serve stdin/stdout instead of HTTP (the HTTP options do not apply)")
    serve.add_argument("--store", default=None, metavar="URL",
                       help="where rounds and ctx.once are recorded for exactly-once: "
                       "sqlite:///path, redis://host:port/db (durable: appendonly yes, or "
                       "?allow_volatile=1), memory: or none (default MRTR_STORE, else a SQLite "
                       "file beside the key file, or a private one for this run's own key)")
    serve.add_argument("--allow-unshared-store", action="store_true",
                       help="serve --workers N with --store none or memory: anyway (each "
                       "worker then keeps its own records and tasks)")
    serve.add_argument("--log-level", default="info",
                       choices=["critical", "error", "warning", "info", "debug"],
                       help="info (the default) and debug write one line per MCP request "
                       "(logger mrtr.requests): method, target, outcome, round, duration")
    serve.add_argument("--log-format", default="text", choices=["text", "json"],
                       help="json: one JSON object per line with request_id, flow_id, round "
                       "and a principal digest (and the request line's method, target, "
                       "outcome, duration_ms), for log shippers (default text)")
    serve.add_argument("--access-log", action="store_true",
                       help="also log one line per HTTP request (uvicorn's access log)")
    serve.add_argument("--ask-timeout", type=float, default=600.0, metavar="SECONDS",
                       help="how long a 2025 (initialize) client has to answer each request "
                       "the server sends it mid-call before the call ends with an error "
                       "result (default 600)")
    http = serve.add_argument_group("HTTP options")
    http.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    http.add_argument("--port", type=int, default=8000,
                      help="TCP port, 0..65535; 0 picks a free one (default 8000)")
    http.add_argument("--path", default="/mcp", help="the MCP endpoint path (default /mcp)")
    http.add_argument("--workers", type=int, default=1,
                      help="worker processes (default 1; more need MRTR_STATE_KEYS to keep "
                      "flows across restarts)")
    http.add_argument("--allow-host", action="append", default=None, metavar="HOST[:PORT]",
                      help="also accept this host name in Host/Origin, on any port unless one "
                      "is given (repeatable; loopback names are always accepted)")
    http.add_argument("--forwarded-allow-ips", action="append", default=None, metavar="IPS",
                      help="believe X-Forwarded-For/-Proto only from these proxies: addresses "
                      "or networks, comma-separated or repeated, * for any (default: none; "
                      "the resource URL tokens must name never comes from them)")
    http.add_argument("--gc-threshold", type=int, default=None, metavar="N",
                      help="collect young objects every N allocations instead of Python's 700: "
                      "fewer collections, but garbage holding request bodies waits longer "
                      "(docs/deploy.md#garbage-collection)")
    http.add_argument("--debug-worker-header", action="store_true",
                      help="add Mcp-Debug-Worker: <pid> to HTTP replies (testing)")
    http.add_argument("--playground", action="store_true",
                      help="serve the browser playground at / (development; docs/playground.md)")
    http.add_argument("--force", action="store_true",
                      help="with --playground: serve it on a non-loopback --host too")
    _add_limit_options(serve)
    _add_auth_options(serve)
    keys = serve.add_argument_group("requestState keys")
    keys.add_argument("--ephemeral-key", action="store_true",
                      help="without MRTR_STATE_KEYS, use a fresh key for this run instead "
                      f"of the per-user key file (or set {EPHEMERAL_ENV}=1)")
    serve.set_defaults(run=_run_serve)

    manage = subparsers.add_parser(
        "keys", help="manage requestState keys",
        description="Make keys for MRTR_STATE_KEYS (comma-separated, newest first: the first "
        "key seals, every key opens).",
        epilog=_KEYS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = manage.add_subparsers(dest="action", metavar="ACTION", required=True)
    generate = actions.add_parser(
        "generate", help="print a new random key (for MRTR_STATE_KEYS)",
        description="Print a new random 32-byte key as unpadded base64url.",
        epilog=_KEYS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    generate.set_defaults(run=_run_generate)


def _run_serve(args: argparse.Namespace) -> int:
    from mrtr.serving._logging import applied, log_config

    # This process's own lines (before uvicorn starts, or --stdio) in the chosen format too;
    # put back on return, as stdout is: main() may be called in-process (tests, embedding).
    with applied(log_config(args.log_level, args.log_format, args.access_log)):
        return _serve_logged(args)


def _serve_logged(args: argparse.Namespace) -> int:
    from mrtr.serving._keyfile import default_key_file
    from mrtr.serving._serve import serve

    if args.force and not args.playground:
        print("mrtr serve: --force applies to --playground only", file=sys.stderr)
        return 2
    ephemeral = args.ephemeral_key or os.environ.get(EPHEMERAL_ENV, "") not in ("", "0")
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
            key_file=None if ephemeral else default_key_file(os.environ),
            allowed_hosts=args.allow_host,
            expose_worker=args.debug_worker_header,
            log_level=args.log_level,
            ask_timeout=args.ask_timeout,
            store=args.store,
            log_format=args.log_format,
            access_log=args.access_log,
            auth=_auth_settings(args),
            allow_unshared_store=args.allow_unshared_store,
            limits=_limits(args),
            forwarded_allow_ips=args.forwarded_allow_ips or (),
            playground=("force" if args.force else True) if args.playground else False,
            gc_threshold=args.gc_threshold,
        )
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"mrtr serve: {_flagged(exc)}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = stdout  # main() may be called in-process (tests, embedding)


def _add_limit_options(serve: argparse.ArgumentParser) -> None:
    # The defaults are ConnectionLimits' (a test checks): `mrtr call` must not import serving.
    limits = serve.add_argument_group(
        "connection limits (docs/deploy.md#slow-clients)",
        "What one client may hold, per worker; a connection past a deadline is closed.")
    limits.add_argument("--header-timeout", type=float, metavar="SECONDS",
                        help="a request's line and headers must arrive within this long of the "
                        "connection opening, or of their first byte on a kept-alive "
                        "connection (default 10)")
    limits.add_argument("--body-timeout", type=float, metavar="SECONDS",
                        help="a request's body must arrive within this long of its headers "
                        "(default 30)")
    limits.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                        help="how long a kept-alive connection may wait for its next request "
                        "(default 5)")
    limits.add_argument("--max-connections", type=int, metavar="N",
                        help="open connections per worker; requests beyond it get 503 "
                        "(default 1000)")
    limits.add_argument("--backlog", type=int, metavar="N",
                        help="connections the kernel queues before they are accepted "
                        "(default 2048)")


_LIMITS = ("header_timeout", "body_timeout", "idle_timeout", "max_connections", "backlog")


def _limits(args: argparse.Namespace) -> ConnectionLimits:
    from mrtr.serving import ConnectionLimits

    given = {name: getattr(args, name) for name in _LIMITS if getattr(args, name) is not None}
    return ConnectionLimits(**given)


def _add_auth_options(serve: argparse.ArgumentParser) -> None:
    auth = serve.add_argument_group(
        "OAuth resource server (docs/auth.md)",
        "Require a bearer access token from ISSUER on every HTTP request; each option "
        "defaults to its MRTR_AUTH_* environment variable.")
    auth.add_argument("--auth-issuer", metavar="URL",
                      help="the authorization server whose tokens are accepted; its keys come "
                      "from its RFC 8414 / OpenID metadata (MRTR_AUTH_ISSUER)")
    auth.add_argument("--auth-audience", action="append", metavar="AUD",
                      help="accepted token audience (repeatable; default: the resource URL, "
                      "e.g. https://host/mcp) (MRTR_AUTH_AUDIENCE)")
    auth.add_argument("--auth-scopes", metavar="'SCOPE ...'",
                      help="scopes every request needs, space- or comma-separated "
                      "(MRTR_AUTH_SCOPES)")
    auth.add_argument("--auth-resource", metavar="URL",
                      help="the public URL of the MCP endpoint, the audience tokens must name "
                      "(default: http://HOST:PORT/PATH of this run, never a request's Host; "
                      "needed off loopback and behind a proxy) (MRTR_AUTH_RESOURCE)")
    auth.add_argument("--auth-jwks-uri", metavar="URL",
                      help="fetch keys here instead of from the issuer's metadata "
                      "(MRTR_AUTH_JWKS_URI)")
    auth.add_argument("--auth-skip-typ-check", action="store_true",
                      help="accept JWTs whose header typ is not at+jwt (RFC 9068), for an "
                      "issuer that omits it or sends JWT; ID tokens for this audience then "
                      "pass too (MRTR_AUTH_REQUIRE_AT_JWT=0)")
    auth.add_argument("--auth-dpop", choices=("off", "allow", "require"),
                      help="DPoP (RFC 9449): accept sender-constrained tokens with a proof "
                      "(allow), or only those (require); each proof is single-use across "
                      "replicas sharing --store (default: off) (MRTR_AUTH_DPOP)")
    auth.add_argument("--auth-dpop-nonce", action="store_true",
                      help="DPoP proofs must carry a nonce this server issued (use_dpop_nonce); "
                      "replicas accept each other's when they share MRTR_STATE_KEYS "
                      "(MRTR_AUTH_DPOP_NONCE=1)")


def _auth_settings(args: argparse.Namespace) -> AuthSettings | None:
    """AuthSettings from --auth-* over MRTR_AUTH_*, or None when neither names an issuer."""
    flags = (args.auth_issuer, args.auth_audience, args.auth_scopes, args.auth_resource,
             args.auth_jwks_uri, args.auth_skip_typ_check, args.auth_dpop, args.auth_dpop_nonce)
    if not any(flags) and not any(k.startswith("MRTR_AUTH_") for k in os.environ):
        return None  # a server without auth never loads it
    from mrtr.auth import AuthSettings

    scopes = tuple((args.auth_scopes or "").replace(",", " ").split())
    settings = AuthSettings.from_env(
        os.environ, issuer=args.auth_issuer, audience=tuple(args.auth_audience or ()),
        scopes=scopes, resource=args.auth_resource, jwks_uri=args.auth_jwks_uri,
        require_at_jwt=False if args.auth_skip_typ_check else None, dpop=args.auth_dpop,
        dpop_nonce=True if args.auth_dpop_nonce else None)
    if settings is None and any(flags):
        raise ValueError("--auth-* options need --auth-issuer (or MRTR_AUTH_ISSUER)")
    return settings


def _flagged(exc: Exception) -> str:
    """serve()'s settings errors name parameters; on the command line they are options."""
    text = str(exc)
    for name in ("port", "workers", "path", "ask-timeout", "header-timeout", "body-timeout",
                 "idle-timeout", "max-connections", "backlog", "forwarded-allow-ips",
                 "gc-threshold"):
        if text.startswith(f"{name} must "):
            return f"--{text}"
    return text


def _run_generate(args: argparse.Namespace) -> int:
    from mrtr.server import generate_key

    print(generate_key())
    return 0
