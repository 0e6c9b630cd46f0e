"""The check contract: one decorated pure function per file in ``checks/``.

A check declares what it needs through its signature::

    @check(code="LD101", name="requests-queued-before-prefill",
           symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.QUEUE)
    def queueing(stream_stats: StreamStats, metrics_window: MetricsWindow,
                 log_facts: LogFacts | None = None, *, queue_share: float = 0.5) -> Result:
        ...

- positional parameters without a default are REQUIRED evidence kinds (``doctor.evidence.RAW_KINDS``
  or a derived view in ``doctor.derive.DERIVED``); when one is missing the runner records
  ``missing-evidence`` and does not call the check;
- positional parameters with a default are OPTIONAL evidence kinds: ``None`` when absent, or a
  value that says so (the ``engine`` view's ``UNIDENTIFIED``, which a direct call gets);
- keyword-only parameters are thresholds/options; users override them with
  ``--set CODE.option=value`` or ``--set name.option=value``. An option named in
  ``doctor.checking.runner.BUDGET_OPTIONS`` (``tpot_target_s``, ``ttft_target_s``) defaults to the run's
  latency budget rather than to its declared default, so a check and the verdict agree.

``aliases`` are other names a check answers to (``explain``, ``--select``, ``--set``): the words
an issue or a runbook uses for it, e.g. ``queueing`` for requests-queued-before-prefill, or a
code it had before (``LD208`` for gpu-xid-errors, now LD508).

The function returns ``Fire`` (a finding), ``Pass`` or ``NotApplicable``; it may also raise
``NotApplicable`` (a helper in ``doctor.checklib`` does, so the check needs no branch for it);
any other exception is isolated by the runner as an ``error`` result. The module docstring carries the documentation
under the fixed headings in ``DOC_HEADINGS``, and each option under ``Options:``
(``OPTIONS_HEADING``); ``llm-doctor explain`` prints it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

DOC_HEADINGS: tuple[str, ...] = (
    "What it detects",
    "Why it matters",
    "Evidence",
    "Remediation",
    "Example",
)

#: The heading that describes each keyword-only option, one ``name: what it means`` line each
#: (continuation lines indented); required when the check has options. The default is not
#: written there: ``explain`` prints it from the signature, so it is written once.
OPTIONS_HEADING = "Options"

_OPTION_LINE = re.compile(r"^(\w+):\s*(.*)$")

CODE_RE = re.compile(r"^[A-Z]{2,4}\d{3}$")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass
class Fire:
    """A check's finding, before the runner stamps it with the check's code, name and class."""

    title: str
    summary: str
    remediation: Remediation
    severity: Severity = Severity.WARNING
    evidence: list[EvidenceValue] = field(default_factory=list)
    # Whether it measured latency users felt (a budget exceeded, a stream shape users see), or is
    # a risk (headers held while TTFT is unchanged, a timeout not yet fired, a capacity not yet
    # run out): a risk never makes the verdict's class nor, by default, the exit code.
    felt: bool = True


@dataclass
class Pass:
    """The check looked and found no problem; ``message`` says what it measured, so a passed check
    shows why it passed, not only that it did.
    """

    message: str = ""


@dataclass
class NotApplicable(Exception):  # a result first; raising it is the shortcut for helpers
    """The check's question does not arise on this evidence; returned, or raised from a helper.

    Raised (``raise NotApplicable("no gateway path")``), it ends the check from any depth, as a
    returned one would: the runner records the same ``not-applicable`` result.
    """

    message: str

    def __post_init__(self) -> None:
        super().__init__(self.message)


Result = Fire | Pass | NotApplicable


@dataclass
class CheckSpec:
    """One registered check: its function with what ``@check`` read from the signature and the module
    docstring (required and optional kinds, options and defaults, headings).

    The runner, ``explain``, ``checks`` and the conformance test read this instead of the function; a
    plugin may build one by hand, so the cause is checked again here.
    """

    code: str
    name: str
    symptom: SymptomClass
    cause: Cause
    func: Callable[..., Result]
    requires: tuple[str, ...]
    optional: tuple[str, ...]
    options: dict[str, Any]
    doc: dict[str, str]
    module: str
    origin: str = "builtin"  # or the entry point's distribution name
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # ``check`` passes a Cause; a plugin that builds its CheckSpec by hand may pass anything
        self.cause = _known_cause(self.code, self.cause)

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key the check answers to: code, name, aliases."""
        return (self.code, self.name, *self.aliases)

    def is_named(self, key: str) -> bool:
        """Whether ``key`` is the code (any case), the name or an alias (``cold start`` = ``cold-start``)."""
        code = key.strip().upper()
        return (code == self.code or code in self.aliases  # a former code
                or key.strip().lower().replace(" ", "-") in (self.name, *self.aliases))

    def __call__(self, *args: Any, **kwargs: Any) -> Result:
        """The check's result; a ``NotApplicable`` raised from any depth is returned like one."""
        try:
            return self.func(*args, **kwargs)
        except NotApplicable as raised:
            return raised

    @property
    def option_docs(self) -> dict[str, str]:
        """What each option means, from the ``Options:`` heading of the docstring."""
        return parse_options(self.doc.get(OPTIONS_HEADING, ""))

    @property
    def title(self) -> str:
        return self.doc.get("What it detects", "").split("\n", 1)[0]


