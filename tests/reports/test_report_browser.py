"""A real headless Chromium opens the report from a file URL: the verdict renders, nothing is fetched.

How "no request left the page" is observed: Chromium writes every network event to a NetLog
(``--log-net-log``). A proxy that records requests was the alternative, but it only sees what
Chromium chooses to proxy, while the NetLog sees every URL request the network stack starts. The
browser makes a few requests of its own even with background networking disabled (component
updater, account checks); those carry the initiator "not an origin", whereas anything the page
asks for carries the page's opaque ``file://`` origin. ``page_requests`` keeps the latter, and
``test_netlog_catches_a_page_request`` proves on a page that does fetch that it finds them.

The screenshot is kept under ``test-artifacts/`` for a person to look at.
"""

from __future__ import annotations

import http.server
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from reports import render_html
from tests.support import system
from tests.support.html_dom import inventory
from tests.support.report_cases import real_buffering_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-quic", "--hide-scrollbars",
]

pytestmark = [
    pytest.mark.chromium,
    system.needs(CHROMIUM, "chromium is not installed (Debian: apt-get install -y chromium)"),
]


def chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One headless run with a fresh, empty profile; ``args`` picks the action (dump DOM, screenshot)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url],
                          capture_output=True, text=True, timeout=120, check=True)


def page_requests(netlog: Path) -> list[str]:
    """URLs whose request was started on behalf of the page (not by the browser itself)."""
    log = json.loads(netlog.read_text())
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if (event["type"] == start_job and "url" in params
                and (params.get("initiator") != "not an origin" or "file://" in params.get("network_isolation_key", ""))):
            urls.append(params["url"])
    return urls


def open_page(tmp_path: Path, html: str, name: str) -> tuple[str, list[str]]:
    """The DOM Chromium built from ``html`` and the requests the page made."""
    page = tmp_path / name
    page.write_text(html, encoding="utf-8")
    netlog = tmp_path / f"{name}.netlog.json"
    run = chromium(tmp_path, page.as_uri(), f"--log-net-log={netlog}", "--dump-dom")
    return run.stdout, page_requests(netlog)


@pytest.fixture(scope="module")
def html() -> str:
    return render_html(real_buffering_report())


def test_verdict_renders_and_no_request_leaves_the_page(tmp_path: Path, html: str) -> None:
    dom, requests = open_page(tmp_path, html, "report.html")
    assert requests == []
    inv = inventory(dom)
    ids = [attrs.get("id") for _, attrs in inv.tags]
    assert ids.index("verdict") < ids.index("evidence") < ids.index("charts")
    text = " ".join(" ".join(inv.text).split())
    assert "proxy-only The gateway, not the engine, adds the latency" in text
    assert "Change one thing: proxy_buffering → off" in text
    assert sum(1 for tag, _ in inv.tags if tag == "svg") >= 5


def test_no_request_even_without_the_csp(tmp_path: Path, html: str) -> None:
    """The CSP would block a stray reference; the page must not have one to block."""
    without_csp = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    assert without_csp != html
    _, requests = open_page(tmp_path, without_csp, "report-no-csp.html")
    assert requests == []


def test_netlog_catches_a_page_request(tmp_path: Path) -> None:
    """The detector itself: a page that loads an image from a local server is caught."""
    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/pixel.png"
        _, requests = open_page(tmp_path, f'<!doctype html><p>canary</p><img src="{url}">', "canary.html")
    finally:
        server.shutdown()
        server.server_close()
    assert requests == [url]
    assert seen == ["/pixel.png"]


def test_screenshot_is_kept_as_an_artifact(tmp_path: Path, html: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    shot = ARTIFACTS / "report-proxy-buffering.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1280,2400")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copy(page, ARTIFACTS / "report-proxy-buffering.html")


#: Run in the page after layout (the test's copy only, without the CSP that forbids scripts): where
#: each chart's row label starts in its SVG's units, and on how many lines each startup-log key lies.
MEASURE = """<script>
const labels = [...document.querySelectorAll("svg text.rowlabel")].map(t => [t.textContent, t.getBBox().x]);
const keys = [...document.querySelectorAll("table.facts td:first-child")].map(td => {
  const range = document.createRange(); range.selectNodeContents(td);
  const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
  return [td.textContent, tops.size];
});
document.body.setAttribute("data-layout", JSON.stringify({labels, keys}));
</script>"""


def laid_out(tmp_path: Path, html: str, width: int) -> dict[str, list[list[object]]]:
    page = tmp_path / f"layout-{width}.html"
    page.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
                    .replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = chromium(tmp_path, page.as_uri(), "--dump-dom", f"--window-size={width},2000").stdout
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found, "the measuring script did not run"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.parametrize("width", [1280, 420])
def test_chart_labels_and_log_keys_are_whole(tmp_path: Path, html: str, width: int) -> None:
    """A decomposition bar's label ("gateway TTFT mean") ran off the chart's left edge, and a
    narrow window broke startup-log keys inside a word ("max_model_l / en")."""
    layout = laid_out(tmp_path, html, width)
    assert any("TTFT" in text for text, _ in layout["labels"]), layout["labels"]
    for text, x in layout["labels"]:
        assert x >= 0, (text, x)
    assert len(layout["keys"]) > 5
    for key, lines in layout["keys"]:
        assert lines == 1, key
