"""``diagnose`` against a hostile server, and bundles carrying what such a server can send.

Each case once cost the run (a traceback, "cannot reload its own bundle", a lost view). The
server is real (tests/support/hostile_server.py); the assertions are about what the user gets:
a report, the failure named, an exit code that is not a crash.
"""

from __future__ import annotations

import base64
import gzip
import json
import lzma
import re
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import doctor.bundle as bundle_module
from doctor.bundle import dumps, load_path, save
from doctor.cli import app
from doctor.evidence import TokenEvent
from doctor.exit_codes import ExitCode
from doctor.foundation.clock import Clock
from doctor.foundation.errors import BundleError
from doctor.probes.deadlines import RunDeadline
from doctor.probes.endpoints import collect_endpoints
from doctor.probes.http import DeadlineExceeded, HttpOptions, bounded_get, http_client
from doctor.probes.metrics import Scraper
from doctor.probes.prometheus import query_history
from tests.support import bundles
from tests.support.hostile_server import HostileServer

runner = CliRunner()


def diagnose(base: str, tmp_path: Path) -> tuple[int, str, Path]:
    html = tmp_path / "report.html"
    result = runner.invoke(app, ["diagnose", "--engine", base, "--requests", "2", "--warmup", "0", "--no-gpu",
                                 "--no-host", "--deadline", "30", "--html", str(html), "--bundle", str(tmp_path / "b.json")])
    return result.exit_code, result.output + (repr(result.exception) if result.exception else ""), html


@pytest.fixture(scope="module")
def hostile():
    with HostileServer() as server:
        yield server


def test_surrogates_in_text_model_and_version_still_give_a_report(hostile, tmp_path: Path) -> None:
    code, output, html = diagnose(hostile.base("surrogates"), tmp_path)
    assert code in (ExitCode.HEALTHY, ExitCode.SYMPTOM), output
    assert html.exists() and "Traceback" not in output
    bundle = load_path(tmp_path / "b.json")
    (endpoint,) = bundle.endpoints.endpoints
    assert endpoint.models[0].id == "\ufffd"  # the lone surrogate, replaced, not dropped
    assert all("\ufffd" in r.text_excerpt for r in bundle.stream.requests)


def test_odd_usage_types_and_huge_counts_reload_and_render(hostile, tmp_path: Path) -> None:
    """``prompt_tokens: true``, ``finish_reason: 7``, ``completion_tokens: 10^10``: the bundle
    reloads (no "cannot reload its own bundle") and the report is written."""
    code, output, html = diagnose(hostile.base("huge"), tmp_path)
    assert "cannot reload" not in output and "malformed bundle" not in output, output
    assert code in (ExitCode.HEALTHY, ExitCode.SYMPTOM), output
    bundle = load_path(tmp_path / "b.json")
    for trace in bundle.stream.requests:
        assert trace.prompt_tokens is None and trace.finish_reason is None  # neither is a count or a reason
        assert trace.completion_tokens == 10_000_000_000
    assert html.exists()


def test_deep_json_and_a_310_digit_sample_are_evidence_errors_not_lost_views(hostile, tmp_path: Path) -> None:
    code, output, _ = diagnose(hostile.base("deep"), tmp_path)
    assert "RecursionError" not in output and "OverflowError" not in output, output
    assert re.search(r"/version answered HTTP 200 but JSON nested deeper", output), output
    bundle = load_path(tmp_path / "b.json")
    assert bundle.endpoints is not None and bundle.stream is not None and bundle.stream.requests[0].ok
    assert code in (ExitCode.HEALTHY, ExitCode.SYMPTOM), output


