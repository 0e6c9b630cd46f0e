"""Bundles round-trip through JSON, gzip and the HTML embedding; bad files and unwritable paths are clear errors."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doctor.bundle import (
    EMBED_ID,
    EMBED_TYPE,
    GZIP_EMBED_TYPE,
    dumps,
    embed_text,
    from_dict,
    load_path,
    save,
)
from doctor.checking.registry import load_registry
from doctor.checking.runner import analyze
from doctor.commands.emit import emit
from doctor.evidence import SCHEMA_VERSION, Bundle, EvidenceError
from doctor.foundation.errors import BundleError, BundleVersionError, UsageError
from doctor.foundation.serial import to_jsonable
from doctor.settings import Outputs
from reports import render_html, render_json, render_markdown
from tests.support import bundles

FIXTURES = Path(__file__).parents[2] / "fixtures"
REAL_KV_PRESSURE = FIXTURES / "bundles" / "realvllm-kv-pressure.json.gz"


def sample() -> Bundle:
    b = bundles.bundle(
        stream=bundles.stream([bundles.request("direct", 0, ttft=0.2, gaps=[0.03, 0.5, 0.03])]),
        metrics=bundles.metrics(("before", -0.1, {"vllm:num_requests_running": 0}), ("after", 2.0, {"vllm:num_requests_running": 1})),
        log=bundles.log(["INFO 01-01 00:00:00 [loggers.py:1] </script><script>alert(1)</script>"]),
    )
    b.errors.append(EvidenceError("gpu", "nvml", "nvmlInit", "unavailable", "no driver", fatal=True))
    return b


@pytest.mark.parametrize("name", ["b.json", "b.json.gz"])
def test_round_trip_is_lossless(tmp_path, name):
    original = sample()
    path = tmp_path / name
    save(original, path)
    assert to_jsonable(load_path(path)) == to_jsonable(original)


def test_gzip_is_really_gzip(tmp_path):
    save(sample(), tmp_path / "b.json.gz")
    assert json.loads(gzip.decompress((tmp_path / "b.json.gz").read_bytes()))["schema_version"] == SCHEMA_VERSION


def test_embedded_bundle_round_trips_and_cannot_close_its_element(tmp_path):
    text = embed_text(sample())
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    page = tmp_path / "r.html"
    page.write_text(f'<html><script type="{EMBED_TYPE}" id="{EMBED_ID}">{text}</script></html>')
    assert to_jsonable(load_path(page)) == to_jsonable(sample())


def test_gzip_embedding_of_earlier_reports_still_loads(tmp_path):
    page = tmp_path / "r.html"
    text = base64.b64encode(gzip.compress(dumps(sample(), compact=True).encode())).decode("ascii")
    page.write_text(f'<html><script type="{GZIP_EMBED_TYPE}" id="{EMBED_ID}">{text}</script></html>')
    assert to_jsonable(load_path(page)) == to_jsonable(sample())


def test_successive_scrapes_compress_to_a_fraction_of_gzip():
    """Real /metrics text repeats from one scrape to the next beyond gzip's 32 KiB window."""
    bundle = load_path(REAL_KV_PRESSURE)
    embedded = len(base64.b64decode(embed_text(bundle)))
    assert embedded < len(gzip.compress(dumps(bundle, compact=True).encode())) / 3


def test_plain_json_embedding_still_loads(tmp_path):
    page = tmp_path / "r.html"
    legacy = dumps(sample()).replace("<", "\\u003c")  # how reports of schema 1 escaped their JSON
    page.write_text(f'<html><script type="application/json" id="{EMBED_ID}">{legacy}</script></html>')
    assert to_jsonable(load_path(page)) == to_jsonable(sample())


def test_damaged_embedding_is_a_bundle_error(tmp_path):
    page = tmp_path / "r.html"
    page.write_text(f'<html><script type="{EMBED_TYPE}" id="{EMBED_ID}">bm90IGd6aXA=</script></html>')
    with pytest.raises(BundleError, match="damaged"):
        load_path(page)


def test_newer_schema_is_refused_with_advice():
    data = json.loads(dumps(sample()))
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(BundleVersionError, match="upgrade"):
        from_dict(data)


def test_unknown_future_fields_are_ignored_and_missing_ones_default():
    data = json.loads(dumps(sample()))
    data["a_field_from_the_future"] = {"x": 1}
    del data["redactions"]
    assert from_dict(data).redactions == {}


@pytest.mark.parametrize(
    "content, message",
    [(b"", "not JSON"), (b"\x00\x01garbage", "not JSON"), (b"[1, 2]", "not an llm-doctor"),
     (b"<html>nothing</html>", "without an embedded"), (b"\x1f\x8b\x08broken", "corrupt gzip")],
)
def test_bad_files_are_bundle_errors(tmp_path, content, message):
    path = tmp_path / "bad"
    path.write_bytes(content)
    with pytest.raises(BundleError, match=message):
        load_path(path)


def test_missing_file_is_a_bundle_error(tmp_path):
    with pytest.raises(BundleError, match="cannot read"):
        load_path(tmp_path / "nope.json")


def test_damaged_deflate_data_is_a_bundle_error(tmp_path):
    path = tmp_path / "b.json.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff")  # deflate block type 3: invalid
    with pytest.raises(BundleError, match="corrupt gzip"):
        load_path(path)


