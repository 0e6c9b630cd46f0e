"""``llm-doctor scaling PATH... [--log vllm.log] [--json PATH]``: judge autoscaler objects as written.

Reads objects as ``kubectl get hpa,scaledobject,... -o yaml`` (or ``-o json``) prints them: a
file of one or several documents, a ``kind: List``, a directory of such files, or ``-`` for
standard input. They go into a bundle like a diagnosis's (the ``scaling`` kind, redacted) and
the scaling checks (``LD6xx``) run over it, so the findings are the same objects a ``k8s://``
diagnosis reports. ``--log`` adds the engine's startup log (its batch limit, its start-up time).

Exit 1 for a finding at warning or above, 0 for none, 2 when nothing could be read (a Helm
template, a file that is not YAML, no autoscaler among the objects).
"""

from __future__ import annotations

import sys
from pathlib import Path

from doctor import __version__
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.commands.emit import deliver
from doctor.evidence import Bundle, ScalerObject, ScalingEvidence
from doctor.exit_codes import ExitCode
from doctor.foundation.errors import UsageError
from doctor.foundation.redact import redact_bundle
from doctor.foundation.user_paths import check_output_file, is_stdout
from doctor.model import Severity
from doctor.probes.logfile import read_log
from doctor.scalers.manifests import MAX_BYTES, ManifestError, documents
from doctor.settings import Outputs
from reports.scaling_report import print_scaling, render_scaling_json, scaling_read

#: The file names a directory is read for, and how many at most.
SUFFIXES = (".yaml", ".yml", ".json")
MAX_FILES = 2000


def _files(paths: list[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        p = Path(path)
        if path != "-" and p.is_dir():
            found += sorted(str(f) for f in p.rglob("*") if f.suffix in SUFFIXES and f.is_file())
        else:
            found.append(path)
    if len(found) > MAX_FILES:
        raise UsageError(f"{len(found)} files to read; name at most {MAX_FILES} (a narrower folder)")
    return found


def _read(path: str) -> str:
    """The text of a file (``-``: standard input), bounded; ``ManifestError`` when it cannot be read."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ManifestError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB; refused unread")
    return data.decode("utf-8", errors="replace")


def gather(paths: list[str]) -> ScalingEvidence:
    """The objects of every path, and one problem per file that could not be read."""
    evidence = ScalingEvidence(origin="files")
    for path in _files(paths):
        source = "stdin" if path == "-" else path
        try:
            docs = documents(_read(path), source)
        except ManifestError as exc:
            evidence.problems.append(str(exc))
            continue
        evidence.objects += [ScalerObject(d.source, dict(d.obj)) for d in docs]
    return evidence


def run(paths: list[str], json_out: str | None, log: str | None, verbose: bool) -> int:
    """Read, judge, print; the exit code."""
    json_path = None if json_out is None else Path(json_out)
    if json_path is not None and not is_stdout(json_path):
        check_output_file(json_path)
    bundle = Bundle(tool_version=__version__, scaling=gather(paths))
    if log is not None:
        bundle.log, errors = read_log(log)
        bundle.errors += errors
    bundle = redact_bundle(bundle)
    report = analyze(bundle, AnalyzeOptions(select=["LD6"]))
    scaling = scaling_read(report)
    deliver(Outputs(json=json_path, verbose=verbose), lambda console: print_scaling(report, console, verbose),
            {"json": lambda: render_scaling_json(report)})
    if not scaling.scalers and not report.findings:
        return int(ExitCode.NO_DIAGNOSIS)
    failed = any(f.severity.rank >= Severity.WARNING.rank for f in report.findings)
    return int(ExitCode.SYMPTOM if failed else ExitCode.HEALTHY)


__all__ = ["gather", "run"]
