"""The design-review report: every finding appears with its sequence diagram and replay commands, every
action of every model has a place in the diagrams, and a verdict that differs from the expectations file makes
``review`` exit non-zero and say which."""
from __future__ import annotations

import json

import pytest

from pulsar_verify import registry
from pulsar_verify.findings import catalogue
from pulsar_verify.report import finding_section
from tests.helpers import cli

MODELS = [cls for cls in registry.all_models() if catalogue(cls.name)]


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.name)
def test_every_finding_is_drawn_with_its_replay_commands(cls):
    for f in catalogue(cls.name):
        text = "\n".join(finding_section(cls, f))
        assert f.title in text
        diagram = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
        assert diagram.startswith("sequenceDiagram\n") and "participant" in diagram
        assert diagram.count("->>") == f.length
        assert (f"{f.property} violated" in diagram) or ("loops forever" in diagram) or ("stays here" in diagram)
        assert f"pulsar-verify replay findings/{cls.name}/{f.trace.name} " in text
        assert f"--variant {f.fix}" in text


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.name)
def test_every_action_has_a_sender_and_a_receiver(cls):
    assert set(cls.action_labels) <= set(cls.sequence), sorted(set(cls.action_labels) - set(cls.sequence))
    assert all(arrow.count("->>") == 1 for arrow in cls.sequence.values())


def test_review_gates_on_expectations(tmp_path):
    out, expectations = tmp_path / "report", tmp_path / "expectations.json"
    args = ["review", "--models", "pip-373", "--engines", "local", "--out", str(out), "--expectations", str(expectations)]
    assert cli(*args, "--update-expectations").returncode == 0
    recorded = json.loads(expectations.read_text())
    assert recorded["pip-373"]["as-written"]["read-committed"] == "violated"
    same = cli(*args)
    assert same.returncode == 0, same.stderr
    page = (out / "pip-373.md").read_text()
    assert "```mermaid" in page and "pulsar-verify replay findings/pip-373/" in page
    assert (out / "pip-373-levels.png").stat().st_size > 0 and (out / "pip-373-coverage.png").exists()
    assert "Every verdict is the one" in (out / "index.md").read_text()

    recorded["pip-373"]["as-written"]["read-committed"] = "holds"  # as if the finding had been fixed upstream
    expectations.write_text(json.dumps(recorded))
    changed = cli(*args)
    assert changed.returncode == 1
    assert "pip-373 as-written read-committed: expected holds, got violated" in changed.stderr

    expectations.write_text("{not json")
    broken = cli(*args)
    assert broken.returncode == 2 and broken.stderr.count("\n") == 1 and "Traceback" not in broken.stderr