@pytest.mark.parametrize(
    "field, value, where",
    [("redactions", [1], "redactions"), ("errors", [{"source": 1}], "errors[0].source"), ("run", "x", "run"),
     ("interrupted", "yes", "interrupted")],
)
def test_a_leaf_of_the_wrong_type_is_a_bundle_error_naming_it(tmp_path, field, value, where):
    data = json.loads(dumps(sample()))
    data[field] = value
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BundleError, match=rf"{path}: malformed bundle: {re.escape(where)}: expected"):
        load_path(path)


def test_a_request_on_a_path_the_probe_has_not_is_a_bundle_error_naming_it(tmp_path):
    """Path names are ``ProbePath``'s two: a third (hand-edited, hostile) never reaches a view or a chart."""
    data = json.loads(dumps(sample()))
    data["stream"]["requests"][0]["path"] = "<script>"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BundleError, match=r"stream\.requests\[0\]\.path: expected ProbePath, got str"):
        load_path(path)


@pytest.mark.parametrize("version", ["1", True, 1.0, None])
def test_a_schema_version_that_is_not_an_integer_is_a_bundle_error(version):
    data = json.loads(dumps(sample()))
    data["schema_version"] = version
    with pytest.raises(BundleError, match="schema_version must be a positive integer"):
        from_dict(data)


def test_deeply_nested_json_is_a_bundle_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(BundleError):
        load_path(path)


def test_save_creates_missing_folders(tmp_path):
    path = tmp_path / "a" / "b" / "bundle.json.gz"
    save(sample(), path)
    assert to_jsonable(load_path(path)) == to_jsonable(sample())


def unwritable(tmp_path: Path) -> list[Path]:
    """A directory, a path below a plain file, and a kernel file that refuses writes."""
    (tmp_path / "plain").write_text("")
    paths = [tmp_path, tmp_path / "plain" / "d" / "x.json.gz"]
    return [*paths, Path("/proc/version")] if Path("/proc/version").exists() else paths


def test_an_unwritable_bundle_path_is_a_usage_error(tmp_path):
    for path in unwritable(tmp_path):
        with pytest.raises(UsageError, match=f"cannot write {re.escape(str(path))}: "):
            save(sample(), path)


def test_an_unwritable_report_path_is_a_usage_error(tmp_path):
    report = analyze(sample())
    for path in unwritable(tmp_path):
        for flag in ("json", "html", "md"):
            with pytest.raises(UsageError, match=f"cannot write {re.escape(str(path))}: "):
                emit(report, Outputs(**{flag: path}))


# --- fuzz: a bundle whose leaves have the wrong types loads cleanly or is a BundleError -------------

FUZZ_BUNDLES = [
    FIXTURES / "bundles" / "realvllm-proxy-buffering.json.gz",
    FIXTURES / "checks" / "batch-too-deep" / "fires-tpot-grows-with-depth.json",
    FIXTURES / "checks" / "chunked-prefill-config" / "fires-v0-args-small-step.json",
    FIXTURES / "checks" / "gpu-throttled",
]
WRONG = [None, True, 0, -1, 2.5, "", "x", [], ["x"], [None], {}, {"k": "v"}]


def _nodes(obj: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    yield path, obj
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield from _nodes(value, (*path, key))


def _fuzz_sources() -> list[dict]:
    sources = []
    for path in FUZZ_BUNDLES:
        if path.is_dir():
            path = min(path.glob("*.json"))
        data = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
        sources.append(data.get("bundle", data))
    return sources


@pytest.mark.slow
def test_type_mutated_bundles_load_or_fail_cleanly_and_what_loads_renders():
    rng = random.Random(20261130)
    registry = load_registry()
    loaded = refused = 0
    for source in _fuzz_sources():
        # Pick among distinct field shapes (list indices folded), so the thousands of reads of one
        # stream do not crowd out the few fields that appear once.
        by_shape: dict[tuple, list[tuple]] = {}
        for path, _ in _nodes(source):
            if path:
                by_shape.setdefault(tuple("[]" if isinstance(k, int) else k for k in path), []).append(path)
        shapes = sorted(by_shape, key=repr)
        for _ in range(80):
            data = copy.deepcopy(source)
            for _ in range(rng.choice((1, 1, 2, 3))):
                *above, last = rng.choice(by_shape[rng.choice(shapes)])
                parent = data
                try:
                    for key in above:
                        parent = parent[key]
                    parent[last] = copy.deepcopy(rng.choice(WRONG))
                except (KeyError, IndexError, TypeError):
                    pass  # an earlier mutation replaced a container on this path
            try:
                bundle = from_dict(data, "fuzz")
            except BundleError:
                refused += 1
                continue
            loaded += 1
            report = analyze(bundle, registry=registry)
            render_html(report), render_json(report), render_markdown(report)
    print(f'{loaded} loaded, {refused} refused')
    assert loaded and refused  # both branches were exercised


def test_null_times_in_a_hand_edited_bundle_still_analyse_and_render():
    """null is how NaN is written; a token or scrape time edited to null must not crash a chart."""
    from pathlib import Path

    from doctor.checking.runner import analyze
    from reports import render_html, render_json, render_markdown

    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "bundles" / "realvllm-kv-pressure.json.gz"
    data = json.loads(gzip.decompress(fixture.read_bytes()))
    data["stream"]["requests"][0]["tokens"][0]["t"] = None
    data["metrics"]["scrapes"][0]["t"] = None
    report = analyze(from_dict(data))
    assert report.verdict.symptom.value == "inter-token"
    for render in (render_html, render_json, render_markdown):
        assert render(report)
