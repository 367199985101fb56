"""Re-execute an ITF counterexample against the model and re-check its property."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from . import registry
from .fingerprint import fingerprint
from .itf import action_of, from_itf, state_vars
from .model import DEADLOCK, Model, Property, UsageError


class TraceError(UsageError):
    """An invalid or mismatched trace file (exit 2)."""


@attrs.frozen
class Outcome:
    reproduced: bool
    message: str
    steps: int
    states: tuple = attrs.field(default=(), eq=False, repr=False)  # the re-executed trace
    actions: tuple = attrs.field(default=(), eq=False, repr=False)


KINDS = ("invariant", "action", "liveness", "deadlock", "target")


def load(path: str | Path) -> dict:
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise TraceError(f"{path}: JSON nested too deeply") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("#meta"), dict):
        raise TraceError(f"{path}: not an ITF trace: no '#meta' object")
    if not isinstance(doc.get("states"), list) or not doc["states"]:
        raise TraceError(f"{path}: not an ITF trace: 'states' must be a non-empty list")
    return doc


def _field(meta: dict, key: str, kind: type, path) -> Any:
    if key not in meta:
        raise TraceError(f"{path}: '#meta' has no field '{key}'")
    if not isinstance(meta[key], kind):
        raise TraceError(f"{path}: '#meta.{key}' must be {'an object' if kind is dict else 'a string'}")
    return meta[key]


def decoded(v: Any, where: str, path) -> Any:
    """An ITF value decoded, or a one-line error naming where it is in the file."""
    try:
        return from_itf(v)
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
        raise TraceError(f"{path}: {where}: not an ITF value ({type(exc).__name__})") from None


def model_for(doc: dict, path, variant: str | None = None) -> Model:
    """The recorded model, variant and bounds; every setting passes the checks of ``--set``."""
    meta = doc["#meta"]
    name, recorded = _field(meta, "model", str, path), _field(meta, "variant", str, path)
    config = _field(meta, "config", dict, path)
    _field(meta, "violation", dict, path)
    values = {k: decoded(v, f"'#meta.config.{k}'", path) for k, v in config.items()}
    try:
        return registry.build(name, variant or recorded, values=values)
    except UsageError as exc:
        raise TraceError(f"{path}: {exc}") from None


def recorded_property(model: Model, violation: dict, path) -> Property:
    """The property the file says was violated: the model's own, of the recorded kind."""
    pid, kind = violation.get("property"), violation.get("kind")
    if kind not in KINDS:
        raise TraceError(f"{path}: '#meta.violation.kind' must be one of {', '.join(KINDS)}, not {kind!r}")
    if pid == DEADLOCK.id:
        prop = DEADLOCK
    else:
        try:
            prop = model.property(pid)
        except (KeyError, TypeError):
            raise TraceError(f"{path}: '#meta.violation.property': model {model.name} has no property "
                             f"{pid!r}") from None
    if prop.kind != kind:
        raise TraceError(f"{path}: '#meta.violation': {pid!r} is of kind {prop.kind} in {model.name}, not {kind}")
    return prop


