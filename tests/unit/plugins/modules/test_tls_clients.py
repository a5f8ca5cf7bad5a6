# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's clients over https://, against a real TLS server on 127.0.0.1 with a private CA."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._endpoint_probe import EndpointProbe, Unreachable
from ansible_collections.llmops.vllm.plugins.module_utils._load_generation import fetch_text
from ansible_collections.llmops.vllm.plugins.module_utils._tls import client_context
from ansible_collections.llmops.vllm.plugins.modules import wait_for_drain

from wait_fakes import run_module

METRICS = b"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1.0\n"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A private CA and a server certificate for 127.0.0.1 that it signed, made with the openssl tool."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    where = tmp_path_factory.mktemp("tls")

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=llmops test CA",
            "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
            "-out", "server.csr")
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n", encoding="utf-8")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", "server.pem")
    return where


@pytest.fixture
def https_server(certificates):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = METRICS if self.path == "/metrics" else b""
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certificates / "server.pem"), str(certificates / "server.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "https://127.0.0.1:%d" % server.server_address[1], str(certificates / "ca.pem")
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_signed_by_the_given_ca_is_trusted(https_server):
    url, ca_path = https_server
    assert fetch_text(url + "/metrics", 5, client_context(ca_path=ca_path)).encode() == METRICS


def test_a_server_the_system_cas_do_not_know_is_refused(https_server):
    url, dummy = https_server
    with pytest.raises(ssl.SSLCertVerificationError):
        fetch_text(url + "/metrics", 5, client_context())


def test_without_validation_the_traffic_is_still_encrypted_but_unchecked(https_server):
    url, dummy = https_server
    assert fetch_text(url + "/metrics", 5, client_context(validate_certs=False)).encode() == METRICS


def test_the_readiness_probe_uses_the_context(https_server):
    url, ca_path = https_server
    assert EndpointProbe(url, ssl_context=client_context(ca_path=ca_path)).request("/health").status == 200
    with pytest.raises(Unreachable) as refused:
        EndpointProbe(url, ssl_context=client_context()).request("/health")
    assert "CERTIFICATE_VERIFY_FAILED" in refused.value.reason


def test_the_drain_reads_the_gauges_over_tls(https_server):
    url, ca_path = https_server
    assert wait_for_drain.read_in_flight(url + "/metrics", 5, client_context(ca_path=ca_path)) == (2.0, 1.0)


def test_a_drain_that_cannot_check_the_certificate_fails_instead_of_counting_nothing(monkeypatch, https_server):
    url, dummy = https_server

    failed, result = run_module(monkeypatch, wait_for_drain, {"metrics_url": url + "/metrics", "timeout": 5})

    assert failed
    assert result["msg"].startswith("Cannot read %s/metrics over TLS, so the requests in flight are unknown: " % url)
    assert "certificate verify failed" in result["msg"]
    assert result["msg"].endswith("(see validate_certs and ca_path)")
