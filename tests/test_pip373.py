"""PIP-373: the findings stay found, their fixes hold, every property can fail."""
from __future__ import annotations

import pytest
from hypothesis.stateful import run_state_machine_as_test

from pulsar_verify.models.pip373 import Pip373
from pulsar_verify import registry
from pulsar_verify.findings import catalogue
from pulsar_verify.hypo import machine_for
from tests import helpers
from tests.helpers import cli, explored

FINDINGS = catalogue("pip-373")
IN_PROCESS = Pip373.in_process_presets()
BROKEN = {
    "read-committed": ("as-written", "default"),
    "txn-topic-never-skips": ("as-written", "default"),
    "flag-never-cleared": ("mutant:admin-can-write", "default"),
    "flag-system-owned": ("mutant:admin-can-write", "default"),
    "skip-when-no-txn": ("mutant:always-rebuild", "default"),
    "committed-never-filtered": ("mutant:commit-marks-aborted", "default"),
    "end-txn-completes": ("mutant:no-reload-after-crash", "default"),
    "sends-complete": ("mutant:no-reload-after-crash", "default"),
    "flag-eventually-true": ("as-written", "default"),
    "non-boolean-kept": ("mutant:overwrite-non-boolean", "upgrade-non-boolean"),
}


def run(variant: str, preset: str):
    return explored("pip-373", variant, preset)


def violated(variant, preset) -> dict:
    return helpers.violated("pip-373", variant, preset)


def test_every_as_written_violation_has_a_finding():
    assert set().union(*(violated("as-written", p) for p in IN_PROCESS)) == {f.property for f in FINDINGS}


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_finding_is_still_found_and_its_fix_kills_it(finding):
    helpers.assert_finding_found_and_fixed(finding)


@pytest.mark.parametrize("preset", IN_PROCESS)
def test_all_fixes_satisfies_every_property(preset):
    result = run("all-fixes", preset)
    assert result.complete and result.violations == []


@pytest.mark.parametrize("prop", sorted(BROKEN))
def test_every_property_fails_on_a_broken_variant(prop):
    assert set(BROKEN) == {p.id for p in Pip373.declared_properties()}
    assert prop in violated(*BROKEN[prop])


def test_every_action_fires_somewhere():
    for variant in ("as-written", "all-fixes"):
        fired = set().union(*(run(variant, p).coverage for p in IN_PROCESS))
        assert set(registry.build("pip-373", variant).action_names()) - fired == set(), variant


def test_skipping_happens_where_the_pip_promises_it():
    """A new topic never sent a transactional message skips its rebuild on every load; a non-boolean
    value always rebuilds; an absent one is confirmed by a scan."""
    assert run("as-written", "upgrade-non-boolean").coverage.get("load_skip") is None
    assert run("all-fixes", "default").coverage["load_skip"] > 0
    assert run("as-written", "upgrade-absent").coverage["load_confirm"] > 0


def test_upgrade_setting_rejects_unknown_values():
    r = cli("explore", "pip-373", "--set", "upgrade=maybe")
    assert r.returncode == 2 and "expected one of" in r.stderr and "Traceback" not in r.stderr


def test_hypothesis_beyond_exhaustive_bounds(tmp_path):
    model = registry.build("pip-373", "all-fixes", values=registry.model_class("pip-373").hypothesis_bounds)
    run_state_machine_as_test(machine_for(model, tmp_path))
    assert not list(tmp_path.iterdir())
