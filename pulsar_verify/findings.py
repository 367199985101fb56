"""The catalogue of findings: ``findings/<model>/index.json`` lists, for each flaw of a
design as written, the property it violates, the bounds it shows at, the length of its
shortest counterexample, and the variant that fixes it. Next to it: the counterexample
(``<name>.itf.json``) and its explanation (``<name>.md``).

``python -m pulsar_verify.findings MODEL`` rewrites the counterexample files from the
model (after a deliberate model change); tests check the checker still finds each one.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import attrs

from . import catalogue, registry
from .explorer import explore
from .itf import trace_document, write_trace
from .model import ModelDefinitionError, UsageError

FINDINGS_DIR = Path(catalogue.__file__).parent  # findings/ in a checkout, pulsar_verify/catalogue installed
EXPECTATIONS = FINDINGS_DIR / "expectations.json"


SEVERITIES = ("critical", "high", "medium", "low")
OBSERVATION = "observation"  # a counterexample in which no user loses anything: kept, never counted as a finding

# The severity rubric (docs/severity.md): a finding declares what users lose and the path that leads there, and
# its severity is read off the two. What users lose, most first:
LOSSES = {
    "data": "acknowledged data lost or unreadable for good, or data delivered that must never be (an open or "
            "aborted transaction's)",
    "duplicates": "work done twice: acknowledged messages delivered again, or an application told that a "
                  "committed transaction failed",
    "stuck": "progress that stops for good without an operator's repair: writes, deliveries, a transaction, a read",
    "delay": "a stall or an outage that ends on its own or with a routine step, or a wrong answer corrected later",
    "leak": "resources held for good (metadata, memory) or a wrong figure, with data and progress unharmed",
    "none": "nobody loses anything in the trace: an observation",
}
# The path, most common first. A design must survive crashes, failovers and its documented operator commands, so
# those rate as the normal path does; only a mistake or an unsupported step lowers the severity, by one.
PATHS = {
    "normal": "no fault and no operator: concurrent clients, timeouts, topic moves and unloads",
    "fault": "a crash, a restart, a lost session, a leader failover or a cluster going down",
    "operator": "a documented operator command: a switch, rollback or close-client, a split or merge, a "
                "subscription created, an upgrade",
    "mistake": "an operator's or a user's mistake, or a step the text does not support",
}
RATING = {"data": "critical", "duplicates": "high", "stuck": "high", "delay": "medium", "leak": "low",
          "none": OBSERVATION}


def rated(loss: str, path: str) -> str:
    """The severity the rubric gives a finding that loses ``loss`` on ``path``."""
    severity = RATING[loss]
    if path == "mistake" and severity in SEVERITIES:
        return SEVERITIES[min(SEVERITIES.index(severity) + 1, len(SEVERITIES) - 1)]
    return severity


@attrs.frozen
class Finding:
    model: str
    name: str
    title: str
    property: str
    bounds: str
    length: int
    fix: str
    severity: str  # one of SEVERITIES, or OBSERVATION: ``rated(loss, path)``
    loses: str  # one line: what users lose (for an observation, why nobody does)
    loss: str  # the class of what users lose: one of LOSSES
    path: str  # how common the path to it is: one of PATHS

    @property
    def observation(self) -> bool:
        return self.severity == OBSERVATION

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity) if not self.observation else len(SEVERITIES)

    @property
    def trace(self) -> Path:
        return FINDINGS_DIR / self.model / f"{self.name}.itf.json"

    @property
    def explanation(self) -> Path:
        return FINDINGS_DIR / self.model / f"{self.name}.md"


def catalogue(model: str) -> list[Finding]:
    """The model's findings; each names a property, bound set and fix variant the model has."""
    path = FINDINGS_DIR / model / "index.json"
    if not path.exists():
        return []
    found = [Finding(model=model, **entry) for entry in json.loads(path.read_text())]
    cls = registry.model_class(model)
    for f in found:
        for what, name, known in (("property", f.property, cls.property_ids()), ("bounds", f.bounds, cls.presets),
                                  ("fix variant", f.fix, cls.variant_names())):
            if name not in known:
                raise ModelDefinitionError(f"{path}: finding {f.name} names {what} {name!r}, which {model} lacks")
        if f.loss not in LOSSES or f.path not in PATHS or not f.loses:
            raise ModelDefinitionError(f"{path}: finding {f.name} needs what users lose (loses, and loss: one of "
                                       f"{', '.join(LOSSES)}) and its path (one of {', '.join(PATHS)})")
        if f.severity != rated(f.loss, f.path):
            raise ModelDefinitionError(f"{path}: finding {f.name} is rated {f.severity}; the rubric gives "
                                       f"{rated(f.loss, f.path)} to a {f.loss} loss on a {f.path} path "
                                       f"(docs/severity.md)")
    return found


def shortest(finding: Finding, variant: str | None = None):
    """The shortest violation of the finding's property at its bounds, or None."""
    model = registry.build(finding.model, variant, preset=finding.bounds)
    result, _ = explore(model)
    return model, next((v for v in result.violations if v.prop.id == finding.property), None)


def regenerate(model_name: str) -> list[str]:
    lines = []
    for f in catalogue(model_name):
        model, v = shortest(f)
        if v is None:
            raise UsageError(f"{f.name}: {f.property} no longer violated at bounds {f.bounds}")
        write_trace(f.trace, trace_document(model, v.states, v.actions, v.as_dict(), v.loop))
        lines.append(f"{f.name}: {f.property}, {v.length} steps" +
                     ("" if v.length == f.length else f" (index says {f.length}: update it)"))
    return lines


if __name__ == "__main__":
    for name in sys.argv[1:] or ["pip-473"]:
        print("\n".join(regenerate(name)))