def _known_cause(code: str, cause: object) -> Cause:
    """``cause`` as a ``Cause`` (its string is accepted); an unknown one is a ``ValueError``."""
    try:
        return Cause(cause)
    except ValueError:
        raise ValueError(f"check {code}: unknown cause {cause!r}; known: {', '.join(Cause)}") from None


def parse_doc(text: str) -> dict[str, str]:
    """Split a docstring into its fixed headings (``Heading:`` or ``## Heading`` lines)."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in inspect.cleandoc(text or "").splitlines():
        stripped = line.strip().removeprefix("## ").rstrip(":")
        if stripped in DOC_HEADINGS or stripped == OPTIONS_HEADING:
            current = stripped
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def parse_options(text: str) -> dict[str, str]:
    """The ``Options:`` section as ``{option: description}``; indented lines continue the one above."""
    found: dict[str, str] = {}
    last: str | None = None
    for line in text.splitlines():
        match = _OPTION_LINE.match(line)
        if match:
            last = match.group(1)
            found[last] = match.group(2).strip()
        elif last is not None and line[:1].isspace() and line.strip():
            found[last] += " " + line.strip()
    return found


def check(
    *,
    code: str,
    name: str,
    symptom: SymptomClass,
    cause: Cause | str,
    aliases: tuple[str, ...] = (),
) -> Callable[[Callable[..., Result]], CheckSpec]:
    """Register a function as a check; see the module docstring for the contract.

    A malformed code, name or cause is a programming error caught at import time (for a
    third-party plugin the registry turns it into a load warning). ``cause`` is a ``Cause``;
    its string (``"queue"``) is accepted too, for plugins written before the enum.
    """
    if not CODE_RE.match(code):
        raise ValueError(f"check code {code!r} must look like LD101")
    if not NAME_RE.match(name):
        raise ValueError(f"check name {name!r} must be kebab-case")
    known_cause = _known_cause(code, cause)
    for alias in aliases:
        if not (NAME_RE.match(alias) or CODE_RE.match(alias)):
            raise ValueError(f"check {code}: alias {alias!r} must be kebab-case, or a former code like LD208")

    def wrap(func: Callable[..., Result]) -> CheckSpec:
        requires: list[str] = []
        optional: list[str] = []
        options: dict[str, Any] = {}
        for p in inspect.signature(func).parameters.values():
            if p.kind is inspect.Parameter.KEYWORD_ONLY:
                options[p.name] = p.default
            elif p.default is inspect.Parameter.empty:
                requires.append(p.name)
            else:
                optional.append(p.name)
        module = inspect.getmodule(func)
        doc_text = (module.__doc__ if module else None) or func.__doc__ or ""
        return CheckSpec(
            code=code,
            name=name,
            symptom=symptom,
            cause=known_cause,
            func=func,
            requires=tuple(requires),
            optional=tuple(optional),
            options=options,
            doc=parse_doc(doc_text),
            module=func.__module__,
            aliases=tuple(aliases),
        )

    return wrap
