"""Failed requests users felt are a headline, not a footnote (issue 30 item 3).

Behind Caddy, 5 of 12 gateway streams were cut: the report showed a green HEALTHY badge with
"5 of 24 requests failed; findings to review: 1 critical (LD501)" inside its sentence, exit 1 and
no change to make. A felt critical error finding makes the verdict: the gateway's when only its
requests failed while the direct path succeeded, else "not healthy", with LD501's one remediation.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.cli import app
from doctor.evidence import RequestTrace
from doctor.exit_codes import ExitCode
from doctor.model import Budgets, Symptom
from tests.support.bundles import bundle, request, stream
from tests.support.gateways_real import needs, run_gateway
from tests.support.sse_server import SseServer

REGISTRY = load_registry(plugins=False)
SSE = {"content-type": "text/event-stream; charset=utf-8", "transfer-encoding": "chunked"}


def answered(path: str, n: int, start: float = 0.0) -> list[RequestTrace]:
    return [request(path, i, ttft=0.08, gaps=[0.02] * 15, start=start + i, headers={**SSE}) for i in range(n)]


def cut(path: str, index: int, start: float) -> RequestTrace:
    r = request(path, index, ttft=0.08, gaps=[0.02] * 5, start=start, headers={**SSE})
    r.outcome, r.error, r.completion_tokens, r.finish_reason = "cut", "the stream ended before its last event", None, None
    r.t_failed, r.t_end = r.t_end, None
    return r


def verdict(reqs: list[RequestTrace]):
    return analyze(bundle(stream=stream(reqs)), AnalyzeOptions(budgets=Budgets()), registry=REGISTRY).verdict


def test_a_gateway_that_cuts_some_streams_beside_a_clean_direct_path_is_the_gateways() -> None:
    v = verdict(answered("direct", 12) + answered("gateway", 7, 20.0) + [cut("gateway", 7 + i, 30.0 + i) for i in range(5)])
    assert v.symptom is Symptom.PROXY_ONLY, v.summary
    assert v.summary.startswith("Proxy-only: 5 of 12 gateway requests failed (cut x5")
    assert v.primary_code == "LD501" and v.primary_remediation.setting == "proxy_read_timeout"


def test_an_engine_that_cuts_some_streams_is_not_healthy() -> None:
    v = verdict(answered("direct", 9) + [cut("direct", 9 + i, 30.0 + i) for i in range(3)])
    assert v.symptom is not Symptom.HEALTHY, v.summary
    assert v.summary.startswith("Not healthy: 3 of 12 direct requests failed (cut x3") and v.primary_code == "LD501"


@needs("caddy")
def test_cut_streams_behind_a_real_caddy_make_the_headline(tmp_path: Path) -> None:
    """Live: every third stream the engine sends through Caddy is cut mid-event; the direct path's are whole."""
    with SseServer() as srv, run_gateway("caddy", "", srv.port) as gateway:
        result = CliRunner().invoke(app, [
            "diagnose", "--engine", srv.base(itl=0.005, n=16), "--gateway", gateway + "/o/itl=0.005,n=16,fail=cut,every=3",
            "--requests", "12", "--no-gpu", "--no-host", "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")])
    assert result.exit_code == ExitCode.SYMPTOM, result.output
    v = json.loads((tmp_path / "r.json").read_text())["verdict"]
    assert v["symptom"] == "proxy-only" and v["primary_code"] == "LD501", v["summary"]
    assert "HEALTHY" not in result.output and "Change one thing: proxy_read_timeout" in result.output
    assert '<section class="verdict proxy-only"' in (tmp_path / "r.html").read_text()
