"""PIP-373 as written (``shared/seeds/004_*.txt``, a partly garbled capture), on the v4
transaction buffer of one ``persistent://`` topic (``models/v4txn``).

- "``__contains_txn_messages``, the default value is false, and it will be set to true
  when the first TXN message is publishing"; the buffer skips rebuilding its Two
  Indexes "if the property is false". The text does not order the append of the first
  transactional entry and the write of the property: they are separate actions, each
  able to happen first, with a broker crash and a topic reload between any two steps.
  The property lives in the managed ledger's properties: a write is queued in memory
  (``Buffer.flag``) and persisted by its own step, or lost with the broker.
- Upgrade, "3 scenarios": the property empty ("broker initializes it by confirming
  whether there is TXN messages or not": the load scans the log, then persists what it
  found), not a boolean ("always re-building ... you can never modify it anymore"), a
  boolean set by a user ("broker assumed that it is a system property").
- Admin API: "NotAllowedException when you try to set/remove" it; get is allowed.

The persisted property is ``(value, by_broker)``; ``by_broker`` (the broker wrote it) is
a ghost in the design as written, which cannot tell who wrote a value. The fix
``confirm-unmarked`` makes it real, as a second reserved key only the broker writes.
"""
from __future__ import annotations

from pulsar_verify.model import Param, act, variants_of
from pulsar_verify.values import put, replace

from pulsar_verify.models.v4txn import V4Txn
from pulsar_verify.models.v4txn.buffer import rebuild
from pulsar_verify.models.v4txn.model import MUTANTS as V4_MUTANTS
from pulsar_verify.models.v4txn.state import ABORT_MARKER, DATA, Buffer, State

ABSENT, TRUE, FALSE, JUNK = "absent", "true", "false", "junk"
UPGRADES = {  # initial property of the topic -> (value, written by the broker)
    "new-topic": (FALSE, True),  # created after the upgrade: the default, false
    "absent": (ABSENT, False),
    "user-false": (FALSE, False),
    "user-true": (TRUE, False),
    "non-boolean": (JUNK, False),
}
LEGACY_TXN = 9  # the txn id of the pre-upgrade transactional entry
LEGACY = {  # the topic's log before the upgrade
    "none": (),
    "plain": ((DATA, 0),),
    "aborted-txn": ((DATA, LEGACY_TXN), (ABORT_MARKER, LEGACY_TXN)),
}
FIXES = {
    "persist-before-append": "the first transactional entry is appended only after the property is persisted true",
    "confirm-unmarked": "the broker records that it wrote the property (a second reserved key) and confirms any "
                        "value it did not write by scanning the log",
}
MUTANTS = {
    "mutant:admin-can-write": "the admin API accepts updates and removals (checks flag-system-owned, "
                              "flag-never-cleared)",
    "mutant:always-rebuild": "the buffer rebuilds on every load (checks skip-when-no-txn)",
    "mutant:commit-marks-aborted": V4_MUTANTS["mutant:commit-marks-aborted"],
    "mutant:overwrite-non-boolean": "the first transactional publish queues true over a non-boolean value "
                                    "(checks non-boolean-kept)",
    "mutant:no-reload-after-crash": "a topic unloaded by a broker crash is never loaded again "
                                    "(checks end-txn-completes, sends-complete)",
}


def holds_txn_entry(log: tuple) -> bool:
    return any(kind == DATA and t for kind, t in log)


