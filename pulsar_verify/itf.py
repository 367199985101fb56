"""Counterexamples in the Informal Trace Format (ITF, as used by Apalache and Quint).

Values: ints as ``{"#bigint": "n"}``, tuples as ``{"#tup": [...]}``,
frozensets as ``{"#set": [...]}``, ``FrozenMap`` as ``{"#map": [[k, v], ...]}``,
attrs values as records (JSON objects), ``None`` as ``{"tag": "None"}``.
Each state records the action that produced it in ``mbt::actionTaken`` and its
parameters in ``mbt::nondetPicks`` (Quint's model-based-testing convention).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from . import __version__
from .model import Action, Model
from .values import FrozenMap

INIT_ACTION = "init"


def to_itf(v: Any) -> Any:
    if isinstance(v, bool) or isinstance(v, str):
        return v
    if isinstance(v, int):
        return {"#bigint": str(v)}
    if v is None:
        return {"tag": "None"}
    if isinstance(v, FrozenMap):
        return {"#map": [[to_itf(k), to_itf(x)] for k, x in v.items()]}
    if isinstance(v, tuple):
        return {"#tup": [to_itf(x) for x in v]}
    if isinstance(v, frozenset):
        items = [to_itf(x) for x in v]
        items.sort(key=lambda x: json.dumps(x, sort_keys=True))
        return {"#set": items}
    if attrs.has(type(v)):
        return {f.name: to_itf(getattr(v, f.name)) for f in attrs.fields(type(v))}
    raise TypeError(f"no ITF encoding for {type(v).__name__}")


def from_itf(v: Any) -> Any:
    """Decode an ITF value into plain Python data (records become dicts)."""
    if isinstance(v, (bool, str, int)) or v is None:
        return v
    if isinstance(v, list):
        return tuple(from_itf(x) for x in v)
    if isinstance(v, dict):
        if "#bigint" in v:
            return int(v["#bigint"])
        if "#tup" in v:
            return tuple(from_itf(x) for x in v["#tup"])
        if "#set" in v:
            return frozenset(from_itf(x) for x in v["#set"])
        if "#map" in v:
            return FrozenMap((from_itf(k), from_itf(x)) for k, x in v["#map"])
        if v.get("tag") == "None" and len(v) == 1:
            return None
        return {k: from_itf(x) for k, x in v.items()}
    raise ValueError(f"not an ITF value: {v!r}")


def state_vars(state) -> dict[str, Any]:
    """The ITF variables of a state: its top-level attrs fields."""
    return {f.name: to_itf(getattr(state, f.name)) for f in attrs.fields(type(state))}


def trace_document(model: Model, states: list, actions: list[Action], violation: dict,
                   loop: int | None = None) -> dict:
    """``actions[i]`` produced ``states[i + 1]``; ``loop`` is the index the lasso returns to."""
    doc_states = []
    for i, state in enumerate(states):
        entry = {"#meta": {"index": i}}
        entry.update(state_vars(state))
        action = actions[i - 1] if i else Action(INIT_ACTION)
        entry["mbt::actionTaken"] = action.name
        entry["mbt::nondetPicks"] = {k: to_itf(x) for k, x in action.params}
        doc_states.append(entry)
    meta = {
        "format": "ITF",
        "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
        "source": "pulsar-verify",
        "tool-version": __version__,
        "model": model.name,
        "variant": model.config.variant_name,
        "config": {k: to_itf(x) for k, x in model.config.as_dict().items()},
        "violation": violation,
        "description": f"{violation.get('kind')} {violation.get('property')} violated: "
                       f"{violation.get('statement', '')}",
    }
    doc = {"#meta": meta, "vars": list(doc_states[0].keys() - {"#meta", "mbt::actionTaken",
                                                                "mbt::nondetPicks"}),
           "states": doc_states}
    doc["vars"].sort()
    if loop is not None:
        doc["loop"] = loop
    return doc


def write_trace(path: Path, doc: dict) -> Path:
    """Write atomically, so an interrupted run never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)
    return path


def action_of(entry: dict) -> Action:
    name, picks = entry["mbt::actionTaken"], entry.get("mbt::nondetPicks", {})
    if not isinstance(name, str) or not isinstance(picks, dict):
        raise ValueError("'mbt::actionTaken' must be a string and 'mbt::nondetPicks' an object")
    return Action(name, tuple((k, from_itf(v)) for k, v in picks.items()))
