"""Save and load evidence bundles: ``.json``, ``.json.gz``, or the copy embedded in an HTML report."""

from __future__ import annotations

import base64
import gzip
import json
import lzma
import os
import re
import zlib
from pathlib import Path
from typing import Any

from doctor.evidence import SCHEMA_VERSION, Bundle
from doctor.foundation.errors import BundleError, BundleVersionError, UsageError
from doctor.foundation.serial import load, to_jsonable
from doctor.foundation.wire import WireError, loads

#: The HTML report embeds the bundle as xz-compressed JSON in base64: ``<script type=EMBED_TYPE
#: id=EMBED_ID>``. Compressed because raw /metrics text and per-read logs make a typical bundle
#: 10x the page around it; xz rather than gzip because successive scrapes of ~50 KB differ only
#: in their numbers and gzip's 32 KiB window cannot see one from the next (a real 30-scrape run:
#: 211 KB gzipped, 47 KB in xz, in half the time); base64 because its alphabet can never close
#: the element or open a comment.
EMBED_ID = "llm-doctor-bundle"
EMBED_TYPE = "application/x-xz+base64"
#: Earlier reports embedded gzip (or plain JSON); both still load.
GZIP_EMBED_TYPE = "application/gzip+base64"
_XZ_PRESET = 3  # a 4 MiB dictionary spans many scrapes; higher presets only cost time and memory
_EMBED_OPEN = re.compile(
    r'<script type="(application/json|application/gzip\+base64|application/x-xz\+base64)" id="' + EMBED_ID + r'">'
)
_EMBED_CLOSE = "</script>"
#: The most ``analyze`` reads or inflates. Far above a real bundle (a long probe with per-read
#: logs is tens of MB), far below what hurts: a 1 MB ``.json.gz`` of spaces inflates to 1 GB.
MAX_BUNDLE_BYTES = 256 * 2**20


def dumps(bundle: Bundle, compact: bool = False) -> str:
    """Indented for a bundle file people read with ``less`` and ``jq``; compact inside reports."""
    if compact:
        return json.dumps(to_jsonable(bundle), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return json.dumps(to_jsonable(bundle), indent=1, ensure_ascii=False, allow_nan=False)


def save(bundle: Bundle, path: str | os.PathLike[str]) -> None:
    """Write the bundle (gzipped for ``.gz``); ``UsageError`` when the path cannot be written."""
    path = Path(path)
    text = dumps(bundle)
    write_file(path, gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode("utf-8"))


def write_file(path: Path, data: bytes) -> None:
    """Write an output the user named (bundle or report), creating missing parent folders.

    Any ``OSError`` becomes a ``UsageError`` naming the path: a directory, a read-only place
    or ``/proc/...`` given to ``-o``/``--json``/``--html`` deserves one line, not a traceback.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except FileExistsError as exc:  # mkdir met a plain file where a folder must be
        raise UsageError(f"cannot write {path}: {exc.filename} is not a directory") from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def embed_text(bundle: Bundle) -> str:
    """The bundle as the text of the report's embedding ``<script>`` element."""
    return base64.b64encode(lzma.compress(dumps(bundle, compact=True).encode(), preset=_XZ_PRESET)).decode("ascii")


#: The ``kind`` of ``llm-doctor sweep``'s JSON report, which holds levels, not a bundle: named when it
#: is given where a bundle is read.
SWEEP_KIND = "llm-doctor-sweep"


def from_dict(data: Any, origin: str = "bundle") -> Bundle:
    """Check and type a parsed bundle; anything malformed is a ``BundleError`` naming the field.

    ``serial.load`` raises ``TypeError`` with the field path for a leaf of the wrong type; the
    other exceptions cover what a dataclass or enum may raise on odd input. A damaged or
    hand-edited bundle must end in a one-line message, never a traceback.
    """
    if isinstance(data, dict) and data.get("kind") == SWEEP_KIND:
        raise BundleError(f"{origin}: a sweep report (llm-doctor sweep --json), not an evidence bundle; analyze one "
                          "level's bundle instead (sweep --bundle-dir keeps one per level, named by each level's "
                          '"bundle" in this report)')
    if not isinstance(data, dict) or "schema_version" not in data:
        raise BundleError(f"{origin}: not an llm-doctor evidence bundle (no schema_version)")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"{origin}: schema_version must be a positive integer, not {version!r:.40}")
    if version > SCHEMA_VERSION:
        raise BundleVersionError(
            f"{origin}: bundle schema_version {version} is newer than this llm-doctor understands "
            f"({SCHEMA_VERSION}); upgrade llm-doctor"
        )
    try:
        return load(Bundle, data)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise BundleError(f"{origin}: malformed bundle: {exc}") from None


