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

from doctor.errors import BundleError, BundleVersionError, UsageError
from doctor.evidence import SCHEMA_VERSION, Bundle
from doctor.serial import load, to_jsonable
from doctor.wire import WireError, loads

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
_EMBED_RE = re.compile(
    r'<script type="(application/json|application/gzip\+base64|application/x-xz\+base64)" id="' + EMBED_ID
    + r'">(.*?)</script>', re.DOTALL
)


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


def from_dict(data: Any, origin: str = "bundle") -> Bundle:
    """Check and type a parsed bundle; anything malformed is a ``BundleError`` naming the field.

    ``serial.load`` raises ``TypeError`` with the field path for a leaf of the wrong type; the
    other exceptions cover what a dataclass or enum may raise on odd input. A damaged or
    hand-edited bundle must end in a one-line message, never a traceback.
    """
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


def load_path(path: str | os.PathLike[str]) -> Bundle:
    """Load a bundle from JSON, gzipped JSON, a JSON report (which holds the bundle), or an HTML report."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:  # zlib.error: damaged deflate data
            raise BundleError(f"{path}: corrupt gzip: {exc}") from None
    text = raw.decode("utf-8", errors="replace")
    if text.lstrip()[:1] == "<":
        match = _EMBED_RE.search(text)
        if not match:
            raise BundleError(f"{path}: HTML file without an embedded llm-doctor bundle")
        kind, text = match.group(1), match.group(2)
        if kind in (EMBED_TYPE, GZIP_EMBED_TYPE):
            decompress = lzma.decompress if kind == EMBED_TYPE else gzip.decompress
            try:
                text = decompress(base64.b64decode(text, validate=True)).decode("utf-8")
            except (ValueError, OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
                raise BundleError(f"{path}: the embedded bundle is damaged: {exc}") from None
    try:
        data = loads(text, finite=True)
    except WireError as exc:
        raise BundleError(f"{path}: {exc}") from None
    if isinstance(data, dict) and "bundle" in data and "verdict" in data:
        data = data["bundle"]  # a JSON report carries its bundle
    return from_dict(data, str(path))