def test_a_token_event_claiming_ten_billion_tokens_draws_one_step(tmp_path: Path) -> None:
    """The arrivals chart works per event: a huge count must not become a list that long."""
    req = bundles.request("direct", 0, ttft=0.05, gaps=[0.01, 0.01])
    req.tokens[-1] = TokenEvent(t=req.tokens[-1].t, tokens=10_000_000_000)
    path = tmp_path / "huge.json"
    save(bundles.bundle(stream=bundles.stream([req])), path)
    result = runner.invoke(app, ["analyze", str(path), "--html", str(tmp_path / "r.html")])
    assert result.exit_code in (ExitCode.HEALTHY, ExitCode.SYMPTOM, ExitCode.NO_DIAGNOSIS), result.output
    assert "10000000002 tokens" in (tmp_path / "r.html").read_text()


def _bundle_text(duration: str | None = None, **changes: object) -> str:
    """A valid bundle's text, with ``changes`` to its top level and ``duration`` as the literal
    text of the stream's ``duration_s`` (a float field)."""
    data = json.loads(dumps(bundles.bundle(stream=bundles.stream([bundles.request("direct", 0, ttft=0.1, gaps=[0.02])]))))
    data.update(changes)
    data["stream"]["duration_s"] = "DURATION"
    return json.dumps(data).replace('"DURATION"', duration or "1.5")


