"""Bundles round-trip through JSON, gzip and the HTML embedding; bad files are clear errors."""

from __future__ import annotations

import gzip
import json

import pytest

from doctor.bundle import EMBED_ID, EMBED_TYPE, dumps, embed_text, from_dict, load_path, save
from doctor.errors import BundleError, BundleVersionError
from doctor.evidence import SCHEMA_VERSION, Bundle, EvidenceError
from doctor.serial import to_jsonable
from tests.support import bundles


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
