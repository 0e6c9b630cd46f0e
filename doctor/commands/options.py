"""Option groups for typer: declared once, attached to every command that takes them.

typer reads a command's signature, so ``uses(...)`` extends the signature with the group's
keyword-only parameters and hands their values to the command as one ``opts`` dict.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer


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
