"""The Prefect flows' side of the render schema (flows/params.py): a flow's signature and its parameters'
descriptions, so Prefect reads their types, defaults and help from RenderParams (render_book.py, nightly.py)."""
from __future__ import annotations

import inspect
from dataclasses import MISSING, Field

from flows.params import BY_NAME, PARAMS, TYPES, flag, help_of


def takes_render_params(exclude: tuple[str, ...] = (), own_first: bool = False):
    """A flow's signature: the render parameters (but `exclude` and those it names itself) as keyword-only
    parameters with the schema's types and defaults, before (own_first: after) its own; its docstring gains an
    Args section from the schema's help (the descriptions Prefect shows).  The function takes them as **kwargs."""
    def wrap(fn):
        own = [p.replace(kind=p.KEYWORD_ONLY) for p in inspect.signature(fn, eval_str=True).parameters.values()
               if p.kind is not p.VAR_KEYWORD]
        render = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=TYPES[f.name],
                                    default=inspect.Parameter.empty if f.default is MISSING else f.default)
                  for f in PARAMS if f.name not in exclude and f.name not in {p.name for p in own}]
        fn.__signature__ = inspect.Signature([*own, *render] if own_first else [*render, *own])
        described = [f"    {p.name}: {d}" for p in render if (d := describe(BY_NAME[p.name]))]
        fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + "\n\nArgs:\n" + "\n".join(described)
        return fn
    return wrap


def describe(f: Field) -> str | None:
    """A parameter's description in a flow: its help, and for a --no-NAME flag what False means."""
    h = help_of(f)
    return h and (f"false is {flag(f)}: {h}" if flag(f).startswith("--no-") else h)
