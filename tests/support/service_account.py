"""A pod's service account directory (token, CA, namespace) and the TLS context of an API server
whose certificate that CA is: what an in-cluster client reads, made with the openssl command."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

from tests.support import system

NEEDS_OPENSSL = system.needs(shutil.which("openssl"), "needs the openssl command to make a certificate (apt-get install openssl)")
TOKEN = "sa-token-123"


def service_account(tmp_path: Path, namespace: str = "inference") -> tuple[Path, ssl.SSLContext]:
    """(the service account directory, a server TLS context for 127.0.0.1 that its ca.crt trusts)."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tmp_path / "key.pem"), "-out", str(account / "ca.crt")],
                   check=True, capture_output=True)
    (account / "token").write_text(f"{TOKEN}\n")
    (account / "namespace").write_text(namespace)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(account / "ca.crt", tmp_path / "key.pem")
    return account, tls