def replay(path: str | Path, variant: str | None = None) -> Outcome:
    """Re-execute the trace. With ``variant`` (another variant of the same model), the
    file's actions are tried against that variant instead: the recorded states are not
    compared (the variant changes them), and a step that is no longer enabled means the
    variant does not allow this scenario (the violation does not reproduce: exit 0)."""
    doc = load(path)
    model = model_for(doc, path, variant)
    other = variant is not None and variant != doc["#meta"]["variant"]
    wanted = None  # a target search's trace: the target it reached, instead of a property
    if doc["#meta"]["violation"].get("kind") == "target":
        from .target import Aim, TargetSearch
        try:
            wanted = TargetSearch(model, Aim.from_dict(doc["#meta"].get("target")))
        except UsageError as exc:
            raise TraceError(f"{path}: '#meta.target': {exc}") from None
        prop = wanted.props[0]
    else:
        prop = recorded_property(model, doc["#meta"]["violation"], path)
    entries = doc["states"]

    def vars_of(i, entry):
        if not isinstance(entry, dict) or "mbt::actionTaken" not in entry:
            raise TraceError(f"{path}: states[{i}]: missing 'mbt::actionTaken'")
        return {k: v for k, v in entry.items() if not k.startswith("#") and not k.startswith("mbt::")}

    if prop.kind == "liveness" and "loop" not in doc:
        raise TraceError(f"{path}: 'loop': a liveness trace needs the index its loop returns to")

    def mismatch(i, expected, got):
        names = sorted(k for k in set(expected) | set(got) if expected.get(k) != got.get(k))
        return f"variable {names[0]!r}" if names else "no variable"

    want = vars_of(0, entries[0])
    states = [s for s in model.init_states() if other or state_vars(s) == want][:1]
    if not states:
        raise TraceError(f"{path}: states[0]: not an initial state of {model.name} "
                         f"({mismatch(0, state_vars(model.init_states()[0]), want)} differs)")
    actions = []
    state = states[0]
    for i, entry in enumerate(entries[1:], start=1):
        want = vars_of(i, entry)
        try:
            action = action_of(entry)
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            raise TraceError(f"{path}: states[{i}]: bad action: {exc}") from None
        if action not in list(model.actions(state)):
            if other:
                return Outcome(False, f"variant {variant}: step {i}, {action}, is not enabled: "
                                      f"the scenario cannot happen", i - 1)
            raise TraceError(f"{path}: states[{i}]: {action} is not enabled in states[{i - 1}]")
        state = model.next_state(state, action)
        got = state_vars(state)
        if got != want and not other:
            raise TraceError(f"{path}: states[{i}]: after {action} the model's {mismatch(i, got, want)} "
                             f"differs from the file")
        states.append(state)
        actions.append(action)

    steps = len(actions)
    loop_text = ""
    if wanted is not None:
        if wanted.reached_by(actions, states[-1]):
            return Outcome(True, f"target reached after {steps} steps: {wanted.statement}", steps, tuple(states),
                           tuple(actions))
        return Outcome(False, f"the target is not reached at the end of the replayed trace ({steps} steps): "
                              f"{wanted.statement}", steps, tuple(states), tuple(actions))
    if prop.kind == "invariant":
        held = prop.check(model, states[-1])
    elif prop.kind == "action":
        if not actions:
            raise TraceError(f"{path}: an action-property trace needs at least one step")
        held = prop.check(model, states[-2], actions[-1], states[-1])
    elif prop.kind == "deadlock":
        held = bool(model.successors(states[-1])) or model.is_terminal(states[-1])
    else:
        loop = doc["loop"]
        if isinstance(loop, bool) or not isinstance(loop, int) or not 0 <= loop < len(states):
            raise TraceError(f"{path}: 'loop' must be a state index from 0 to {len(states) - 1}, not {loop!r}")
        problem, loop_text = lasso_problem(model, prop, states, actions, loop)
        if problem and not other:
            raise TraceError(f"{path}: not a fair lasso of {model.name} violating {prop.id}: {problem}")
        held = problem is not None
    if held:
        return Outcome(False, f"{prop.id} holds at the end of the replayed trace ({steps} steps): "
                              f"the violation no longer reproduces", steps, tuple(states), tuple(actions))
    return Outcome(True, f"{prop.kind} {prop.id} violated after {steps} steps: {prop.statement}" + loop_text, steps,
                   tuple(states), tuple(actions))


def lasso_problem(model, prop, states, actions, loop: int) -> tuple[str | None, str]:
    """Why the trace is not a fair lasso on which ``prop`` fails (None if it is one), and a
    description of its loop: where it starts, the fair actions enabled and taken in it."""
    last = len(states) - 1
    if loop == last:  # stuttering forever: a fair lasso only where no weakly fair action is enabled
        cycle, taken = [states[last]], set()
    else:
        if fingerprint(model.canonicalize(states[last])) != fingerprint(model.canonicalize(states[loop])):
            return f"the last state does not return to states[{loop}]", ""
        cycle, taken = states[loop:last], {a for a in actions[loop:] if a.name in prop.fair}
    always = None
    for s in cycle:
        enabled = {a for a in model.actions(s) if a.name in prop.fair}
        always = enabled if always is None else always & enabled
    text = (f"\n  loop: from state {loop} back to it" + (" (stutters there)" if loop == last else
                                                       f", {last - loop} steps") +
            f"\n  weakly fair actions enabled throughout the loop: {_names(always)}"
            f"\n  weakly fair actions taken in the loop: {_names(taken)}")
    if always - taken:
        return f"{_names(always - taken)} stays enabled in the loop but is never taken", text
    # The trigger must hold at a point from which the goal never holds again.
    first_quiet = len(states)
    for j in range(last, -1, -1):
        if prop.goal(model, states[j]):
            break
        first_quiet = j
    if first_quiet > loop:
        return f"the goal of {prop.id} holds inside the loop", text
    if not any(prop.trigger is None or prop.trigger(model, states[j]) for j in range(first_quiet, loop + 1)):
        return f"the trigger of {prop.id} never holds where the goal stays false", text
    return None, text


def _names(actions) -> str:
    return ", ".join(sorted(str(a) for a in actions)) or "none"
