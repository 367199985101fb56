"""The PIP-373 encodings read the property's logic off the model (``properties/tabulated.py``): a change to
the model shows up in them, a field read only by identity is still found, and a field the encoding does not
keep is named, not guessed."""
from __future__ import annotations

import pytest

from pulsar_verify import registry
from pulsar_verify.model import act
from pulsar_verify.models.pip373.model import Pip373
from pulsar_verify.properties import agreement, pip373_flag as zf, pip373_steps as z373
from pulsar_verify.properties.obligations import sat
from pulsar_verify.properties.tabulated import Table
from pulsar_verify.values import replace


@pytest.fixture
def fresh():
    """``pip373_flag`` reads the model afresh, and what it read is not kept for the tests after."""
    zf.read_off.cache_clear()
    yield
    zf.read_off.cache_clear()


def test_a_change_to_the_model_shows_up_in_both_encodings(fresh, monkeypatch):
    """The load that skips, as the model has it and with the model changed to always rebuild."""
    assert sat(zf.skippable(zf.Vars(""), ()))
    steps = z373.Pip373Steps.at("as-written", "default")
    assert sat(steps.loads(steps.vars(""), True)["load_skip"][0])
    monkeypatch.setattr(Pip373, "loads", lambda m, s, topic: iter([act("load_rebuild", topic=topic)]))
    zf.read_off.cache_clear()
    assert not sat(zf.skippable(zf.Vars(""), ()))
    steps = z373.Pip373Steps.at("as-written", "default")
    assert not sat(steps.loads(steps.vars(""), True)["load_skip"][0])


def test_a_field_read_only_by_identity_is_found():
    """``flag_actions`` tests the queued write with ``is not None``: the property's write is still
    enabled only where a write is queued."""
    v = zf.Vars("")
    m, table = zf.read_off(())
    persist = table.enabled(m.flag_actions, zf.NAME, v)["persist_flag"]
    assert sat(persist) and not sat(persist, v.queued == zf.Q_NONE)


def test_a_field_the_encoding_does_not_keep_is_named():
    """Without the crashes, the mutant that never reloads after one cannot be read off."""
    m = registry.build("pip-373", "mutant:no-reload-after-crash")
    table = Table(zf.FIELDS, lambda v, name: getattr(v, zf.VARIABLE.get(name, name)), zf.stand_in)
    with pytest.raises(ValueError, match="reads field crashes"):
        table.enabled(lambda s: m.loads(s, 0), zf.NAME, zf.Vars(""))


def test_the_derived_encoding_still_fails_the_agreement_check_when_the_model_drifts():
    """The encodings follow the model they are built from; the agreement check compares them with the model
    the explorer runs. Built from a property write that forgets it was the broker's, they disagree."""
    class Drifted(z373.Pip373Steps):
        def __init__(self, config):
            super().__init__(config)
            persist = self.apply["persist_flag"]
            self.apply = {**self.apply, "persist_flag": lambda m, s, a: replace(t := persist(m, s, a),
                                                                              prop=(t.prop[0], False))}
    r = agreement.check(Drifted, "confirm-unmarked", "default")
    assert r.disagreements and any("persist_flag" in p and "by_broker" in p for p in r.problems)
