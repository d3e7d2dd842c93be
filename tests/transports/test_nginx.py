"""`mrtr serve` behind a real nginx reverse proxy, started with no extra flags."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.transports.conftest import (
    call,
    free_port,
    post_args,
    request,
    spawn_cli,
    stop,
    wait_ready,
)

NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).is_file()), None)

CONFIG = """
daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream mrtr {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mrtr;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;  # the usual setting: the name the client used
            proxy_set_header Connection "";
            proxy_buffering off;
{extra}
        }}
    }}
}}
"""


def start_nginx(
    tmp: Path, port: int, upstreams: list[int], *, extra: str = ""
) -> subprocess.Popen[bytes]:
    """nginx on `port`, round-robin over `upstreams`, `extra` directives in its location."""
    assert NGINX is not None
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstreams)
    (tmp / "nginx.conf").write_text(
        CONFIG.format(tmp=tmp, port=port, servers=servers, extra=extra))
    with (tmp / "nginx.stderr").open("wb") as err:
        process = subprocess.Popen(
            [NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log")],
            stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"nginx exited: {(tmp / 'nginx.stderr').read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    stop(process)
    raise AssertionError("nginx did not start listening")


@pytest.mark.slow
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx)")
def test_serve_behind_nginx_without_extra_flags_issue_11(tmp_path: Path) -> None:
    upstream, port = free_port(), free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        server = spawn_cli("serve", "tests.transports.apps:app", "--port", str(upstream),
                           "--log-level", "warning", stdout=subprocess.DEVNULL, stderr=log)
    proxy: subprocess.Popen[bytes] | None = None
    try:
        wait_ready(f"http://127.0.0.1:{upstream}/mcp", server)
        proxy = start_nginx(tmp_path, port, [upstream])
        url = f"http://127.0.0.1:{port}/mcp"
        with httpx.Client(timeout=10) as client:
            def post(body: dict[str, Any], **headers: str) -> httpx.Response:
                return client.post(url, **post_args(body, **headers))

            # Host: 127.0.0.1:<nginx port> reaches mrtr serve, which is bound to another port.
            params: dict[str, Any] = {}
            for name, value in (("name", "Ada"), ("color", "teal"), (None, None)):
                response = post(call("greet", **params),
                                origin=f"http://localhost:{port}")
                assert response.status_code == 200, response.text
                result = response.json()["result"]
                if name is not None:
                    params = {"requestState": result["requestState"], "inputResponses": {
                        name: {"action": "accept", "content": {name: value}}}}
            assert result["content"][0]["text"] == "Hello Ada, you like teal"
            streamed = post(call("count", {"steps": 2}, extra_meta={"progressToken": "t"}))
            assert streamed.headers["content-type"] == "text/event-stream"
            assert streamed.text.count("notifications/progress") == 2
            hostile = post(request("server/discover"), host="mcp.example.com")
            assert hostile.status_code == 403
            assert "--allow-host mcp.example.com" in hostile.json()["error"]["message"]
    except AssertionError:
        print(log_path.read_text())
        if (tmp_path / "error.log").exists():
            print((tmp_path / "error.log").read_text())
        raise
    finally:
        if proxy is not None:
            stop(proxy)
        stop(server)
