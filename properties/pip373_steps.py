"""Bounded model checking of PIP-373 step for step: ``v4txn_steps``' encoding of one topic's v4
transaction path with the ``__contains_txn_messages`` property added, as ``models/pip373`` adds it
to ``models/v4txn``: the persisted property (value, and whether the broker wrote it), the write
queued in broker memory, the three ways a load goes (skip, rebuild, confirm by scanning), the
property write, the append waiting for it (``persist-before-append``) and the admin API. These are
read off the model's own functions (``tabulated``), as are three of its properties (``READ_OFF``); the v4
encoding underneath, the rebuilds and the other properties are written from the PIP.

The seven safety properties of ``invariants/pip373`` are formulas over a step (its leads-to properties are
the explorer's alone). At the bounds the findings
are at, every variant (mutants too) gets the explorer's verdicts and counterexample lengths.
"""
from __future__ import annotations

import z3

from pulsar_verify.model import act
from pulsar_verify.values import replace

from .obligations import Obligation, explorer_depth, finding_bounds, finding_variants
from .pip373_flag import BOOL, WRITES, stand_in
from .tabulated import Table, Tripwire, taking
from .v4txn_steps import KIND, Steps

ABSENT, TRUE, FALSE, JUNK = 0, 1, 2, 3  # the persisted property; a queued write is TRUE, FALSE or 0
VALUE = {"absent": ABSENT, "true": TRUE, "false": FALSE, "junk": JUNK}
FLAG = {None: 0, "true": TRUE, "false": FALSE}
LOADS = ("load_confirm", "load_rebuild", "load_skip")
READ_OFF = ("flag-never-cleared", "flag-system-owned", "non-boolean-kept")  # invariants/pip373's own checks
SECTION = ("PIP-373: 'set to true when the first TXN message is publishing'; 'skip ... if the property is false'; "
           "Upgrade; 'NotAllowedException'; PIP-473 Background (the v4 TC, buffer and dispatcher)")
PRESETS = finding_bounds("pip-373")
VARIANTS = finding_variants("pip-373", PRESETS)


class Pip373Steps(Steps):
    model = "pip-373"
    properties = ("read-committed", "committed-never-filtered", "txn-topic-never-skips", "flag-never-cleared",
                  "flag-system-owned", "skip-when-no-txn", "non-boolean-kept")
    liveness = ()

    def __init__(self, config):
        from pulsar_verify.models.pip373.model import APPLY, UPGRADES, Pip373
        super().__init__(config)
        self.upgrade = UPGRADES[config.upgrade]
        self.m, self.apply = Pip373(config), APPLY
        fields = {"value": VALUE, "by_broker": BOOL, "flag": FLAG, "ready": BOOL,
                  "crashes": {n: n for n in range(config.crashes + 1)}}
        self.table = Table(fields, lambda v, name: v[name], stand_in)

    def legacy_log(self, config) -> tuple:
        from pulsar_verify.models.pip373.model import LEGACY
        return tuple((KIND[kind], t) for kind, t in LEGACY[config.legacy])

    def extra(self):
        return ["flag", "value"], ["by_broker"]

    def emptied(self) -> dict:
        return {**super().emptied(), "flag": 0}

    def rebuilt(self, v) -> dict:
        return {**super().rebuilt(v), "flag": 0}

    def loads(self, v, unloaded) -> dict:
        """Which load the model takes, read off ``Pip373.loads``; what each builds, the v4 encoding's."""
        guards = self.table.enabled(lambda s: self.m.loads(s, 0), self.label, v, key="loads",
                                    labels=self.m.load_labels())
        built = {"load_confirm": {**self.rebuilt(v), "flag": z3.If(v.holds_txn_entry(), TRUE, FALSE)},
                 "load_skip": {**self.emptied(), "ready": True}, "load_rebuild": self.rebuilt(v)}
        return {label: (z3.And(unloaded, guard), built[label]) for label, guard in guards.items()}

    def may_append(self, v):
        return self.table.holds(self.m.may_append, v, key="may_append")

    def on_append(self, v) -> dict:
        """'set to true when the first TXN message is publishing': ``Pip373.on_txn_append``."""
        return self.table.effect(lambda s: replace(s, buffers=(self.m.on_txn_append(s, 0, s.buffers[0]),)),
                                 WRITES, v, key="on_append")

    def more(self, v) -> dict:
        """The property's write and the admin API (``Pip373.flag_actions``), and the request of the write
        (``persist-before-append``), all read off the model."""
        out = {}
        for label, guard in self.table.enabled(self.m.flag_actions, self.label, v, key="flag_actions").items():
            step = taking(self.m.flag_actions, self.label, label, lambda s, a: self.apply[a.name](self.m, s, a))
            out[label] = (guard, self.table.effect(step, WRITES, v, key=label))
        asks = z3.And(z3.Not(self.may_append(v)), self.table.holds(self.m.asks_flag, v, key="asks_flag"))
        for t in self.txns if "request_flag" in self.m.action_names() else ():
            request = act("request_flag", txn=t, topic=0)
            out[self.label(request)] = (z3.And(v[f"pub{t}"], v["ready"], asks), self.table.effect(
                lambda s, a=request: self.apply[a.name](self.m, s, a), WRITES, v, key=self.label(request)))
        return out

    def breaks(self, prop: str, v, label: str, w):
        if prop in READ_OFF:  # the model's own check, on the steps it constrains
            p, name = next(p for p in self.m.props if p.id == prop), label.split("(")[0]
            if p.on and name not in p.on:
                return z3.BoolVal(False)
            a = act(name) if p.on else Tripwire(-1, "action")  # a check of every step reads no action
            return self.table.holds(lambda s, t: not p.check(self.m, s, a, t), v, w, key=(prop, p.on and name))
        if prop == "txn-topic-never-skips" and label == "load_skip":
            return v.holds_txn_entry()
        if prop == "skip-when-no-txn" and label in LOADS and label != "load_skip":
            legacy = z3.Or(False, *[z3.And(v[f"kind{i}"] != 0, v[f"txn{i}"] == t) for i in range(self.size)
                                    for t in self.ids if t not in self.txns])
            sent = z3.Or(legacy, *[v[f"sends{t}"] > 0 for t in self.txns])
            return z3.And(z3.Not(sent), v["value"] == FALSE, v["by_broker"])
        return super().breaks(prop, v, label, w)

    def init_extra(self, v) -> list:
        return [v["value"] == VALUE[self.upgrade[0]], v["by_broker"] == self.upgrade[1]]

    def concrete_extra(self, v, s) -> list:
        return [v["flag"] == FLAG[s.buffers[0].flag], v["value"] == VALUE[s.prop[0]],
                v["by_broker"] == bool(s.prop[1])]


encoding, disagreements = Pip373Steps.at, Pip373Steps.disagreements_of


def verdict(variant: str, preset: str):
    return encoding(variant, preset).verdict(explorer_depth("pip-373", preset, VARIANTS) + 1)


OBLIGATIONS = [
    Obligation("pip-373", f"steps-bounded-{preset}", f"each property's shortest breaking run of the whole model at the "
               f"{preset} bounds, step for step (up to the explorer's depth there plus one)", SECTION,
               lambda variant=variant, preset=preset: verdict(variant, preset), (variant,))
    for variant in VARIANTS for preset in PRESETS
]
