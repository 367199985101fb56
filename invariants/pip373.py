"""Properties of PIP-373, each with the sentence of the text it comes from. What a
consumer sees after a skipped rebuild is checked with the v4 model's own properties, and so
is the end of a transaction across the reloads PIP-373 changes. PIP-373 leaves the TC and
the pending-ack store as v4 has them: their properties are checked on ``v4-txn``."""
from __future__ import annotations

from pulsar_verify.model import PropertySet
from pulsar_verify.models.pip373 import Pip373
from pulsar_verify.models.pip373.model import FALSE, JUNK, LEGACY_TXN, TRUE, holds_txn_entry

from .v4txn import (ENVIRONMENT, SEC_END, committed_never_filtered, ending, read_committed, sending,
                    sends_done)

PROPERTIES = PropertySet()


LOADS = ("load_skip", "load_rebuild", "load_confirm")
# Weak fairness: v4's (the TC, the broker, the dispatcher), loading the topic and persisting the property
# included; not the clients, crashes, snapshots or the admin API.
SYSTEM = tuple(sorted(set(Pip373.action_labels) - ENVIRONMENT - {"admin_update", "admin_remove"}))


def _txn_ever_sent(s) -> bool:
    return any(c.sends for c in s.clients.values()) or any(t == LEGACY_TXN for _, t in s.logs[0])


PROPERTIES.action_property("read-committed",
                           "After any crash and reload, no subscription receives an aborted or still-open txn's entry",
                           "Two Indexes exist 'to avoid consuming aborted messages or TXN in-progress messages'",
                           about=("deliver",))(read_committed)
PROPERTIES.action_property("committed-never-filtered", "No subscription skips an entry of a committed txn as aborted",
                           "Two Indexes: 'aborted messages indexes'", about=("skip",))(committed_never_filtered)


@PROPERTIES.action_property("txn-topic-never-skips",
                            "A topic that ever held a transactional entry never skips the rebuild",
                            "'Skip Transaction Buffer re-building Two Indexes if the topic ... does not contain TXN "
                            "messages'", on=("load_skip",))
def txn_topic_never_skips(m, s, a, t):
    return not holds_txn_entry(s.logs[0])


@PROPERTIES.action_property("flag-never-cleared", "Once the broker has set the property true, it never goes back",
                            "'it will be set to true when the first TXN message is publishing'")
def flag_never_cleared(m, s, a, t):
    return s.prop != (TRUE, True) or t.prop[0] == TRUE


@PROPERTIES.action_property("flag-system-owned", "No admin or user write changes the property",
                            "'NotAllowedException when you try to set/remove a topic property named "
                            "__contains_txn_messages'", on=("admin_update", "admin_remove"))
def flag_system_owned(m, s, a, t):
    return t.prop == s.prop


@PROPERTIES.action_property("skip-when-no-txn",
                            "A topic never sent a transactional message skips the rebuild on every load "
                            "once the broker "
                            "has written its property false",
                            "'We'd better skip Transaction Buffer re-building Two Indexes if the topic ... does not "
                            "contain TXN messages to save resources usage'", on=LOADS)
def skip_when_no_txn(m, s, a, t):
    if _txn_ever_sent(s):
        return True
    return s.prop != (FALSE, True) or a.name == "load_skip"


@PROPERTIES.action_property("non-boolean-kept",
                            "A property that is not a boolean is left as it is: the broker rebuilds on every load and "
                            "writes nothing over it",
                            "Upgrade: 'is not empty and is not typed boolean, rollback to the original behavior that "
                            "always re-building Two Indexes, but you can never modify it anymore'")
def non_boolean_kept(m, s, a, t):
    return s.prop[0] != JUNK or t.prop[0] == JUNK


def _flag_owed(m, s) -> bool:
    return holds_txn_entry(s.logs[0]) and s.prop[0] not in (TRUE, JUNK)


PROPERTIES.leads_to("flag-eventually-true",
                    "A topic that holds a transactional entry eventually shows __contains_txn_messages true to "
                    "get-properties (a non-boolean value excepted, which is never modified)",
                    "'it will be set to true when the first TXN message is publishing'; '__contains_txn_messages "
                    "can be queried by pulsar-admin topics get-properties'; the metric "
                    "pulsar_broker_using_txn_topics_count counts 'topics [that] contain TXN messages'",
                    trigger=_flag_owed, fair=SYSTEM)
PROPERTIES.leads_to("end-txn-completes", "Every end-txn the client asks for is answered, across crashes and reloads",
                    SEC_END, trigger=ending, fair=SYSTEM)
PROPERTIES.leads_to("sends-complete",
                    "A producer's transactional send never hangs, with the property's write in its way: it is "
                    "eventually appended, or fails with the broker",
                    "'it will be set to true when the first TXN message is publishing'", trigger=sending,
                    goal=sends_done, fair=SYSTEM)
