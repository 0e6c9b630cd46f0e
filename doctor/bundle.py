"""Save and load evidence bundles: ``.json``, ``.json.gz``, or the copy embedded in an HTML report."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

from doctor.errors import BundleError, BundleVersionError
from doctor.evidence import SCHEMA_VERSION, Bundle
from doctor.serial import load, to_jsonable

#: The HTML report embeds the bundle as gzipped JSON in base64: ``<script type=EMBED_TYPE id=EMBED_ID>``.
#: Compressed because raw /metrics text and per-read logs make a typical bundle 10x the page
#: around it; base64 because its alphabet can never close the element or open a comment.
EMBED_ID = "llm-doctor-bundle"
EMBED_TYPE = "application/gzip+base64"
_EMBED_RE = re.compile(
    r'<script type="(application/json|application/gzip\+base64)" id="' + EMBED_ID + r'">(.*?)</script>', re.DOTALL
)


def dumps(bundle: Bundle, compact: bool = False) -> str:
    """Indented for a bundle file people read with ``less`` and ``jq``; compact inside reports."""
    if compact:
        return json.dumps(to_jsonable(bundle), separators=(",", ":"), ensure_ascii=False)
    return json.dumps(to_jsonable(bundle), indent=1, ensure_ascii=False)


def save(bundle: Bundle, path: Path) -> None:
    text = dumps(bundle)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")


def embed_text(bundle: Bundle) -> str:
    """The bundle as the text of the report's embedding ``<script>`` element."""
    return base64.b64encode(gzip.compress(dumps(bundle, compact=True).encode(), mtime=0)).decode("ascii")


def from_dict(data: Any, origin: str = "bundle") -> Bundle:
    if not isinstance(data, dict) or "schema_version" not in data:
        raise BundleError(f"{origin}: not an llm-doctor evidence bundle (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise BundleVersionError(
            f"{origin}: bundle schema_version {version} is newer than this llm-doctor understands "
            f"({SCHEMA_VERSION}); upgrade llm-doctor"
        )
    try:
        return load(Bundle, data)
    except (TypeError, ValueError, KeyError) as exc:
        raise BundleError(f"{origin}: malformed bundle: {exc}") from exc


def load_path(path: Path) -> Bundle:
    """Load a bundle from JSON, gzipped JSON, a JSON report (which holds the bundle), or an HTML report."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise BundleError(f"{path}: corrupt gzip: {exc}") from None
    text = raw.decode("utf-8", errors="replace")
    if text.lstrip()[:1] == "<":
        match = _EMBED_RE.search(text)
        if not match:
            raise BundleError(f"{path}: HTML file without an embedded llm-doctor bundle")
        kind, text = match.group(1), match.group(2)
        if kind == EMBED_TYPE:
            try:
                text = gzip.decompress(base64.b64decode(text, validate=True)).decode("utf-8")
            except (ValueError, OSError, EOFError) as exc:
                raise BundleError(f"{path}: the embedded bundle is damaged: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict) and "bundle" in data and "verdict" in data:
        data = data["bundle"]  # a JSON report carries its bundle
    return from_dict(data, str(path))
