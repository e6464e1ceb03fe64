"""The Python API's edge: its errors, one class per exit code, and its keywords, the options
ClusterOptions declares."""

from __future__ import annotations

import functools
import inspect

from tfhelm.cluster.options import ClusterOptions, declared


def raises_api_errors(fn):
    """Every failure leaves as the API's exception for its exit code (tfhelm.errors)."""
    @functools.wraps(fn)
    def api(*args, **kwargs):
        from tfhelm.apierrors import as_exception

        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - re-typed, same message, cause kept
            typed = as_exception(e)
            if typed is e:
                raise
            raise typed from e
    return api


def with_cluster_options(fn):
    """`fn(..., **options)` takes the options ClusterOptions declares (tfhelm/cluster/options.py)
    as keywords: its signature (help(), Jupyter's Shift-Tab) lists them, an unknown one is a
    TypeError."""
    names = [n for n, _ in declared()]
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
    fields = ClusterOptions.__dataclass_fields__
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=fields[n].type,
                                 default=[] if n in _LISTS else None)
               for n in names if n not in sig.parameters]

    @functools.wraps(fn)
    def taking(*args, **kwargs):
        unknown = sorted(k for k in kwargs if k not in names and k not in sig.parameters)
        if unknown:
            raise TypeError(f"{fn.__name__}() got an unexpected keyword argument '{unknown[0]}'")
        return fn(*args, **kwargs)
    taking.__signature__ = sig.replace(parameters=params)
    return taking


_LISTS = {n for n, f in ClusterOptions.__dataclass_fields__.items() if f.default_factory is list}
