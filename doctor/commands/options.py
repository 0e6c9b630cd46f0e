"""Option groups for typer: declared once, attached to every command that takes them; and how
``--help`` shows them.

typer reads a command's signature, so ``uses(...)`` extends the signature with the group's
keyword-only parameters and hands their values to the command as one ``opts`` dict, which the
command passes to ``doctor.settings.resolve`` unread (flags are read by name only there).

typer 0.29's rich help prints ``<bool>`` after every switch (``--insecure <bool>``, ``--help
<bool>``), which reads as if it took a value; ``quiet_switches`` drops the type of a switch, and
``unwrapped_help`` joins the lines of each paragraph of a command's docstring, which rich keeps
as hard breaks and then wraps again mid-sentence at any other width.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperOption


def opt(annotation: Any, default: Any, *decls: str, help: str, **kw: Any) -> inspect.Parameter:
    """One reusable option, as a keyword-only parameter typer can read."""
    return inspect.Parameter(
        decls[0].lstrip("-").replace("-", "_"),
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, typer.Option(*decls, help=help, **kw)],
    )


def uses(*groups: list[inspect.Parameter]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add option groups to a command; they reach it as one ``opts`` dict."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.name != "opts"]
        extra = [p for group in groups for p in group]
        names = {p.name for p in extra}

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> Any:
            opts = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            return fn(opts=opts, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
        return wrapper

    return deco


def quiet_switches() -> None:
    """Show no value type after a switch (a flag takes none) in every command's ``--help``."""
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


def unwrapped_help(app: typer.Typer) -> None:
    """Each command's help from its docstring with every paragraph on one line, for rich to wrap
    at the terminal's width (an example, a paragraph of its own, stays whole)."""
    for info in app.registered_commands:
        if info.help is None and info.callback is not None:
            paragraphs = (inspect.getdoc(info.callback) or "").split("\n\n")
            info.help = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
