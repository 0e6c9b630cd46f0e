"""The /metrics scraper against a real HTTP server on 127.0.0.1: good, bad and slow answers."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from doctor.derive import Evidence
from doctor.evidence import Bundle
from doctor.foundation.clock import Clock
from doctor.probes.metrics import Scraper
from tests.support.vllm_exporter import Exporter

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
DEADLINE_S = 5.0  # generous for answers that should succeed on a busy machine
SHORT_S = 0.2  # for answers built to miss their deadline


def scraper(url: str, **kw: object) -> Scraper:
    return Scraper(url, Clock(), interval_s=kw.pop("interval_s", 0.05), headers={"Authorization": "Bearer sk-test"},
                   verify=True, timeout_s=kw.pop("timeout_s", DEADLINE_S))


def test_before_during_after_with_a_moving_engine():
    with Exporter(ticking=True) as ex:
        s = scraper(ex.url)
        s.scrape("before")
        seen_during = threading.Event()
        with s.during():
            # Stands in for the stream probe: wait until two background scrapes happened.
            for _ in range(200):
                if ex.gets >= 3:
                    seen_during.set()
                    break
                seen_during.wait(0.02)
        s.scrape("after")
        evidence, errors = s.result()
    assert errors == []
    phases = [sc.phase for sc in evidence.scrapes]
    assert phases[0] == "before" and phases[-1] == "after" and phases.count("during") >= 2
    assert [sc.t for sc in evidence.scrapes] == sorted(sc.t for sc in evidence.scrapes)
    first, last = evidence.scrapes[0], evidence.scrapes[-1]
    assert first.status == 200 and first.content_type.startswith("text/plain") and "vllm:" in first.text
    assert last.wall - first.wall == pytest.approx(last.t - first.t, abs=1e-5)  # wall: ~1e-7 s float grain
    assert "sk-test" not in repr(evidence)  # the header was sent, never stored

    w = Evidence(Bundle(metrics=evidence)).get("metrics_window")
    n = len(evidence.scrapes) - 1  # GETs between the first and the last scrape
    assert w.preemptions == 2 * n  # 1 per GET per engine, two engines
    assert w.generation_tokens == 200 * n and w.finished_by_reason == {"length": 4.0 * n, "stop": 0.0}
    assert w.engines["0"].preemptions == w.engines["1"].preemptions == n
    assert w.ttft.mean == pytest.approx(0.15) and w.ttft.p99_le == 0.25
    assert len(evidence.scrapes) >= 4 and w.kv_usage.max == 0.9  # GET 2 served the top of KV_CYCLE
    assert "waiting" in w.missing  # declared by the exporter, never sampled


def test_real_vllm_text_served_and_redirect_followed():
    with Exporter() as ex:
        ex.answer.body = (FIXTURES / "0.32.0-cpu-after-load.prom").read_text()
        s = scraper(ex.url.replace("/metrics", "/metrics-moved"))  # 307 -> /metrics, as some vLLM versions answer
        s.scrape("before")
        s.scrape("after")
        evidence, errors = s.result()
    assert errors == [] and [sc.error for sc in evidence.scrapes] == [None, None]
    assert evidence.scrapes[0].text == ex.answer.body
    assert Evidence(Bundle(metrics=evidence)).get("metrics_window").generation_tokens == 0.0


@pytest.mark.parametrize(
    ("answer", "kind", "words"),
    [
        ({"status": 404, "body": '{"detail":"Not Found"}', "content_type": "application/json"}, "http-status", "HTTP 404"),
        ({"status": 500, "body": "Internal Server Error"}, "http-status", "HTTP 500"),
        ({"body": "<!DOCTYPE html><html><body>Sign in</body></html>", "content_type": "text/html"}, "malformed", "HTML page"),
        ({"body": "this is { not metrics"}, "malformed", "not a Prometheus exposition"),
        ({"delay_s": SHORT_S * 5}, "timeout", "failed"),
        ({"body": "vllm:num_requests_running 1\n" * 200, "drip_s": 0.01}, "timeout", "no complete answer"),
    ],
)
def test_failed_scrape_is_an_evidence_error(answer, kind, words):
    with Exporter() as ex:
        for key, value in answer.items():
            setattr(ex.answer, key, value)
        # only the answers built to miss their deadline get the short one: on a loaded machine even a
        # prompt HTTP 500 can take longer than 0.2 s, and would then read as a timeout
        s = scraper(ex.url, timeout_s=SHORT_S if kind == "timeout" else 10.0)
        s.scrape("before")
        s.scrape("after")
        evidence, errors = s.result()
    assert [sc.error is not None for sc in evidence.scrapes] == [True, True]
    assert len(errors) == 2 and {e.kind for e in errors} == {kind}
    assert all(e.source == "metrics" and e.fatal and words in e.message for e in errors)
    assert len(evidence.scrapes[0].text) <= 2048  # an error page is kept short
    bundle = Bundle(metrics=evidence, errors=errors)
    with pytest.raises(Exception, match="no /metrics scrape succeeded"):
        Evidence(bundle).get("metrics_window")


def test_connection_refused_repeated_during_the_probe_is_one_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        s = scraper(f"http://127.0.0.1:{port}/metrics")
        s.scrape("during")
        s.scrape("during")
        s.scrape("during")
        evidence, errors = s.result()
    assert len(evidence.scrapes) == 3
    assert len(errors) == 1 and errors[0].kind == "connect" and "(3 scrapes)" in errors[0].message


def test_one_bad_scrape_among_good_ones_keeps_the_window():
    with Exporter(ticking=True) as ex:
        s = scraper(ex.url)
        s.scrape("before")
        ex.ticking = False
        ex.answer.status = 503
        s.scrape("during")
        ex.ticking = True
        ex.answer.status = 200
        s.scrape("after")
        evidence, errors = s.result()
    assert len(errors) == 1 and not errors[0].fatal and errors[0].message.startswith("during scrape")
    w = Evidence(Bundle(metrics=evidence, errors=errors)).get("metrics_window")
    assert w.scrapes_used == 2 and w.preemptions == 2 * 2  # GET 1 -> GET 3, two engines
    assert any("skipped during scrape" in n for n in w.notes) and w.errors == [errors[0].message]


def test_url_credentials_are_sent_but_never_kept():
    with Exporter() as ex:
        ex.answer.status = 404
        url = ex.url.replace("http://", "http://admin:canary-pass-42@")
        s = scraper(url)
        s.scrape("before")
        evidence, errors = s.result()
    assert evidence.url == ex.url
    assert "canary-pass-42" not in repr(evidence) + repr(errors)


def test_unreadable_ca_bundle_fails_every_scrape_not_the_run(tmp_path):
    s = Scraper("https://127.0.0.1:1/metrics", Clock(), interval_s=0, verify=str(tmp_path / "no-such-ca.pem"))
    s.scrape("before")
    s.scrape("after")
    evidence, errors = s.result()
    assert [e.kind for e in errors] == ["tls", "tls"] and "CA certificates" in errors[0].message
    assert all(sc.error for sc in evidence.scrapes)


@pytest.mark.parametrize(
    ("url", "kind"),
    [("http://llm-doctor-test.invalid:8000/metrics", "dns"), ("https://127.0.0.1:{port}/metrics", "tls")],
)
def test_dns_and_tls_failures_are_named(url, kind):
    with Exporter() as ex:  # plain HTTP: a TLS client hello gets an HTTP error line back
        ex.answer.body = "vllm:num_requests_running 0\n"
        s = scraper(url.format(port=ex.url.split(":")[2].split("/")[0]))
        s.scrape("before")
        _, errors = s.result()
    assert [e.kind for e in errors] == [kind]
