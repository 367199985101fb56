"""What an exploration decides, on either engine: the run's counts and each violation with its
shortest counterexample (a lasso for liveness; none for a ``sometimes`` property, which a complete
search breaks by meeting no example), and the length of each ``sometimes`` property's shortest example."""
from __future__ import annotations

import attrs

from .model import Property


@attrs.define
class Violation:
    prop: Property
    states: list  # the counterexample, from an initial state
    actions: list  # actions[i] leads from states[i] to states[i + 1]
    loop: int | None = None  # lasso: index of the state the loop returns to

    @property
    def length(self) -> int:
        return len(self.actions)

    @property
    def traced(self) -> bool:
        """Whether it has a counterexample (a ``sometimes`` property's violation has none)."""
        return self.prop.kind != "sometimes"

    def as_dict(self) -> dict:
        d = {"property": self.prop.id, "kind": self.prop.kind, "statement": self.prop.statement,
             "section": self.prop.section, "length": self.length}
        if self.loop is not None:
            d["loop"] = self.loop
        if not self.traced:
            d["never"] = True  # no state the search reached is an example
        return d


@attrs.define
class Result:
    model: str
    variant: str
    config: dict
    engine: str = "local"
    distinct_states: int = 0
    transitions: int = 0
    depth: int = 0
    complete: bool = True
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    coverage: dict = attrs.Factory(dict)
    never_fired: list = attrs.Factory(list)
    unfired_system: list = attrs.Factory(list)  # system actions among them (a whole search only): the run fails
    violations: list = attrs.Factory(list)
    level_sizes: list = attrs.Factory(list)
    level_stats: list = attrs.Factory(list)  # per level: expanded, new, transitions, seconds, rate (Spark)
    liveness_checked: bool = False
    unreachable_goal: dict = attrs.Factory(dict)  # liveness id -> count of states that can never reach it
    examples: dict = attrs.Factory(dict)  # sometimes id -> length of its shortest example
    trace_files: list = attrs.Factory(list)
    properties: list = attrs.Factory(list)  # (id, kind) of every property the model was run with
    reduction: str = ""  # the symmetry the search reduced by ('' for the full search)
    # The questions the model asked of its variant (``pulsar_verify.asked``) when they were recorded,
    # None otherwise; and the variant whose run this is, when it is another variant's (``review``).
    asked: frozenset | None = None
    reused_from: str = ""
    stopped: str = ""  # why the search stopped before it was complete, when a caller chose to stop it

    @property
    def properties_checked(self) -> list[str]:
        """The ids of the properties this run decided: liveness only when it was checked, a ``sometimes``
        property when an example was met or the search was complete."""
        return [pid for pid, kind in self.properties if (kind != "liveness" or self.liveness_checked)
                and (kind != "sometimes" or self.complete or pid in self.examples)]

    @property
    def scope(self) -> str:
        """What a ``holds`` verdict of this run speaks of: '' for the whole reachable space at the bounds,
        else how far the search went (``up to depth 12, 5,000 states: max states``)."""
        if self.complete:
            return ""
        why = f": {self.stopped}" if self.stopped else ""
        return f"up to depth {self.depth}, {self.distinct_states:,} states{why}"

    def verdict(self, pid: str) -> str:
        """``violated``, ``holds`` (the whole reachable space), ``holds up to ...`` (a cut search) or
        ``not checked``."""
        if any(v.prop.id == pid for v in self.violations):
            return "violated"
        if pid not in self.properties_checked:
            return "not checked"
        return f"holds {self.scope}" if self.scope else "holds"

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> dict:
        return {
            "model": self.model, "variant": self.variant, "config": self.config, "engine": self.engine,
            "distinct_states": self.distinct_states, "transitions": self.transitions, "depth": self.depth,
            "complete": self.complete, "reduction": self.reduction, "seconds": round(self.seconds, 3),
            "states_per_second": round(self.states_per_second, 1), "peak_rss_mb": round(self.peak_rss_mb, 1),
            "coverage": self.coverage, "never_fired": self.never_fired, "unfired_system": self.unfired_system,
            "violations": [v.as_dict() for v in self.violations],
            "liveness_checked": self.liveness_checked, "unreachable_goal": self.unreachable_goal,
            "examples": self.examples,
            "properties_checked": self.properties_checked,
            "verdicts": {pid: self.verdict(pid) for pid, _ in self.properties},
            "properties_not_checked": [pid for pid, _ in self.properties if pid not in self.properties_checked],
            "level_sizes": self.level_sizes, "trace_files": [str(p) for p in self.trace_files],
            **({"reused_from": self.reused_from} if self.reused_from else {}),
            **({"stopped": self.stopped} if self.stopped else {}),
        }
