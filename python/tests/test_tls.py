"""A server whose TLS certificate the client does not trust (self-signed, as an operator
makes one with openssl for ``lakeshore serve --tls-cert``)."""

from __future__ import annotations

import http.server
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakeshore import HttpDispatch, SyncQueue, errors


class _Counting(http.server.HTTPServer):
    connections = 0

    def get_request(self) -> tuple[socket.socket, Any]:
        type(self).connections += 1
        return super().get_request()


@pytest.fixture
def untrusted_server(tmp_path: Path) -> Iterator[str]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed (apt-get install openssl)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    _Counting.connections = 0
    httpd = _Counting(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_untrusted_certificate_fails_at_once_saying_how_to_trust_it(
    untrusted_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call fails after one connection with UnavailableError naming SSL_CERT_FILE; before
    (2026-12-07) it was retried for about 14 s and then asked whether `lakeshore serve` was
    running, which it was."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    d = HttpDispatch(untrusted_server, token="t")
    try:
        with pytest.raises(errors.UnavailableError) as info:
            SyncQueue("q", dispatch=d).count()
    finally:
        d.close()
    assert "SSL_CERT_FILE" in str(info.value)
    assert "is `lakeshore serve` running" not in str(info.value)
    assert _Counting.connections == 1
