"""The files and folders a user names for output: checked before anything is sent.

Found only after the probe, an unwritable ``--html`` or ``-o`` costs the whole run, and a
permission error raised by ``Path.exists()`` (a folder on the way that cannot be entered) was a
traceback with exit 1, the code a scheduled check reads as an incident. Every check here ends in
one ``UsageError`` naming the path instead (exit 2).

Folders: llm-doctor creates at most the folder a folder option names (``--baseline``,
``--history``, ``--bundle-dir``: "created on the first run"), never the folders above it, and
no folder at all for a file (``--json``, ``--html``, ``--md``, ``-o``, ``--metrics-textfile``):
a typo such as ``--html /nonexistent-dir/r.html`` is refused rather than silently creating
``/nonexistent-dir`` at the filesystem root.

``-`` names stdout for the machine-readable outputs (``--json -``, ``--md -``, ``--html -``,
``collect -o -``): nothing to check.

Writing is tried, not predicted: ``os.access`` says yes to root everywhere, and to a read-only
mount or ``/proc``, where the write fails. An existing file is opened for appending (its content
and time untouched); otherwise an empty file is created in the folder and removed.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from doctor.foundation.errors import UsageError

#: The path that means standard output.
STDOUT = "-"


def is_stdout(path: Path | str | None) -> bool:
    """Whether ``path`` is ``-``: the output goes to stdout, not to a file."""
    return path is not None and str(path) == STDOUT


#: The machine-readable outputs ``-`` may send to stdout (their option names).
PIPEABLE = ("json", "md", "html")


def piped_output(paths: Mapping[str, Path | str | None], fmt: str | None) -> str | None:
    """Which of ``PIPEABLE`` (``paths``, by option name) was given ``-`` (stdout), if any; at most
    one may be, and not beside ``--format json`` (which prints the JSON report there): one stream
    holds one document."""
    piped = [key for key in PIPEABLE if is_stdout(paths.get(key))]
    if fmt == "json":
        piped.append("format json")
    if len(piped) > 1:
        raise UsageError(f"only one output can go to stdout: {' and '.join('--' + k for k in piped)} were both asked to")
    return piped[0] if piped and piped[0] in PIPEABLE else None


#: The options that each name a file a run writes: no two may name the same one.
FILE_OUTPUTS = (*PIPEABLE, "bundle", "metrics_textfile")


def distinct_files(paths: Mapping[str, Path | str | None]) -> None:
    """Refuse two output options (by option name) that name one file: the later write would replace the
    earlier (``--json r --html r`` left only the HTML). ``-`` (stdout) is ``piped_output``'s to judge."""
    seen: dict[str, str] = {}
    for key, path in paths.items():
        if path is None or is_stdout(path):
            continue
        real = os.path.realpath(os.path.expanduser(path))
        if real in seen:
            first, second = (f"--{k.replace('_', '-')}" for k in (seen[real], key))
            raise UsageError(f"{first} and {second} both name {path}: the second would overwrite the first; give each its own file")
        seen[real] = key


def _kind(path: Path, what: str) -> str | None:
    """``"dir"``, ``"file"`` (anything else that exists) or None when nothing is there; a folder
    on the way that cannot be entered is a ``UsageError`` (``what`` names the use)."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None
    return "dir" if stat.S_ISDIR(mode) else "file"


def _try_writing_in(folder: Path, what: str, path: Path) -> None:
    try:
        handle, trial = tempfile.mkstemp(dir=folder, prefix=".llm-doctor-write-check-")
        os.close(handle)
        os.unlink(trial)
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None


def check_output_file(path: Path | None, what: str = "cannot write") -> None:
    """Refuse a file output that cannot be written: a folder, a missing or unreachable folder
    above it, no permission; ``-`` (stdout) and None pass."""
    if path is None or is_stdout(path):
        return
    kind = _kind(path, what)
    if kind == "dir":
        raise UsageError(f"{what} {path}: it is a directory")
    parent = path.parent
    parent_kind = _kind(parent, what)
    if parent_kind is None:
        raise UsageError(f"{what} {path}: the folder {parent} does not exist (no folder is created for a file; "
                         "create it, or check the path for a typo)")
    if parent_kind != "dir":
        raise UsageError(f"{what} {path}: {parent} is not a directory")
    if kind == "file":
        try:
            path.open("ab").close()
        except OSError as exc:
            raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None
    else:
        _try_writing_in(parent, what, path)


def check_output_folder(folder: Path | None, flag: str) -> Path | None:
    """Refuse a folder option (``--baseline``, ``--history``, ``--bundle-dir``) that is a file,
    cannot be written, or whose own parent folder is missing; the folder itself may be missing
    (it is created on the first write). Returns ``folder``."""
    if folder is None:
        return None
    kind = _kind(folder, flag)
    if kind == "file":
        raise UsageError(f"{flag} {folder} is not a directory")
    if kind == "dir":
        _try_writing_in(folder, flag, folder)
        return folder
    parent = folder.parent
    parent_kind = _kind(parent, flag)
    if parent_kind != "dir":
        raise UsageError(f"{flag} {folder}: the folder {parent} {'is not a directory' if parent_kind else 'does not exist'} "
                         "(only the folder named is created)")
    _try_writing_in(parent, flag, folder)
    return folder
