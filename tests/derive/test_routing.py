"""The ``routing`` view on hostile router evidence: a label per request bounded, a worker list of junk read as nothing."""

from __future__ import annotations

from doctor.derive.router import derive_routing
from doctor.evidence import RouterEvidence, Scrape
from doctor.routers.reading import MAX_REPLICAS, worker_urls
from tests.support.bundles import bundle


def _scrape(t: float, workers: int) -> Scrape:
    lines = ["# TYPE vllm_router_processed_requests counter"]
    lines += [f'vllm_router_processed_requests_total{{worker="http://10.0.{i // 250}.{i % 250}:8000/{"x" * 400}"}} {t:g}' for i in range(workers)]
    return Scrape(phase="during", t=t, wall=t, status=200, text="\n".join(lines) + "\n")


def test_a_label_set_past_the_bound_is_cut_and_said() -> None:
    view = derive_routing(bundle(router=RouterEvidence(url="http://r", scrapes=[_scrape(1.0, 1000), _scrape(2.0, 1000)])))
    assert len(view.replicas) == MAX_REPLICAS
    assert all(len(r.url) <= 256 for r in view.replicas)
    assert any("beyond the first" in n for n in view.notes), view.notes


def test_a_worker_list_of_junk_names_no_replica_and_says_why() -> None:
    assert worker_urls('{"workers": [{"url": "javascript:alert(1)"}, 7, null]}') == ([], "the worker list names no replica URL")
    assert worker_urls("<html>")[0] == []
