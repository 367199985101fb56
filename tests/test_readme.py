"""The README's findings tables are the catalogue's: each finding's row (title, severity, property, bounds,
length, fix) is there as the catalogue has it, findings in one table and observations in another, so a model
change that moves a finding cannot leave the README behind. ``python -m tests.test_readme`` prints the tables."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pulsar_verify import registry
from pulsar_verify.findings import catalogue

README = Path(__file__).parent.parent / "README.md"
SHARED = ("v4-txn", "pip-373")  # one README section, with a model column
FINDINGS = [f for cls in registry.all_models() for f in catalogue(cls.name)]


def row(f) -> str:
    lasso = "loop" in json.loads(f.trace.read_text())
    cells = ([f"`{f.model}`"] if f.model in SHARED else []) + [f.title] + ([] if f.observation else [f.severity])
    cells += [f"`{f.property}`", f.bounds, f"{f.length}{' (lasso)' if lasso else ''}", f"`{f.fix}`"]
    return "| " + " | ".join(cells) + " |"


def header(observations: bool, shared: bool) -> list[str]:
    cells = (["model"] if shared else []) + (["observation"] if observations else ["finding", "severity"])
    cells += ["property violated", "bounds", "steps", "fix variant"]
    rule = ["---"] * len(cells)
    rule[-2] = "---:"
    return ["| " + " | ".join(cells) + " |", "|" + "|".join(rule) + "|"]


def tables(models) -> str:
    found = sorted((f for f in FINDINGS if f.model in models), key=lambda f: f.rank)  # stable: catalogue order
    shared = any(m in SHARED for m in models)
    out = []
    for observations in (False, True):
        rows = [row(f) for f in found if f.observation == observations]
        if rows:
            out += ([""] if out else []) + header(observations, shared) + rows
    return "\n".join(out)


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f"{f.model}:{f.name}")
def test_the_readme_shows_each_finding_as_the_catalogue_has_it(finding):
    lines = README.read_text().splitlines()
    assert row(finding) in lines
    start = lines.index(row(finding))
    while lines[start - 1].startswith("|"):
        start -= 1
    first = lines[start].strip("| ").split(" | ")[1 if finding.model in SHARED else 0]
    assert first == ("observation" if finding.observation else "finding")  # observations listed apart


if __name__ == "__main__":
    for models in (("pip-473",), SHARED, ("v4-impl",), ("pip-468",), ("pip-477",)):
        print(f"<!-- {', '.join(models)} -->\n{tables(models)}\n")


def test_the_step_encodings_bounds_in_the_readme_are_the_explorers_depths_plus_one():
    """Where the README's Z3 table gives a step encoding's bound as a number ("`default` (up to 18 steps)"),
    it is the explorer's depth there plus one, as the encoding computes it."""
    import importlib
    import re

    from pulsar_verify.properties.obligations import explorer_depth
    checked = 0
    for line in README.read_text().splitlines():
        module = re.search(r"properties/(\w+_steps)\.py", line)
        if not module or "depth plus one" not in line:
            continue
        enc = importlib.import_module(f"pulsar_verify.properties.{module.group(1)}")
        model = enc.encoding.__self__.model  # ``encoding``: the encoding class's ``at``
        for preset, steps in re.findall(r"`([\w-]+)` \(up to (\d+)", line):
            assert int(steps) == explorer_depth(model, preset, enc.VARIANTS) + 1, (module.group(1), preset)
            checked += 1
    assert checked >= 4