class Pip373(V4Txn):
    name = "pip-373"
    properties_from = "pulsar_verify.invariants.pip373"
    title = "PIP-373 Skip the transaction buffer's rebuild with __contains_txn_messages"
    source = "shared/seeds/004_77cd9114f90198e7.txt"
    variants = variants_of("the property as PIP-373 describes it", FIXES, MUTANTS)
    params = {
        "txns": Param(1, "transactions", 1, 2),
        "topics": Param(1, "topics (PIP-373 is about one topic's load)", 1, 1),
        "writes": Param(1, "transactional sends per txn", 0, 2),
        "acks": Param(0, "transactional acks per txn", 0, 1),
        "nontxn": Param(0, "non-transactional sends in all", 0, 2),
        "crashes": Param(1, "broker crashes (topic reloads) in all", 0, 3),
        "seals": Param(0, "not used: persistent:// topics are not sealed", 0, 0),
        "snapshots": Param(0, "TB snapshots taken in all", 0, 1),
        "upgrade": Param("new-topic", "the property when the topic is first loaded: " + ", ".join(UPGRADES),
                         choices=tuple(UPGRADES)),
        "legacy": Param("none", "the topic's log before the upgrade: " + ", ".join(LEGACY), choices=tuple(LEGACY)),
        "admin": Param(True, "the admin API may try to update or remove the property"),
    }
    presets = {
        "default": {},
        "aborted": {"txns": 1, "crashes": 2},
        "upgrade-absent": {"upgrade": "absent", "legacy": "aborted-txn"},
        "upgrade-user-false": {"upgrade": "user-false", "legacy": "aborted-txn", "writes": 0},
        "upgrade-user-false-plain": {"upgrade": "user-false", "legacy": "plain"},
        "upgrade-user-true": {"upgrade": "user-true", "legacy": "plain"},
        "upgrade-non-boolean": {"upgrade": "non-boolean", "legacy": "aborted-txn"},
        "two-txns": {"txns": 2, "nontxn": 1, "snapshots": 1},
    }
    large_presets = ("two-txns",)
    hypothesis_bounds = {"txns": 2, "writes": 2, "acks": 1, "nontxn": 2, "crashes": 3, "snapshots": 1,
                         "upgrade": "user-false", "legacy": "aborted-txn"}
    action_labels = tuple(sorted(set(V4Txn.action_labels) - {"tb_recover", "seal", "append_rejected",
                                                             "marker_rejected"}
                                 | {"load_skip", "load_rebuild", "load_confirm", "persist_flag", "request_flag",
                                    "admin_update", "admin_remove"}))

    def __init__(self, config):
        super().__init__(config)
        self._apply = {**self._apply, **APPLY}

    def action_names(self):
        cfg = self.config
        names = set(super().action_names()) & set(self.action_labels)
        if not cfg.admin:
            names -= {"admin_update", "admin_remove"}
        values = self.flag_values()
        loads = {self.load_kind(v) for v in (values if cfg.crashes else {UPGRADES[cfg.upgrade]})}
        names -= set(self.load_labels()) - loads
        writes = cfg.writes and cfg.txns
        queues = "load_confirm" in loads or writes and any(v[0] != JUNK and not self.set_true(v) for v in values)
        if not queues:
            names.discard("persist_flag")
        # persist-before-append holds an append back for the write only while nothing queued says true: after a
        # load that skips, or one that confirms false
        found = TRUE if holds_txn_entry(LEGACY[cfg.legacy]) else FALSE
        if "persist-before-append" not in self.fixes or not writes or not (
                "load_skip" in loads or "load_confirm" in loads and found == FALSE):
            names.discard("request_flag")
        if not writes and not cfg.nontxn:  # the log holds only what the upgrade left in it
            legacy = LEGACY[cfg.legacy]
            aborted = any(kind == ABORT_MARKER for kind, _ in legacy)
            if aborted:  # its entry is skipped by a buffer that read the abort, delivered by one that skipped
                names -= (({"skip_aborted"} if loads <= {"load_skip"} else set())
                          | ({"deliver"} if "load_skip" not in loads else set()))
        return sorted(names)

    def load_kind(self, value: tuple) -> str:
        """The load a persisted ``(value, by_broker)`` makes: what ``loads`` does, and what ``action_names``
        declares from the values a run can reach."""
        v, _ = value
        if v == ABSENT or (v in (TRUE, FALSE) and not self.trusted(value)):
            return "load_confirm"
        return "load_skip" if v == FALSE and self.config.variant != "mutant:always-rebuild" else "load_rebuild"

    def set_true(self, value: tuple) -> bool:
        """The persisted ``(value, by_broker)`` says true, and the broker takes it as its own."""
        return value[0] == TRUE and self.trusted(value)

    def flag_values(self) -> set:
        """The persisted property's values a run can reach at these bounds: the upgrade's, what a confirming load
        finds in the log (true once a transactional entry is in it), and true once a transactional send queues
        it (unless the value is not a boolean, which is never modified, or already says true)."""
        cfg = self.config
        start = UPGRADES[cfg.upgrade]
        values = {start}
        if self.load_kind(start) == "load_confirm":
            values.add((TRUE if holds_txn_entry(LEGACY[cfg.legacy]) else FALSE, True))
        if cfg.writes and cfg.txns and any(v[0] != JUNK and not self.set_true(v) for v in values):
            values.add((TRUE, True))
        return values

    def load_labels(self):
        return ["load_skip", "load_rebuild", "load_confirm"]

    def initial_prop(self):
        return UPGRADES[self.config.upgrade]

    def initial_log(self):
        return LEGACY[self.config.legacy]

    def trusted(self, value: tuple) -> bool:
        """Does the broker take the persisted ``(value, by_broker)`` as its own?"""
        return "confirm-unmarked" not in self.fixes or value[1]

    def loads(self, s: State, topic: int):
        if self.config.variant == "mutant:no-reload-after-crash" and s.crashes:
            return
        yield act(self.load_kind(s.prop), topic=topic)

    def on_txn_append(self, s: State, topic: int, b: Buffer) -> Buffer:
        """"set to true when the first TXN message is publishing": queue the write."""
        return b if self.flag_set(s) or b.flag == TRUE else replace(b, flag=TRUE)

    def flag_set(self, s: State) -> bool:
        """The persisted property already says what the first transactional entry must make it say
        (and no other value is queued over it); a non-boolean value is never modified."""
        junk = s.prop[0] == JUNK and self.config.variant != "mutant:overwrite-non-boolean"
        return junk or (self.set_true(s.prop) and s.buffers[0].flag is None)

    def actions(self, s: State):
        for a in super().actions(s):
            if a.name == "append" and not self.may_append(s):
                if self.asks_flag(s):
                    yield act("request_flag", txn=a.param("txn"), topic=0)
                continue
            yield a
        yield from self.flag_actions(s)

    def may_append(self, s: State) -> bool:
        """``persist-before-append``: the first transactional entry waits for the property."""
        return "persist-before-append" not in self.fixes or self.flag_set(s)

    def asks_flag(self, s: State) -> bool:
        """An append ``may_append`` holds back asks for the property's write, unless it is queued already."""
        return s.buffers[0].flag != TRUE

    def flag_actions(self, s: State):
        """The property's write, and the admin API's attempts, while the topic is loaded."""
        b = s.buffers[0]
        if b.ready and b.flag is not None:
            yield act("persist_flag", topic=0, value=b.flag)
        if self.config.admin and b.ready:
            for value in (TRUE, FALSE):
                yield act("admin_update", value=value)
            yield act("admin_remove")


