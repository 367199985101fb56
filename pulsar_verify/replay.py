"""Re-execute an ITF counterexample against the model and re-check its property."""
from __future__ import annotations

import json
from pathlib import Path

import attrs

from . import registry
from .explorer import DEADLOCK
from .fingerprint import fingerprint
from .itf import action_of, from_itf, state_vars
from .model import Model, UsageError


class TraceError(UsageError):
    """An invalid or mismatched trace file (exit 2)."""


@attrs.frozen
class Outcome:
    reproduced: bool
    message: str
    steps: int
    states: tuple = attrs.field(default=(), eq=False, repr=False)  # the re-executed trace
    actions: tuple = attrs.field(default=(), eq=False, repr=False)


def load(path: str | Path) -> dict:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("#meta"), dict):
        raise TraceError(f"{path}: not an ITF trace: no '#meta' object")
    if not isinstance(doc.get("states"), list) or not doc["states"]:
        raise TraceError(f"{path}: not an ITF trace: 'states' must be a non-empty list")
    return doc


def model_for(doc: dict, path, variant: str | None = None) -> Model:
    meta = doc["#meta"]
    for key in ("model", "variant", "config", "violation"):
        if key not in meta:
            raise TraceError(f"{path}: '#meta' has no field '{key}'")
    try:
        values = {k: from_itf(v) for k, v in meta["config"].items()}
        return registry.build(meta["model"], variant or meta["variant"], values=values)
    except (UsageError, AttributeError, ValueError) as exc:
        raise TraceError(f"{path}: {exc}") from None


def replay(path: str | Path, variant: str | None = None) -> Outcome:
    """Re-execute the trace. With ``variant`` (another variant of the same model), the
    file's actions are tried against that variant instead: the recorded states are not
    compared (the variant changes them), and a step that is no longer enabled means the
    variant does not allow this scenario (the violation does not reproduce: exit 0)."""
    doc = load(path)
    model = model_for(doc, path, variant)
    other = variant is not None and variant != doc["#meta"]["variant"]
    violation = doc["#meta"]["violation"]
    pid, kind = violation.get("property"), violation.get("kind")
    prop = DEADLOCK if kind == "deadlock" else None
    if prop is None:
        try:
            prop = model.property(pid)
        except KeyError:
            raise TraceError(f"{path}: '#meta.violation.property': model {model.name} variant "
                             f"{model.config.variant} has no property {pid!r}") from None
    entries = doc["states"]

    def vars_of(i, entry):
        if not isinstance(entry, dict) or "mbt::actionTaken" not in entry:
            raise TraceError(f"{path}: states[{i}]: missing 'mbt::actionTaken'")
        return {k: v for k, v in entry.items() if not k.startswith("#") and not k.startswith("mbt::")}

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
        except (ValueError, TypeError, AttributeError) as exc:
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
    if prop.kind == "invariant":
        held = prop.check(model, states[-1])
    elif prop.kind == "action":
        if not actions:
            raise TraceError(f"{path}: an action-property trace needs at least one step")
        held = prop.check(model, states[-2], actions[-1], states[-1])
    elif prop.kind == "deadlock":
        held = bool(model.successors(states[-1])) or model.is_terminal(states[-1])
    else:
        held = not _lasso_violates(model, prop, states, actions, doc.get("loop"), path, other)
    if held:
        return Outcome(False, f"{prop.id} holds at the end of the replayed trace ({steps} steps): "
                              f"the violation no longer reproduces", steps, tuple(states), tuple(actions))
    return Outcome(True, f"{prop.kind} {prop.id} violated after {steps} steps: {prop.statement}", steps,
                   tuple(states), tuple(actions))


def _lasso_violates(model, prop, states, actions, loop, path, other=False) -> bool:
    if not isinstance(loop, int) or not 0 <= loop < len(states):
        raise TraceError(f"{path}: 'loop': a liveness trace needs a loop index within the states")
    last = len(states) - 1
    if loop == last:  # stuttering forever: allowed only where no weakly fair action is enabled
        cycle = [states[last]]
        if any(a.name in prop.fair for a in model.actions(states[last])):
            return False
        taken = set()
    else:
        if fingerprint(model.canonicalize(states[last])) != fingerprint(model.canonicalize(states[loop])):
            if other:
                return False  # under the other variant the loop no longer closes
            raise TraceError(f"{path}: 'loop': the last state does not return to states[{loop}]")
        cycle = states[loop:last]
        taken = set(actions[loop:])
    # The trigger must hold at a point from which the goal never holds again.
    first_quiet = len(states)
    for j in range(len(states) - 1, -1, -1):
        if prop.goal(model, states[j]):
            break
        first_quiet = j
    if first_quiet > loop:
        return False
    if not any(prop.trigger is None or prop.trigger(model, states[j]) for j in range(first_quiet, loop + 1)):
        return False
    always = None
    for s in cycle:
        enabled = {a for a in model.actions(s) if a.name in prop.fair}
        always = enabled if always is None else always & enabled
    return not (always - taken)
