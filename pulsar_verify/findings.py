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


# What users lose, most first (issue scale): acknowledged data lost or data delivered that must never be;
# permanent unavailability or stuck progress without operator repair; temporary unavailability, or a loss
# that needs an operator mistake or an unsupported step; no loss, a divergence from the text worth fixing.
SEVERITIES = ("critical", "high", "medium", "low")
OBSERVATION = "observation"  # a counterexample in which no user loses anything: kept, never counted as a finding


@attrs.frozen
class Finding:
    model: str
    name: str
    title: str
    property: str
    bounds: str
    length: int
    fix: str
    severity: str  # one of SEVERITIES, or OBSERVATION
    loses: str  # one line: what users lose (for an observation, why nobody does)

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
        if f.severity not in (*SEVERITIES, OBSERVATION) or not f.loses:
            raise ModelDefinitionError(f"{path}: finding {f.name} needs a severity ({', '.join(SEVERITIES)} or "
                                       f"{OBSERVATION}) and what users lose")
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