@pytest.mark.parametrize(("text", "message"), [
    (_bundle_text(schema_version=-1), "schema_version must be a positive integer"),
    (_bundle_text("NaN"), "NaN is not a JSON number"),
    (_bundle_text("Infinity"), "Infinity is not a JSON number"),
    (_bundle_text("1e400"), "out of range"),
    (_bundle_text("1" + "0" * 400), "beyond the range"),
    (_bundle_text("9" * 5000), "too large"),
    ('{"schema_version": 1, "x": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper"),
])
def test_bundles_the_reader_refuses_say_why(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(BundleError, match=message):
        load_path(path)
    result = runner.invoke(app, ["analyze", str(path)])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and message in result.output, result.output


def test_a_lone_surrogate_anywhere_in_a_bundle_is_written_and_read_back(tmp_path: Path) -> None:
    bundle = bundles.bundle(stream=bundles.stream([bundles.request("direct", 0, ttft=0.1, gaps=[0.02])]))
    bundle.stream.requests[0].text_excerpt = "a\ud800b"
    bundle.stream.shape.payload = {"\udfffkey": ["\ud800"]}
    bundle.run.labels["team"] = "\udc80"
    for name in ("b.json", "b.json.gz"):
        save(bundle, tmp_path / name)
        again = load_path(tmp_path / name)
        assert again.stream.requests[0].text_excerpt == "a\ufffdb"
        assert again.stream.shape.payload == {"\ufffdkey": ["\ufffd"]}
        assert again.run.labels["team"] == "\ufffd"


def test_a_decompression_bomb_is_refused_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .json.gz that inflates past the limit is refused (the limit lowered so the test is cheap);
    the same bomb embedded in an HTML report too."""
    monkeypatch.setattr(bundle_module, "MAX_BUNDLE_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (4 << 20)))
    with pytest.raises(BundleError, match="inflates to more than 1 MiB"):
        load_path(bomb)
    page = tmp_path / "bomb.html"
    embedded = base64.b64encode(lzma.compress(b" " * (4 << 20))).decode()
    page.write_text(f'<html><script type="{bundle_module.EMBED_TYPE}" id="{bundle_module.EMBED_ID}">{embedded}</script>')
    with pytest.raises(BundleError, match="inflates to more than 1 MiB"):
        load_path(page)
    small = tmp_path / "ok.json.gz"
    save(bundles.bundle(), small)
    assert load_path(small).schema_version >= 1  # under the limit: read as before


def test_many_unclosed_script_tags_are_searched_once(tmp_path: Path) -> None:
    """The page's bundle is found by one search for the opening tag and one for its close: with
    thousands of unclosed opening tags, only the count of characters read grows, never per tag."""
    opening = f'<script type="application/json" id="{bundle_module.EMBED_ID}">'
    page = tmp_path / "unclosed.html"
    page.write_text("<html>" + opening * 20_000)
    with pytest.raises(BundleError, match="not closed"):
        load_path(page)
    page.write_text("<html>" + opening + dumps(bundles.bundle(), compact=True) + "</script>" + opening * 20_000)
    assert load_path(page).schema_version >= 1


def _finishes(fn, guard_s: float = 60.0):
    """``fn()``'s result, run in a thread; fails when it is still running after ``guard_s``
    (only a guard against a hang: the deadlines below are 1-2 s, the drip lasts 10 minutes)."""
    out: list[object] = []

    def call() -> None:
        try:
            out.append(fn())
        except Exception as exc:  # noqa: BLE001 - re-raised in the test's thread
            out.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(guard_s)
    assert not thread.is_alive(), "a dripping server defeated the deadline"
    if isinstance(out[0], Exception):
        raise out[0]
    return out[0]


def test_headers_dripped_one_byte_a_second_do_not_defeat_the_get_deadlines(hostile) -> None:
    """Every plain GET (endpoints, /metrics, Prometheus) ends at its deadline while the status
    line and headers are still coming, and says so as a timeout."""
    base = hostile.base("drip")
    # reads may wait 5 s, far more than the drip's 1 s between bytes: only the 1 s deadline can end it
    with http_client(None, False, 5.0) as client, pytest.raises(DeadlineExceeded):
        _finishes(lambda: bounded_get(client, base + "/version", deadline_s=1.0))
    _, errors = _finishes(lambda: collect_endpoints({"direct": base}, HttpOptions(timeout_s=1.0)))
    assert errors and {e.kind for e in errors} == {"timeout"}, errors
    scraper = Scraper(base + "/metrics", Clock(), timeout_s=1.0)
    _finishes(lambda: scraper.scrape("before"))
    assert next(s.error for s in scraper.result()[0].scrapes) is not None
    _, errors = _finishes(lambda: query_history(base, since_s=60, timeout_s=1.0))
    assert errors and errors[0].kind == "timeout", errors


def test_a_dripped_head_cannot_carry_the_run_past_its_deadline(hostile, tmp_path: Path) -> None:
    """``diagnose --deadline 4`` against a server dripping every answer's head, with /metrics and
    Prometheus on it too: the endpoints probe is given what is left of the run (less than its own
    10 s), every step after it finds no time left and says so as a ``deadline`` error, and the
    report is still written."""
    base = hostile.base("drip")
    html, bundle_path = tmp_path / "report.html", tmp_path / "b.json"
    result = runner.invoke(app, ["diagnose", "--engine", base, "--prometheus", base, "--no-gpu", "--no-host",
                                 "--deadline", "4", "--html", str(html), "--bundle", str(bundle_path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert html.exists(), result.output
    bundle = load_path(bundle_path)
    steps = bundle.run.steps
    assert list(steps) == ["endpoints", "metrics before", "stream", "metrics after", "prometheus"]
    assert 0 < steps["endpoints"] < 10.0  # what was left of the 4 s, not its own 10 s timeout
    (endpoint,) = bundle.endpoints.endpoints
    assert endpoint.deadline_basis == "run-deadline" and endpoint.deadline_s <= steps["endpoints"]
    assert [steps[s] for s in ("metrics before", "stream", "metrics after", "prometheus")] == [0.0] * 4
    late = {(e.source, e.action) for e in bundle.errors if e.kind == "deadline"}
    assert {"stream", "prometheus", "metrics"} <= {source for source, _ in late}
    assert "Traceback" not in result.output


def test_background_scrapes_stop_at_the_runs_deadline(hostile) -> None:
    """Scrapes of a dripping /metrics fall behind their 50 ms beat; once the run's deadline passed
    the beats missed are owed no more: none is kept as a failure, and the loop ends."""
    scraper = Scraper(hostile.base("drip") + "/metrics", Clock(), interval_s=0.05, timeout_s=0.3, run=RunDeadline(1.0))
    with scraper.during():
        time.sleep(2.0)
    evidence, _ = scraper.result()
    during = [s for s in evidence.scrapes if s.phase == "during"]
    assert during and all("not started" not in (s.error or "") for s in during)