def _inflate(data: bytes | bytearray, kind: str, where: str) -> bytearray:
    """Decompress gzip or xz ``data``, refusing output beyond ``MAX_BUNDLE_BYTES``.

    ``gzip.decompress`` and ``lzma.decompress`` have no output limit; these decompressors stop
    at the limit, so a decompression bomb costs at most that much memory.
    """
    out = bytearray()
    while data:
        inflater: Any = lzma.LZMADecompressor() if kind == "xz" else zlib.decompressobj(wbits=31)
        try:
            out += inflater.decompress(data, MAX_BUNDLE_BYTES + 1 - len(out))
        except (zlib.error, lzma.LZMAError) as exc:
            raise BundleError(f"{where}: corrupt {kind}: {exc}") from None
        if len(out) > MAX_BUNDLE_BYTES:
            raise BundleError(f"{where}: inflates to more than {MAX_BUNDLE_BYTES >> 20} MiB, beyond any llm-doctor bundle")
        if not inflater.eof:
            raise BundleError(f"{where}: corrupt {kind}: the data ends before the compressed stream does")
        data = inflater.unused_data if kind == "gzip" and inflater.unused_data[:2] == b"\x1f\x8b" else b""  # members
    return out


def _embedded(text: str, where: str) -> str:
    """The bundle inside an HTML report: the text of its ``<script type=... id=EMBED_ID>`` element.

    Found with one search for the opening tag and one ``find`` for the close, not a lazy
    ``(.*?)</script>`` regex: on a page of many unclosed opening tags that regex scanned to the
    end once per tag (quadratic). The first close after the opening tag is what it matched.
    """
    opening = _EMBED_OPEN.search(text)
    if opening is None:
        raise BundleError(f"{where}: HTML file without an embedded llm-doctor bundle")
    end = text.find(_EMBED_CLOSE, opening.end())
    if end == -1:
        raise BundleError(f"{where}: the embedded llm-doctor bundle is not closed (a truncated page?)")
    kind, body = opening.group(1), text[opening.end():end]
    if kind not in (EMBED_TYPE, GZIP_EMBED_TYPE):
        return body
    try:
        data = base64.b64decode(body, validate=True)
    except ValueError as exc:
        raise BundleError(f"{where}: the embedded bundle is damaged: {exc}") from None
    try:
        return _inflate(data, "xz" if kind == EMBED_TYPE else "gzip", f"{where}: the embedded bundle is damaged").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{where}: the embedded bundle is damaged: {exc}") from None


def load_path(path: str | os.PathLike[str]) -> Bundle:
    """Load a bundle from JSON, gzipped JSON, a JSON report (which holds the bundle), or an HTML report."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            raw: bytes | bytearray = f.read(MAX_BUNDLE_BYTES + 1)
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BUNDLE_BYTES:
        raise BundleError(f"{path}: larger than {MAX_BUNDLE_BYTES >> 20} MiB, beyond any llm-doctor bundle")
    if raw[:2] == b"\x1f\x8b":
        raw = _inflate(raw, "gzip", str(path))
    text = raw.decode("utf-8", errors="replace")
    if text.lstrip()[:1] == "<":
        text = _embedded(text, str(path))
    try:
        data = loads(text, finite=True)
    except WireError as exc:
        raise BundleError(f"{path}: {exc}") from None
    if isinstance(data, dict) and "bundle" in data and "verdict" in data:
        data = data["bundle"]  # a JSON report carries its bundle
    return from_dict(data, str(path))
