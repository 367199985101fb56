"""Bounded model checking of PIP-373 step for step: ``v4txn_steps``' encoding of one topic's v4
transaction path with the ``__contains_txn_messages`` property added, as ``models/pip373`` adds it
to ``models/v4txn``: the persisted property (value, and whether the broker wrote it), the write
queued in broker memory, the three ways a load goes (skip, rebuild, confirm by scanning), the
property write, the append waiting for it (``persist-before-append``) and the admin API.

The seven safety properties of ``invariants/pip373`` are formulas over a step (its leads-to properties are
the explorer's alone). At the bounds the findings
are at, every variant (mutants too) gets the explorer's verdicts and counterexample lengths.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, explorer_depth, finding_bounds, finding_variants
from .v4txn_steps import KIND, Steps

ABSENT, TRUE, FALSE, JUNK = 0, 1, 2, 3  # the persisted property; a queued write is TRUE, FALSE or 0
VALUE = {"absent": ABSENT, "true": TRUE, "false": FALSE, "junk": JUNK}
LOADS = ("load_confirm", "load_rebuild", "load_skip")
ADMIN = ("admin_remove", "admin_update(false)", "admin_update(true)")
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
        from pulsar_verify.models.pip373.model import UPGRADES  # the bounds' data, not the model's behaviour
        super().__init__(config)
        self.upgrade = UPGRADES[config.upgrade]
        self.admin = config.admin

    def legacy_log(self, config) -> tuple:
        from pulsar_verify.models.pip373.model import LEGACY
        return tuple((KIND[kind], t) for kind, t in LEGACY[config.legacy])

    def extra(self):
        return ["flag", "value"], ["by_broker"]

    def emptied(self) -> dict:
        return {**super().emptied(), "flag": 0}

    def rebuilt(self, v) -> dict:
        return {**super().rebuilt(v), "flag": 0}

    def trusted(self, v):
        return v["by_broker"] if "confirm-unmarked" in self.fixes else z3.BoolVal(True)

    def flag_set(self, v):
        """The persisted property already says what a first transactional entry must make it say."""
        junk = z3.And(v["value"] == JUNK, self.variant != "mutant:overwrite-non-boolean")
        return z3.Or(junk, z3.And(v["value"] == TRUE, self.trusted(v), v["flag"] == 0))

    def loads(self, v, unloaded) -> dict:
        if self.variant == "mutant:no-reload-after-crash":
            unloaded = z3.And(unloaded, v["crashes"] == 0)
        value = v["value"]
        confirm = z3.Or(value == ABSENT, z3.And(z3.Or(value == TRUE, value == FALSE), z3.Not(self.trusted(v))))
        skip = z3.And(z3.Not(confirm), value == FALSE, self.variant != "mutant:always-rebuild")
        return {"load_confirm": (z3.And(unloaded, confirm), {**self.rebuilt(v),
                                                             "flag": z3.If(v.holds_txn_entry(), TRUE, FALSE)}),
                "load_skip": (z3.And(unloaded, skip), {**self.emptied(), "ready": True}),
                "load_rebuild": (z3.And(unloaded, z3.Not(confirm), z3.Not(skip)), self.rebuilt(v))}

    def may_append(self, v):
        return self.flag_set(v) if "persist-before-append" in self.fixes else z3.BoolVal(True)

    def on_append(self, v) -> dict:
        """'set to true when the first TXN message is publishing': queue the write."""
        return {"flag": z3.If(z3.Or(self.flag_set(v), v["flag"] == TRUE), v["flag"], TRUE)}

    def more(self, v) -> dict:
        out = {"persist_flag": (z3.And(v["ready"], v["flag"] != 0), {"value": v["flag"], "by_broker": True,
                                                                      "flag": 0})}
        if "persist-before-append" in self.fixes:
            for t in self.txns:
                out[f"request_flag({t})"] = (z3.And(v[f"pub{t}"], v["ready"], z3.Not(self.flag_set(v)),
                                                    v["flag"] != TRUE), {"flag": TRUE})
        if self.admin:  # as written: NotAllowedException, nothing changes
            writes = self.variant == "mutant:admin-can-write"
            for label, new in (("admin_update(true)", TRUE), ("admin_update(false)", FALSE), ("admin_remove", ABSENT)):
                out[label] = (v["ready"], {"value": new, "by_broker": False} if writes else {})
        return out

    def breaks(self, prop: str, v, label: str, w):
        if prop == "flag-never-cleared":
            return z3.And(v["value"] == TRUE, v["by_broker"], w["value"] != TRUE)
        if prop == "txn-topic-never-skips" and label == "load_skip":
            return v.holds_txn_entry()
        if prop == "non-boolean-kept":
            return z3.And(v["value"] == JUNK, w["value"] != JUNK)
        if prop == "flag-system-owned" and label in ADMIN:
            return z3.Or(w["value"] != v["value"], w["by_broker"] != v["by_broker"])
        if prop == "skip-when-no-txn" and label in LOADS and label != "load_skip":
            legacy = z3.Or(False, *[z3.And(v[f"kind{i}"] != 0, v[f"txn{i}"] == t) for i in range(self.size)
                                    for t in self.ids if t not in self.txns])
            sent = z3.Or(legacy, *[v[f"sends{t}"] > 0 for t in self.txns])
            return z3.And(z3.Not(sent), v["value"] == FALSE, v["by_broker"])
        return super().breaks(prop, v, label, w)

    def init_extra(self, v) -> list:
        return [v["value"] == VALUE[self.upgrade[0]], v["by_broker"] == self.upgrade[1]]

    def concrete_extra(self, v, s) -> list:
        flag = s.buffers[0].flag
        return [v["flag"] == {None: 0, "true": TRUE, "false": FALSE}[flag], v["value"] == VALUE[s.prop[0]],
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