def load_skip(m, s: State, a):
    """The property is false: the buffer starts with empty indexes, maxReadPosition at LAC."""
    return replace(s, buffers=put(s.buffers, 0, Buffer(ready=True)))


def load_rebuild(m, s: State, a):
    return replace(s, buffers=put(s.buffers, 0, rebuild(s, 0)))


def load_confirm(m, s: State, a):
    """An empty (or, with ``confirm-unmarked``, unconfirmed) property: scan the log, which
    rebuilds the indexes, and queue the value found."""
    found = TRUE if holds_txn_entry(s.logs[0]) else FALSE
    return replace(s, buffers=put(s.buffers, 0, replace(rebuild(s, 0), flag=found)))


def request_flag(m, s: State, a):
    """``persist-before-append``: the publish asks for the property write and waits for it."""
    return replace(s, buffers=put(s.buffers, 0, replace(s.buffers[0], flag=TRUE)))


def persist_flag(m, s: State, a):
    return replace(s, prop=(a.param("value"), True), buffers=put(s.buffers, 0, replace(s.buffers[0], flag=None)))


def admin_write(m, s: State, a):
    """``pulsar-admin topics update-properties / remove-properties``: NotAllowedException."""
    if m.config.variant != "mutant:admin-can-write":
        return s
    return replace(s, prop=(a.param("value") if a.name == "admin_update" else ABSENT, False))


APPLY = {"load_skip": load_skip, "load_rebuild": load_rebuild, "load_confirm": load_confirm,
         "persist_flag": persist_flag, "request_flag": request_flag, "admin_update": admin_write,
         "admin_remove": admin_write}
