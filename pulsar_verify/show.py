"""Readable counterexamples: each step shown as the diff it makes."""
from __future__ import annotations

from typing import Any, Iterator

import attrs

from .values import FrozenMap


def _fmt(v: Any) -> str:
    if attrs.has(type(v)):
        inner = ", ".join(f"{f.name}={_fmt(getattr(v, f.name))}" for f in attrs.fields(type(v)))
        return f"{type(v).__name__}({inner})"
    if isinstance(v, FrozenMap):
        return "{" + ", ".join(f"{_fmt(k)}: {_fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, frozenset):
        return "{" + ", ".join(sorted(_fmt(x) for x in v)) + "}"
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v) if isinstance(v, str) else str(v)


def diff(old: Any, new: Any, path: str = "") -> Iterator[tuple[str, str, str]]:
    """(path, old, new) for every leaf that changed, descending into records and maps."""
    if old == new:
        return
    if attrs.has(type(old)) and type(old) is type(new):
        for f in attrs.fields(type(old)):
            yield from diff(getattr(old, f.name), getattr(new, f.name), f"{path}.{f.name}" if path else f.name)
        return
    if isinstance(old, FrozenMap) and isinstance(new, FrozenMap):
        keys = sorted(set(old.keys()) | set(new.keys()))
        for k in keys:
            sub = f"{path}[{_fmt(k)}]"
            if k not in old:
                yield sub, "-", _fmt(new[k])
            elif k not in new:
                yield sub, _fmt(old[k]), "-"
            else:
                yield from diff(old[k], new[k], sub)
        return
    if (type(old) is tuple and type(new) is tuple and len(old) == len(new)
            and any(attrs.has(type(x)) or isinstance(x, tuple) for x in old)):
        for i, (a, b) in enumerate(zip(old, new)):
            yield from diff(a, b, f"{path}[{i}]")
        return
    yield path, _fmt(old), _fmt(new)


def render_trace(states: list, actions: list, loop: int | None = None) -> str:
    lines = [f"  0. init: {_fmt(states[0])}"]
    for i, a in enumerate(actions, start=1):
        marker = "   <- loop starts here" if loop is not None and i - 1 == loop else ""
        lines.append(f"  {i}. {a}{marker}")
        changes = list(diff(states[i - 1], states[i]))
        for path, was, now in changes:
            lines.append(f"       {path}: {was} -> {now}")
        if not changes:
            lines.append("       (no change)")
    if loop is not None:
        if loop == len(states) - 1:
            lines.append(f"  ... stays in state {loop} forever: no weakly fair action is enabled there")
        else:
            lines.append(f"  ... back to state {loop}, and round again forever")
    return "\n".join(lines)
