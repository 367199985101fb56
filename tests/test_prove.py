"""Z3 obligations: their verdicts, their counterexamples, a broken encoding that fails, and
agreement between each Z3 encoding and the Python model on states Hypothesis draws."""
from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest
import z3
from hypothesis import given, settings, strategies as st

from pulsar_verify.models.pip468.assignment import round_robin
from pulsar_verify.models.pip468.layout import LayoutError, SegmentLayout
from pulsar_verify.models.pip468.model import Pip468
from pulsar_verify.models.pip477.state import NEW, OLD
from pulsar_verify.properties import layout as zl, pip373_flag as zf, pip373_steps as z373, pip473_header as zh, registry
from pulsar_verify.properties import pip468_exclusive as zx, pip468_layout_steps as z468l, pip468_sessions as zss
from pulsar_verify.properties import pip468_cursors as zcur, pip468_steps as z468, pip477_cursor as zc
from pulsar_verify.properties import pip473_steps as z473, pip477_registry as zr, pip477_schema as zs, pip477_steps as z477
from pulsar_verify.properties import pip473_acks as zack, pip473_dispatch as zdisp, pip473_late_write as zlw
from pulsar_verify.properties import pip477_active as zact, pip477_idgen as zid, pip477_reserved as zrk
from pulsar_verify.properties import pip477_build as zbd, pip477_rollback as zrb, pip477_stamps as zstamp
from pulsar_verify.properties import pip477_position as zpos, pip473_forget as zfg, pip473_reap as zrp
from pulsar_verify.properties import pip468_intent as zoi, pip468_rebalance as zrbl
from pulsar_verify.properties import v4impl_outcome as zout, v4txn_completes as zend, v4txn_steps as zv4
from pulsar_verify.properties import v4impl_abort as zab, v4impl_horizon as zhz, v4impl_timeout as zto
from pulsar_verify.properties import v4impl_pending as zpa
from pulsar_verify.properties.obligations import PROVED, VIOLATED, explorer_depth, fixes_of, inductive as induction, \
    same, vacuous_steps
from pulsar_verify.invariants.pip473 import SYSTEM as PIP473_SYSTEM
from pulsar_verify.invariants.v4txn import SYSTEM as V4_SYSTEM
from pulsar_verify.invariants.pip468 import SYSTEM as PIP468_SYSTEM
from pulsar_verify import registry as models
from pulsar_verify.explorer import explore
from pulsar_verify.findings import catalogue, shortest

from .helpers import NIGHTLY, cli, violated


@lru_cache(maxsize=None)
def verdict_of(model: str, name: str, variants: tuple):
    """One obligation's verdict, run once per test process (a test that needs one verdict runs only it)."""
    return next(o for o in registry() if (o.model, o.name, o.variants) == (model, name, variants)).run()


def run_all() -> dict:
    """Every obligation's verdict (those that take minutes only in the nightly run)."""
    return {key: verdict_of(*key) for o in registry() if NIGHTLY or not o.minutes
            for key in [(o.model, o.name, o.variants)]}


def verdicts() -> dict:
    return {key: verdict.status for key, verdict in run_all().items()}


def test_obligation_verdicts():
    assert verdicts() == {
        ("pip-473", "one-outcome-inductive", ("as-written",)): PROVED,
        ("pip-473", "header-state-machine", ("as-written",)): PROVED,
        ("pip-473", "one-outcome-inductive", ("finalize-in-cas", "all-fixes")): PROVED,
        ("pip-473", "header-state-machine", ("mutant:blind-cas",)): VIOLATED,
        ("pip-473", "committed-acks-inductive", ("as-written",)): VIOLATED,
        ("pip-473", "committed-acks-inductive", ("gc-waits-for-participants", "all-fixes")): PROVED,
        ("pip-473", "read-committed-inductive", ("as-written",)): VIOLATED,
        ("pip-473", "read-committed-inductive", ("open-entry-barrier", "all-fixes")): PROVED,
        ("pip-473", "committed-never-filtered-inductive", ("as-written",)): VIOLATED,
        ("pip-473", "committed-never-filtered-inductive", ("keep-decisions-with-data", "all-fixes")): PROVED,
        **({("pip-473", "steps-bounded-default", ("as-written",)): VIOLATED,
            ("pip-473", "steps-bounded-default", ("all-fixes",)): PROVED,
            ("pip-473", "steps-bounded-faults", ("as-written",)): VIOLATED,
            ("pip-477", "steps-bounded-cleanup", ("as-written",)): VIOLATED,
            ("pip-477", "steps-bounded-cleanup", ("all-fixes",)): PROVED,
            ("pip-477", "steps-run-close", ("as-written",)): VIOLATED} if NIGHTLY else {}),
        ("pip-468", "create-covers-each-hash-once", ("as-written",)): PROVED,
        ("pip-468", "split-keeps-coverage", ("as-written",)): PROVED,
        ("pip-468", "merge-keeps-coverage", ("as-written",)): PROVED,
        ("pip-468", "round-robin-balanced", ("as-written",)): PROVED,
        ("pip-468", "sessions-durable-inductive", ("as-written",)): VIOLATED,
        ("pip-468", "sessions-durable-inductive", ("fenced-registrations",)): PROVED,
        ("pip-468", "sessions-durable-inductive", ("all-fixes",)): PROVED,
        ("pip-468", "sessions-durable-bounded", ("as-written",)): VIOLATED,
        ("pip-468", "sessions-durable-bounded", ("fenced-registrations",)): PROVED,
        ("pip-468", "assignment-exclusive-inductive", ("as-written",)): VIOLATED,
        ("pip-468", "assignment-exclusive-inductive", ("atomic-registrations", "all-fixes")): PROVED,
        ("pip-373", "never-skips-inductive-new-topic", ("as-written",)): VIOLATED,
        ("pip-373", "never-skips-bounded-new-topic", ("as-written",)): VIOLATED,
        ("pip-373", "never-skips-inductive", ("as-written",)): VIOLATED,
        ("pip-373", "never-skips-inductive-new-topic", ("persist-before-append",)): PROVED,
        ("pip-373", "never-skips-inductive", ("persist-before-append",)): VIOLATED,
        ("pip-373", "never-skips-inductive", ("confirm-unmarked",)): VIOLATED,
        ("pip-373", "never-skips-inductive", ("all-fixes",)): PROVED,
        ("pip-373", "steps-bounded-default", ("as-written",)): VIOLATED,
        ("pip-373", "steps-bounded-upgrade-user-false", ("as-written",)): VIOLATED,
        ("pip-373", "steps-bounded-default", ("persist-before-append",)): PROVED,
        ("pip-373", "steps-bounded-upgrade-user-false", ("persist-before-append",)): VIOLATED,
        ("pip-373", "steps-bounded-default", ("confirm-unmarked",)): VIOLATED,
        ("pip-373", "steps-bounded-upgrade-user-false", ("confirm-unmarked",)): PROVED,
        ("pip-373", "steps-bounded-default", ("all-fixes",)): PROVED,
        ("pip-373", "steps-bounded-upgrade-user-false", ("all-fixes",)): PROVED,
        **({("pip-468", "steps-bounded-new-sub", ("as-written",)): VIOLATED,
            ("pip-468", "steps-bounded-new-sub", ("subs-in-metadata",)): PROVED,
            ("pip-468", "steps-bounded-failover", ("as-written",)): VIOLATED,
            ("pip-468", "steps-bounded-consumer-failover", ("as-written",)): VIOLATED,
            ("pip-468", "steps-bounded-split-merge", ("as-written",)): VIOLATED,
            ("pip-468", "steps-bounded-split-merge", ("op-intent",)): PROVED} if NIGHTLY else {}),
        ("v4-txn", "steps-bounded-sealed", ("as-written",)): VIOLATED,
        ("v4-txn", "steps-bounded-default", ("as-written",)): PROVED,
        ("v4-txn", "steps-bounded-sealed", ("off-segment-markers",)): PROVED,
        ("v4-txn", "steps-bounded-default", ("off-segment-markers",)): PROVED,
        ("pip-477", "I12-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "I12-bounded", ("as-written",)): VIOLATED,
        ("pip-477", "I12-inductive", ("single-cas-status-flip", "all-fixes")): PROVED,
        ("pip-477", "I3-I10-inductive", ("as-written", "all-fixes")): PROVED,
        ("pip-477", "I3-I10-inductive", ("mutant:blind-schema-promote",)): VIOLATED,
        ("pip-477", "I3-I10-inductive", ("mutant:promote-resets-hash",)): VIOLATED,
        ("pip-477", "I11-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "I11-inductive", ("fence-old-idgen", "all-fixes")): PROVED,
        ("pip-477", "I11-inductive", ("mutant:no-precheck",)): VIOLATED,
        ("pip-477", "schema-stamps-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "schema-stamps-inductive", ("promote-built-only", "all-fixes")): PROVED,
        ("pip-477", "I6-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "I6-inductive", ("recover-from-directive", "all-fixes")): PROVED,
        ("pip-477", "legacy-reads-from-old-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "legacy-reads-from-old-inductive", ("fallback-to-source-cluster", "all-fixes")): PROVED,
        ("pip-477", "old-client-unused-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "old-client-unused-inductive", ("close-after-brokers-switched",)): VIOLATED,
        ("pip-477", "old-client-unused-inductive", ("all-fixes",)): PROVED,
        ("pip-477", "old-records-unrouted-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "old-records-unrouted-inductive", ("close-after-data-expires",)): VIOLATED,
        ("pip-477", "old-records-unrouted-inductive", ("all-fixes",)): PROVED,
        ("pip-468", "cursors-before-routing-inductive", ("as-written",)): VIOLATED,
        ("pip-468", "cursors-before-routing-inductive", ("subs-in-metadata", "all-fixes")): PROVED,
        ("pip-468", "writable-coverage-ranked", ("op-intent", "all-fixes")): PROVED,
        ("pip-468", "leader-assignment-current-ranked", ("leader-watches-layout",)): PROVED,
        ("pip-473", "no-write-after-end-inductive", ("as-written",)): VIOLATED,
        ("pip-473", "no-write-after-end-inductive", ("recheck-before-ack", "all-fixes")): PROVED,
        ("pip-477", "rollback-keeps-reads-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "rollback-keeps-reads-inductive", ("rollback-only-to-readable-old", "all-fixes")): PROVED,
        ("pip-477", "build-idempotent-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "build-idempotent-inductive", ("recopy-own-copy", "all-fixes")): PROVED,
        ("pip-477", "position-not-rewound-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "position-not-rewound-inductive", ("all-fixes",)): PROVED,
        ("v4-txn", "end-txn-completes-ranked", ("as-written",)): VIOLATED,
        ("pip-473", "collected-txns-leave-brokers-ranked", ("as-written",)): VIOLATED,
        ("pip-473", "collected-txns-leave-brokers-ranked", ("forget-collected-acks", "all-fixes")): PROVED,
        ("v4-txn", "end-txn-completes-ranked", ("off-segment-markers", "all-fixes")): PROVED,
        ("pip-473", "orphan-records-reaped-ranked", ("as-written",)): VIOLATED,
        ("pip-473", "orphan-records-reaped-ranked", ("owners-reap-orphans", "all-fixes")): PROVED,
        ("pip-477", "I16-inductive", ("as-written",)): VIOLATED,
        ("pip-477", "I16-inductive", ("reserved-keys-rejected", "all-fixes")): PROVED,
        ("pip-477", "I9", ("as-written",)): PROVED,
        ("pip-477", "I9", ("mutant:promote-clears-cursor-props",)): VIOLATED,
        ("v4-impl", "told-the-outcome-inductive", ("as-implemented",)): VIOLATED,
        ("v4-impl", "told-the-outcome-inductive", ("idempotent-end", "all-fixes")): PROVED,
        ("v4-impl", "last-id-within-horizon-inductive", ("as-implemented",)): VIOLATED,
        ("v4-impl", "last-id-within-horizon-inductive", ("pr-21466", "pr-22610", "all-fixes")): PROVED,
        ("v4-impl", "plain-readable-inductive", ("as-implemented",)): VIOLATED,
        ("v4-impl", "plain-readable-inductive", ("first-snapshot-catches-up", "all-fixes")): PROVED,
        ("v4-impl", "open-txn-ends-ranked", ("as-implemented",)): VIOLATED,
        ("v4-impl", "open-txn-ends-ranked", ("pr-19201", "all-fixes")): PROVED,
        ("v4-impl", "abort-recorded-inductive", ("as-implemented",)): VIOLATED,
        ("v4-impl", "abort-recorded-inductive", ("abort-marker-always", "all-fixes")): PROVED,
        ("v4-impl", "ended-txn-releases-acks-inductive", ("as-implemented",)): VIOLATED,
        ("v4-impl", "ended-txn-releases-acks-inductive", ("ack-after-end-rejected", "all-fixes")): PROVED,
    }



def test_every_property_proved_for_any_size_holds_at_every_bound_set_the_explorer_ran():
    """What a proof for any size covers, the exhaustive search at the bounds must find holding (the review
    reports a contradiction as an internal error); and the claims that prove something do prove it."""
    from pulsar_verify.findings import EXPECTATIONS
    expected, proved = json.loads(EXPECTATIONS.read_text()), 0
    for o in registry():
        if o.proves and verdict_of(o.model, o.name, o.variants).status == PROVED:
            proved += 1
            for variant in o.variants:
                assert {expected[o.model][variant][p] for p in o.proves} == {"holds"}, (o.name, variant)
    assert proved >= 9


def test_the_i12_counterexample_is_the_explorers_finding():
    cti = zr.inductive(False)
    assert cti.status == VIOLATED and "--cleanup_status_old-->" in cti.detail
    assert "old=ACTIVE" in cti.detail.split("--cleanup_status_old-->")[0]
    run = zr.bounded(False)
    assert run.detail.startswith("reachable in 5 registry steps") and run.detail.endswith(
        "{old=DEPRECATED, new=STANDBY; directive=True; phase=cleanup; status CASes=1}")
    finding = json.loads(open("findings/pip-477/index.json").read())
    assert any(f["property"] == "I12" for f in finding)  # the explorer found it on the full model too


def test_the_pip373_counterexamples_are_the_explorers_findings():
    cti = zf.inductive((), upgrades=False)
    assert "--crash-->" in cti.detail  # a crash between the txn append and the property write
    run = zf.bounded((), upgrades=False)
    assert run.detail.startswith("reachable in 3 steps") and "--append-->" in run.detail
    start = zf.inductive(("persist-before-append",))  # a user's false before the upgrade, with txn history
    assert start.detail == ("an initial state breaks it: {log has txn entry=True, property=false "
                            "(by broker=False), queued=none, loaded=False}")
    names = {f["property"] for f in json.loads(open("findings/pip-373/index.json").read())}
    assert "txn-topic-never-skips" in names


def test_a_broken_encoding_fails_its_proof():
    bad = zl.split_keeps_coverage(overflowing=True)  # a 16-bit (short) midpoint overflows
    assert bad.status == VIOLATED and "split of [" in bad.detail
    assert zl.merge_keeps_coverage(drops_last=True).status == VIOLATED
    assert zl.create_covers_each_hash_once(4, overlapping=True).status == VIOLATED
    assert zl.round_robin_balanced(wraps_to_first=True).status == VIOLATED
    assert zr.bounded(True).status == PROVED


def test_prove_cli_exit_codes():
    r = cli("prove", "pip-468", "--variant", "fenced-registrations")
    assert r.returncode == 0 and r.stdout.count("PROVED") == 2, r.stdout + r.stderr
    r = cli("prove", "pip-477", "--variant", "single-cas-status-flip")
    assert r.returncode == 0 and r.stdout.count("PROVED") == 1, r.stdout + r.stderr
    r = cli("prove", "pip-477", "--variant", "mutant:promote-resets-hash")  # (pip-477 as a whole takes minutes)
    assert r.returncode == 1 and r.stdout.count("VIOLATED") == 1 and "counterexample to induction" in r.stdout
    r = cli("prove", "pip-477", "--variant", "no-such-variant")
    assert r.returncode == 2 and "unknown variant" in r.stderr
    r = cli("prove", "no-such-model")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


# -- agreement with the Python models ---------------------------------------------------------------
ops = st.lists(st.tuples(st.sampled_from(["split", "merge"]), st.integers(0, 63)), max_size=12)


def build_layout(n, steps) -> SegmentLayout:
    layout = SegmentLayout.create(n)
    for kind, pick in steps:
        active = layout.active_segments
        try:
            if kind == "split":
                layout = layout.split(active[pick % len(active)].segment_id)
            elif len(active) > 1:
                lo, hi = active[pick % (len(active) - 1)], active[pick % (len(active) - 1) + 1]
                layout = layout.merge(lo.segment_id, hi.segment_id)
        except LayoutError:
            pass
    return layout


def only_solution(relation, given_values, unknowns, expected) -> bool:
    """The relation, with ``given_values`` fixed, admits ``expected`` for ``unknowns`` and nothing else."""
    solver = z3.Solver()
    solver.add(relation, *[x == val for x, val in given_values])
    solver.push()
    solver.add(*[x == val for x, val in zip(unknowns, expected)])
    if solver.check() != z3.sat:
        return False
    solver.pop()
    solver.add(z3.Or(*[x != val for x, val in zip(unknowns, expected)]))
    return solver.check() == z3.unsat


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), ops)
def test_layout_split_and_merge_formulas_agree_with_layout_py(n, steps):
    layout = build_layout(n, steps)
    s, e, a1, b1, a2, b2 = (zl.bv(x) for x in ("s", "e", "a1", "b1", "a2", "b2"))
    active = layout.active_segments
    for seg in active:
        r = seg.hash_range
        rel = zl.split_relation(s, e, ((a1, b1), (a2, b2)))
        if r.size < 2:
            solver = z3.Solver()
            solver.add(rel, s == r.start, e == r.end)
            assert solver.check() == z3.unsat
            continue
        after = layout.split(seg.segment_id)
        kids = [after.segment(c).hash_range for c in after.segment(seg.segment_id).child_ids]
        assert only_solution(rel, [(s, r.start), (e, r.end)], (a1, b1, a2, b2),
                             (kids[0].start, kids[0].end, kids[1].start, kids[1].end))
    m1, m2 = zl.bv("m1"), zl.bv("m2")
    for lo, hi in zip(active, active[1:]):
        merged = layout.merge(lo.segment_id, hi.segment_id)
        r = merged.segment(merged.next_segment_id - 1).hash_range
        rel = zl.merge_relation((s, e), (a1, b1), (m1, m2))
        assert only_solution(rel, [(s, lo.hash_range.start), (e, lo.hash_range.end), (a1, hi.hash_range.start),
                                   (b1, hi.hash_range.end)], (m1, m2), (r.start, r.end))
    h = zl.bv("h")
    for probe in (0, 0xFFFF, active[-1].hash_range.start):  # the coverage term agrees with findActiveSegment
        count = z3.simplify(z3.substitute(z3.Sum([zl.inside(seg.hash_range.start, seg.hash_range.end, h)
                                                  for seg in active]), (h, z3.BitVecVal(probe, 16))))
        assert count.as_long() == 1 and layout.find_active_segment(probe).active


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), ops, st.integers(1, zl.CONSUMERS_MAX))
def test_round_robin_formula_agrees_with_assignment_py(n, steps, consumers):
    layout = build_layout(n, steps)
    names = [f"c{i + 1}" for i in range(consumers)]
    python = round_robin(layout, names)
    loads = zl.round_robin_loads(z3.IntVal(len(layout.active_segments)), consumers)
    assert [z3.simplify(x).as_long() for x in loads] == [len(python[name]) for name in sorted(names)]


@lru_cache(maxsize=None)
def explored(name: str, variant: str, preset: str, limit: int = 4000):
    """The model and up to ``limit`` of its reachable states (by fingerprint: a fixed sample; None: all)."""
    model = models.build(name, variant, preset=preset)
    _, ex = explore(model)
    return model, [ex.path_to(fp)[0][-1] for fp in sorted(ex.parents)[:limit]]


# states sampled by the whole-model step encodings' agreement tests (tests/test_agreement.py checks every reachable
# state at each encoding's first covered bound set; these sample the other bound sets and variants)
SAMPLED_STATES = 60 if NIGHTLY else 6


def disagreements_at(encoding, name: str, case: tuple, pick: int, limit: int = 4000) -> list[str]:
    """How ``encoding``'s formulas disagree with every transition out of one explored state."""
    model, states = explored(name, *case, limit)
    s = states[pick % len(states)]
    return encoding.disagreements(model, [(s, a, t) for a, t in model.successors(s)])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("as-written", "cleanup"), ("as-written", "restart"), ("single-cas-status-flip", "cleanup"),
                        ("as-written", "rollback")]), st.integers(0, 10**9))
def test_registry_formulas_agree_with_the_pip477_model(case, pick):
    assert disagreements_at(zr, "pip-477", case, pick) == []


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("as-written", "default"), ("all-fixes", "default"), ("as-written", "upgrade-user-false"),
                        ("all-fixes", "upgrade-absent"), ("persist-before-append", "aborted")]),
       st.integers(0, 10**9))
def test_flag_formulas_agree_with_the_pip373_model(case, pick):
    assert disagreements_at(zf, "pip-373", case, pick) == []


def test_a_drifted_flag_encoding_is_caught():
    model, states = explored("pip-373", "as-written", "default")

    def drifted(v, w, fixes):  # a crash that keeps the queued write
        t = zf.transitions(v, w, fixes)
        t["crash"] = z3.And(z3.Not(w.ready), *v.same(w, "ready"))
        return t
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "crash"]
    assert pairs and zf.disagreements(model, pairs, drifted)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("as-written", "default"), ("as-written", "faults"), ("finalize-in-cas", "faults"),
                        ("mutant:blind-cas", "default")]), st.integers(0, 10**9))
def test_header_formulas_agree_with_the_pip473_model(case, pick):
    assert disagreements_at(zh, "pip-473", case, pick, 3000) == []


def test_the_blind_cas_mutant_breaks_the_header_state_machine():
    bad = zh.state_machine("mutant:blind-cas")
    assert bad.status == VIOLATED and "its header: COMMITTED" in bad.detail.split("-->")[0] or \
        "its header: ABORTED" in bad.detail.split("-->")[0]


def test_a_drifted_header_encoding_is_caught():
    model, states = explored("pip-473", "as-written", "default", 3000)

    def drifted(v, w, t, r, want, variant):  # the finalize put forgets to bump the version
        steps = zh.transitions(v, w, t, r, want, variant)
        rt = v.rtxn[r]
        steps["tc_finalize"] = z3.And(v.rstage[r] == zh.FINALIZE, v.hfin[rt] == v.hfin[rt],
                                      w.hfin == z3.Store(v.hfin, rt, True), w.rstage == z3.Store(v.rstage, r, zh.REPLY),
                                      *v.keep(w, "hfin", "rstage"))
        return steps
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "tc_finalize"]
    assert pairs and zh.disagreements(model, pairs[:20], drifted)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([("as-written", "schema"), ("all-fixes", "schema"), ("mutant:blind-schema-promote", "schema"),
                        ("mutant:promote-resets-hash", "default"), ("as-written", "rollback")]),
       st.integers(0, 10**9))
def test_schema_formulas_agree_with_the_pip477_model(case, pick):
    assert disagreements_at(zs, "pip-477", case, pick) == []


def test_a_drifted_schema_encoding_is_caught():
    model, states = explored("pip-477", "as-written", "schema")

    def drifted(v, w, b, entry, stamp, variant):  # putSchema's CAS forgets to bump the version
        steps = zs.transitions(v, w, b, entry, stamp, variant)
        steps["put_schema_cas"] = z3.And(v.put[b], v.put_ver[b] == v.ver, w.biz == z3.Store(v.biz, v.n, entry),
                                         w.attr == z3.Store(v.attr, v.n, stamp), w.n == v.n + 1, w.ver == v.ver,
                                         w.acked == v.acked + 1, w.put == z3.Store(v.put, b, False),
                                         *v.keep(w, "biz", "attr", "n", "ver", "acked", "put"))
        return steps
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "put_schema_cas"]
    assert pairs and zs.disagreements(model, pairs[:20], drifted)


def test_cursor_formula_agrees_with_the_pip477_model():
    checked = 0
    for variant in ("as-written", "mutant:promote-clears-cursor-props", "promote-cursor-at-copied-lac"):
        model, states = explored("pip-477", variant, "cursor")
        pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "promote_cursor_handle"]
        checked += sum(1 for s, _, t in pairs if t.cursor != s.cursor)
        assert zc.disagreements(model, pairs) == []

        def drifted(c, d, target, variant):  # the write keeps the znode's version
            return z3.And(zc.handle(c, d, target, variant), d.version == c.version)
        assert zc.disagreements(model, pairs, drifted) or not any(t.cursor != s.cursor for s, _, t in pairs)
    assert checked


# Every in-process bound set of pip-477 in the nightly; in CI those of a few thousand states, and the fixes and
# mutants these encodings state at the bound sets of their findings.
SMALL_477 = ("default", "legacy", "cursor", "cleanup", "close", "sub-property", "rollback")
CASES_477 = [(v, b) for b in (models.model_class("pip-477").in_process_presets() if NIGHTLY else SMALL_477)
             for v in ("as-written", "all-fixes")]
CASES_477 += [(v, "cursor") for v in ("fence-old-idgen", "mutant:no-precheck", "mutant:copy-new-id",
                                      "mutant:coordinator-promotes-cursor", "mutant:stamp-after-create",
                                      "mutant:promote-clears-cursor-props")]
CASES_477.append(("reserved-keys-rejected", "sub-property"))


@pytest.mark.parametrize("case", CASES_477, ids="/".join)
def test_the_i11_and_i16_encodings_agree_with_the_pip477_model_on_every_reachable_state(case):
    """I16's formulas step for step; I11's as a simulation (every model step is one of its steps)."""
    model, states = explored("pip-477", *case, limit=None)
    pairs = [(s, a, t) for s in states for a, t in model.successors(s)]
    assert zrk.disagreements(model, pairs) == [] and zid.simulation(model, pairs) == []


def test_the_reserved_key_proof_fails_as_written_on_a_users_write_and_a_drifted_encoding_is_caught():
    verdict = verdict_of("pip-477", "I16-inductive", ("as-written",))
    assert verdict.status == VIOLATED and "--set_sub_property-->" in verdict.detail and '"user"' in verdict.detail
    model, states = explored("pip-477", "reserved-keys-rejected", "sub-property")
    pairs = [(s, a, t) for s in states for a, t in model.successors(s)
             if a.name == "set_sub_property" and a.param("key") == zrk.ATTR_KEY][:20]

    def drifted(v, w, variant, fixes, key, written):  # the fix's refusal forgotten
        return zrk.steps(v, w, variant, frozenset(), key, written)
    assert pairs and zrk.disagreements(model, pairs) == [] and zrk.disagreements(model, pairs, drifted)


def test_the_i11_proof_fails_on_a_collision_as_written_and_a_drifted_encoding_is_caught():
    verdict = verdict_of("pip-477", "I11-inductive", ("as-written",))
    assert verdict.status == VIOLATED and "by old: True, by new: True" in verdict.detail.split("-->")[-1]
    model, states = explored("pip-477", "fence-old-idgen", "cursor")
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if t.allocated[OLD] != s.allocated[OLD]
             or t.allocated[NEW] != s.allocated[NEW]][:30]

    def drifted(v, w, fixes, variant, lid):  # a ledger created on the old cluster after the fence: its own id
        out = zid.steps(v, w, fixes, variant, lid)
        out["create_on_old"] = z3.And(lid >= v.idgen_old, w.old == z3.Store(v.old, lid, True),
                                      w.idgen_old == lid + 1, v.keep(w, w.old, w.idgen_old))
        return out
    assert pairs and zid.simulation(model, pairs) == [] and zid.simulation(model, pairs, drifted)


def test_a_drifted_registry_encoding_is_caught():
    model, states = explored("pip-477", "as-written", "cleanup")

    def drifted(v, w, single):  # the first status CAS forgets to write the status
        t = zr.transitions(v, w, single)
        t["cleanup_status_old"] = z3.And(v.phase == zr.CLEANUP, v.flips == 0, w.flips == 1, w.phase == v.phase,
                                         w.directive == v.directive, w.status == v.status)
        return t
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "cleanup_status_old"]
    assert pairs and zr.disagreements(model, pairs, drifted)


def test_the_sessions_counterexample_is_a_write_of_a_broker_without_the_lock():
    cti = zss.inductive()
    assert cti.status == VIOLATED and "counterexample to induction" in cti.detail
    before, after = cti.detail.split("-->")
    assert before.rsplit("--", 1)[1] == "persist_registration"
    lock = re.search(r"lock (none|b\d+)", before).group(1)
    writer = re.search(r"\(taken by (b\d+) for c\d+\)$", after).group(1)
    assert writer != lock  # whichever counterexample Z3 picks, the write lands from a broker without the lock
    names = {f["property"] for f in json.loads(open("findings/pip-468/index.json").read())}
    assert "sessions-durable" in names  # the explorer's finding on the full model


EXCLUSIVE_CASES = [("as-written", "consumers"), ("atomic-registrations", "consumers"), ("as-written", "session-failover"),
                   ("all-fixes", "session-failover"), *([("all-fixes", "consumer-failover")] if NIGHTLY else [])]


@pytest.mark.parametrize("case", EXCLUSIVE_CASES, ids="/".join)
def test_the_assignment_exclusive_encoding_simulates_the_pip468_model_on_every_reachable_state(case):
    model, states = explored("pip-468", *case, limit=None)
    assert zx.simulation(model, [(s, a, t) for s in states for a, t in model.successors(s)]) == []


def test_the_exclusive_proof_fails_as_written_on_one_registration_and_a_mutants_whole_write_is_no_step():
    """As written the counterexample to induction is one consumer's write landing on a segment another holds;
    the mutant whose join writes the joining consumer's segments into the whole set, unrebalanced, is caught."""
    cti = verdict_of("pip-468", "assignment-exclusive-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--land_one-->" in cti.detail
    model, states = explored("pip-468", "mutant:no-rebalance-on-join", "consumers")
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "connect"]
    assert any("connect(consumer=" in d for d in zx.simulation(model, pairs))


NO_CRASH = {"crashes": "0"}
ACKS_CASES = [("gc-waits-for-participants", "acks", NO_CRASH), ("as-written", "acks", NO_CRASH),
              *([("gc-waits-for-participants", "acks", None), ("as-written", "acks", None), ("all-fixes", "acks", None)]
                if NIGHTLY else [])]


def transitions_reached(name: str, variant: str, preset: str, overrides=None):
    """The model and every transition out of every state it reaches (as the explorer, without symmetry)."""
    from pulsar_verify.properties.agreement import reachable
    model = models.build(name, variant, overrides, preset=preset)
    return model, [(s, a, t) for _, s, transitions in reachable(model) for a, t in transitions]


@pytest.mark.parametrize("case", ACKS_CASES, ids=lambda c: "/".join(c[:2]) + ("/no-crash" if c[2] else ""))
def test_the_committed_acks_encoding_simulates_the_pip473_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-473", *case)
    assert zack.simulation(model, pairs) == []


def test_the_committed_acks_proof_fails_as_written_on_the_gc_and_a_drifted_gc_step_is_caught():
    """As written the counterexample to induction is the GC sweep deleting a committed txn's ack record; an
    encoding whose waiting GC deletes no ack record at all misses the model's deletion of an aborted txn's."""
    cti = verdict_of("pip-473", "committed-acks-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--gc_ops-->" in cti.detail
    model, pairs = transitions_reached("pip-473", "gc-waits-for-participants", "acks", NO_CRASH)

    def drifted(v, w, fixes, t, x, st):
        out = zack.steps(v, w, fixes, t, x, st)
        out["gc_ops"] = z3.And(out["gc_ops"], w.rec == v.rec)
        return out
    assert any(d.startswith("gc_delete_ops(") for d in zack.simulation(model, pairs, drifted))


DISPATCH_CASES = [("as-written", "default"), ("open-entry-barrier", "default"), ("keep-decisions-with-data", "default"),
                  ("all-fixes", "faults"),
                  *([("open-entry-barrier", "faults"), ("keep-decisions-with-data", "sealed"), ("all-fixes", "sealed"),
                     ("keep-decisions-with-data", "late-sub"), ("all-fixes", "two-segments")] if NIGHTLY else [])]


@pytest.mark.parametrize("case", DISPATCH_CASES, ids="/".join)
def test_the_dispatch_encoding_simulates_the_pip473_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-473", *case)
    assert zdisp.simulation(model, pairs) == []


def test_the_dispatch_proofs_fail_as_written_where_the_findings_do_and_broken_steps_are_caught():
    """As written the counterexamples to induction are the delivery of an OPEN txn's entry and the deletion of a
    committed txn's record while its entry is retained; the mutant whose dispatcher ignores isTxnAborted delivers
    what the encoding's dispatcher holds back, and an encoding whose record deletions never go with a trim misses
    the fix's trimming."""
    cti = verdict_of("pip-473", "read-committed-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--deliver-->" in cti.detail and "header OPEN, decided NONE" in cti.detail
    cti = verdict_of("pip-473", "committed-never-filtered-inductive", ("as-written",))
    before, after = cti.detail.split("--drop-->")
    assert re.search(r"(t\d+): header COMMITTED, decided COMMITTED", before)
    model, pairs = transitions_reached("pip-473", "mutant:deliver-aborted", "default")
    assert any(d.startswith("deliver(") for d in zdisp.simulation(model, pairs))

    def drifted(v, w, fixes, t, g, e):
        out = zdisp.steps(v, w, fixes, t, g, e)
        out["drop"] = z3.And(out["drop"], w.record == v.record)
        return out
    model, pairs = transitions_reached("pip-473", "keep-decisions-with-data", "default")
    assert any(d.startswith("trim(") for d in zdisp.simulation(model, pairs, drifted))


ACTIVE_CASES = [("recover-from-directive", "restart"), ("as-written", "legacy"),
                ("fallback-to-source-cluster", "legacy"), ("close-after-data-expires", "close"), ("all-fixes", "close"),
                *([("as-written", "restart"), ("as-written", "close-lagging"), ("all-fixes", "close-restart"),
                   ("as-written", "close-restart"), ("recover-from-directive", "close-restart"),
                   ("close-after-brokers-switched", "close-lagging"), ("all-fixes", "legacy"), ("as-written", "cursor"),
                   ("all-fixes", "cleanup")] if NIGHTLY else [])]


@pytest.mark.parametrize("case", ACTIVE_CASES, ids="/".join)
def test_the_active_cluster_encoding_simulates_the_pip477_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-477", *case)
    assert zact.simulation(model, pairs) == []


def test_the_active_cluster_proofs_fail_as_written_where_the_findings_do_and_drifts_are_caught():
    """As written the counterexamples to induction are a restart after the switch taking the old cluster at the
    directive's epoch, a watch moving a broker to the new cluster (its legacy fallback), and the old client closed
    while a broker lags (with close-after-brokers-switched alone: a restart after the close) or a record stamped old
    is listed (with close-after-data-expires alone: one without attribution, brokers resolving it apart); an
    encoding whose watch forgets the epoch, or whose fallback ignores the fix, misses the model's."""
    cti = verdict_of("pip-477", "I6-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--restart-->" in cti.detail
    assert re.search(r"(b\d+) on old at epoch 1", cti.detail.split("--restart-->")[1])
    cti = verdict_of("pip-477", "legacy-reads-from-old-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--watch-->" in cti.detail
    assert "--close_client-->" in verdict_of("pip-477", "old-client-unused-inductive", ("as-written",)).detail
    assert "--restart-->" in verdict_of("pip-477", "old-client-unused-inductive", (zact.SWITCHED,)).detail
    cti = verdict_of("pip-477", "old-records-unrouted-inductive", ("as-written",)).detail
    assert "--close_client-->" in cti and "stamped old" in cti.split("--close_client-->")[0]
    cti = verdict_of("pip-477", "old-records-unrouted-inductive", (zact.EXPIRES,)).detail
    assert "--close_client-->" in cti and "stamped none" in cti.split("--close_client-->")[0]

    def drifted(v, w, fixes, b, c):
        out = zact.steps(v, w, fixes, b, c)
        out["watch"] = z3.And(v.directive, w.active == z3.Store(v.active, b, v.target), *v.keep(w, "active"))
        return out
    model, pairs = transitions_reached("pip-477", "recover-from-directive", "restart")
    assert any(d.startswith("watch(") for d in zact.simulation(model, pairs, drifted))
    model, pairs = transitions_reached("pip-477", "fallback-to-source-cluster", "legacy")
    as_written = lambda v, fixes, b: zact.fallback(v, fixes - {zact.SOURCE}, b)  # noqa: E731
    assert any("legacy fallback" in d for d in zact.simulation(model, pairs, fallback_of=as_written))


STAMP_CASES = [("as-written", "schema"), ("promote-built-only", "schema"), ("all-fixes", "schema"),
               *([("all-fixes", "cleanup"), ("all-fixes", "close")] if NIGHTLY else [])]


@pytest.mark.parametrize("case", STAMP_CASES, ids="/".join)
def test_the_schema_stamps_encoding_simulates_the_pip477_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-477", *case)
    assert zstamp.simulation(model, pairs) == []


def test_the_schema_stamps_proof_fails_as_written_on_promote_and_an_unstamped_put_is_caught():
    """As written the counterexample to induction is PROMOTE re-stamping an entry of a ledger BUILD never copied;
    the mutant whose putSchema writes the entry before its stamp appends an entry no step of the encoding does."""
    cti = verdict_of("pip-477", "schema-stamps-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--promote_schema_cas-->" in cti.detail
    model, pairs = transitions_reached("pip-477", "mutant:stamp-after-create", "schema")
    assert any(d.startswith("put_schema_cas(") for d in zstamp.simulation(model, pairs))


CURSOR_CASES = [(v, "new-sub") for v in ("as-written", "subs-in-metadata", "all-fixes")]
CURSOR_CASES += [(v, p) for p in ("merge-new-sub", "two-new-subs", "failover") for v in ("as-written", "all-fixes")
                 ] if NIGHTLY else []


@pytest.mark.parametrize("case", CURSOR_CASES, ids="/".join)
def test_the_cursors_encoding_simulates_the_pip468_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-468", *case)
    assert zcur.simulation(model, pairs) == []


def test_the_cursors_proof_fails_as_written_on_discovery_and_catches_a_model_creating_subscriptions_beside_the_cas():
    """As written the counterexample to induction is a split's discovery that misses a subscription the metadata
    (the admin API) has; and the model as written creates subscriptions without the version bump the fixed encoding
    has, which discovers without reading the parents."""
    cti = verdict_of("pip-468", "cursors-before-routing-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--discover-->" in cti.detail
    model, pairs = transitions_reached("pip-468", "as-written", "new-sub")
    fixed = frozenset({zcur.FIX})
    drifted = zcur.simulation(model, pairs, steps_of=lambda v, w, fixes, *xs: zcur.steps(v, w, fixed, *xs))
    assert {d.split("(")[0] for d in drifted} == {"create_subscription", "discover"}


def test_no_step_of_an_encoding_proved_by_induction_is_vacuous():
    """Every step of these encodings can be taken from some state their invariant allows: a step whose change
    contradicts its own frame would make any claim about it hold (how as-written createSubscription once read)."""
    for fixes in (frozenset(), frozenset({zcur.FIX})):
        v, w = zcur.Vars(""), zcur.Vars("'")
        xs = (z3.Const("o", zcur.Op), z3.Const("c", zcur.Ctl), z3.Const("g", zcur.Seg), z3.Const("u", zcur.Sub))
        assert vacuous_steps(zcur.strengthened(v), zcur.steps(v, w, fixes, *xs)) == []
    for fixes in (frozenset(), frozenset({zbd.FIX})):
        v, w = zbd.Vars(""), zbd.Vars("'")
        xs = (z3.Const("b", zbd.Broker), z3.Const("l", zbd.Ledger))
        assert vacuous_steps(zbd.strengthened(v), zbd.steps(v, w, fixes, *xs)) == []
    for fixes in (frozenset(), frozenset({zrb.FIX})):
        v, w = zrb.Vars(""), zrb.Vars("'")
        assert vacuous_steps(zrb.owner_names_cursor(v), zrb.steps(v, w, fixes, z3.Const("l", zrb.Ledger))) == []
    for fixes in (frozenset(), frozenset({zlw.FIX})):
        v, w = zlw.Vars(""), zlw.Vars("'")
        assert vacuous_steps(z3.BoolVal(True), zlw.steps(v, w, fixes, z3.Const("t", zlw.Txn))) == []
    for fixes in (frozenset(), frozenset({zend.FIX})):
        v, w = zend.Vars(""), zend.Vars("'")
        assert vacuous_steps(zend.invariant(v), zend.steps(v, w, fixes, z3.Const("k", zend.Topic))) == []
    for fixes in (frozenset(), frozenset({zoi.FIX}), frozenset({zoi.FIX, "subs-in-metadata"})):
        v, w = zoi.Vars(""), zoi.Vars("'")
        xs = (z3.Const("b", zoi.Broker), z3.Const("g", zoi.Seg))
        assert vacuous_steps(zoi.invariant(v), zoi.steps(v, w, fixes, *xs)) == []
    for fixes in (fixes_of("pip-468", zrbl.FIX), fixes_of("pip-468", "all-fixes")):
        v, w = zrbl.Vars(""), zrbl.Vars("'")
        assert vacuous_steps(zrbl.invariant(v), zrbl.steps(v, w, fixes, z3.Const("b", zrbl.Broker))) == []
    v, w = zrbl.Vars(""), zrbl.Vars("'")  # as written the leader has no watch on the layout
    assert vacuous_steps(zrbl.invariant(v), zrbl.steps(v, w, frozenset(), z3.Const("b", zrbl.Broker))) == [
        "layout_changed"]
    for fixes in (frozenset(), frozenset({zfg.FIX})):
        v, w = zfg.Vars(""), zfg.Vars("'")
        xs = (z3.Const("k", zfg.Seg), z3.Const("st", zfg.Store))
        assert vacuous_steps(zfg.invariant(v), zfg.steps(v, w, fixes, *xs)) == []
    for fixes in (frozenset(), frozenset({zrp.FIX})):
        v, w = zrp.Vars(""), zrp.Vars("'")
        xs = (z3.Const("k", zrp.Seg), z3.Const("st", zrp.Store))
        assert vacuous_steps(zrp.invariant(v), zrp.steps(v, w, fixes, *xs)) == []
    for fixes in (frozenset(), frozenset({zout.FIX_IDEMPOTENT})):
        v, w = zout.Vars(""), zout.Vars("'")
        assert vacuous_steps(zout.invariant(v), zout.steps(v, w, fixes)) == []
    for fixes in (frozenset(), fixes_of("v4-impl", zhz.FIX_LAST_ID), fixes_of("v4-impl", zhz.FIX_DISPATCHABLE),
                  fixes_of("v4-impl", "all-fixes")):
        v, w = zhz.Vars(""), zhz.Vars("'")
        assert vacuous_steps(zhz.invariant(v), zhz.steps(v, w, fixes, z3.Int("t"), z3.Int("answer"))) == []
    for fixes in (frozenset(), frozenset({zpa.FIX_ENDED})):
        v, w = zpa.Vars(""), zpa.Vars("'")
        assert vacuous_steps(zpa.invariant(v), zpa.steps(v, w, fixes)) == []
    for fixes in (frozenset(), frozenset({zab.FIX})):
        v, w = zab.Vars(""), zab.Vars("'")
        assert vacuous_steps(zab.recorded(v), zab.steps(v, w, fixes)) == []
    for fixes in (frozenset(), frozenset({zto.FIX_RECOVERY})):
        v, w = zto.Vars(""), zto.Vars("'")
        assert vacuous_steps(zto.invariant(v), zto.steps(v, w, fixes, z3.Bool("lost"))) == []
    for fixes in (frozenset(), fixes_of("pip-477", "all-fixes")):
        v, w = zpos.Vars(""), zpos.Vars("'")
        xs = (z3.Const("l", zpos.Ledger), z3.Bool("new"), z3.Int("p"))
        assert vacuous_steps(zpos.strengthened(v, fixes), zpos.steps(v, w, fixes, *xs)) == []
    v, w = zcur.Vars(""), zcur.Vars("'")
    broken = zcur.steps(v, w, frozenset(), z3.Const("o", zcur.Op), z3.Const("c", zcur.Ctl), z3.Const("g", zcur.Seg),
                        z3.Const("u", zcur.Sub))
    broken["dag_update"] = z3.And(broken["dag_update"], w.view != v.active)
    assert vacuous_steps(zcur.strengthened(v), broken) == ["dag_update"]


BUILD_CASES = [(v, "restart") for v in ("as-written", "recopy-own-copy", "all-fixes")]
BUILD_CASES += [("all-fixes", p) for p in ("close-restart", "schema", "cursor")] if NIGHTLY else []


@pytest.mark.parametrize("case", BUILD_CASES, ids="/".join)
def test_the_build_encoding_simulates_the_pip477_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-477", *case)
    assert zbd.simulation(model, pairs) == []


def test_the_build_proof_fails_as_written_on_an_own_copy_needs_its_strengthening_and_catches_a_model_without_the_fix():
    """As written the counterexample is BUILD failing a mismatching copy whose id the new cluster never handed out;
    with the fix, ``build_add``'s failure on a source entry it cannot read is excluded only by the strengthening
    (the copy is to hold no more than its source); and the model as written fails ledgers the fixed encoding does
    not."""
    cti = verdict_of("pip-477", "build-idempotent-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--build-->" in cti.detail
    assert "new's idgen's id, failed" not in cti.detail.split("--build-->")[1]
    v, w = zbd.Vars(""), zbd.Vars("'")
    b, lid = z3.Const("broker", zbd.Broker), z3.Const("ledger", zbd.Ledger)
    true = z3.BoolVal(True)
    weak = induction(true, true, true, zbd.steps(v, w, {zbd.FIX}, b, lid), before=lambda m: zbd.describe(m, v, b),
                     after=lambda m: zbd.describe(m, w, b),
                     also=lambda label: zbd.claim(v, w, lid) if label in zbd.BUILD else true)
    assert weak.status == VIOLATED and "--build_add-->" in weak.detail
    model, pairs = transitions_reached("pip-477", "as-written", "restart")
    drifted = zbd.simulation(model, pairs, steps_of=lambda v, w, fixes, b, lid: zbd.steps(v, w, {zbd.FIX}, b, lid))
    assert drifted and all(d.startswith("build(") for d in drifted)


LATE_WRITE_CASES = [("as-written", "default"), ("recheck-before-ack", "default"), ("all-fixes", "faults")]


@pytest.mark.parametrize("case", LATE_WRITE_CASES, ids="/".join)
def test_the_late_write_encoding_simulates_the_pip473_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-473", *case)
    assert zlw.simulation(model, pairs) == []


def test_the_late_write_proof_fails_as_written_on_the_ack_and_a_model_acking_a_decided_txn_is_caught():
    cti = verdict_of("pip-473", "no-write-after-end-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--pub_ack-->" in cti.detail and "header OPEN" not in cti.detail
    model, pairs = transitions_reached("pip-473", "as-written", "default")
    drifted = zlw.simulation(model, pairs, steps_of=lambda v, w, fixes, t: zlw.steps(v, w, {zlw.FIX}, t))
    assert drifted and all(d.startswith("pub_ack(") for d in drifted)


ROLLBACK_CASES = [(v, "rollback-old-down") for v in ("as-written", "rollback-only-to-readable-old", "all-fixes")]


@pytest.mark.parametrize("case", ROLLBACK_CASES, ids="/".join)
def test_the_rollback_encoding_simulates_the_pip477_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-477", *case)
    assert zrb.simulation(model, pairs) == []


def test_the_rollback_proof_fails_as_written_needs_its_strengthening_and_catches_a_model_without_the_guard():
    """As written the counterexample is ROLLBACK's flip of a promoted ledger the old cluster cannot serve; with the
    fix the handler's guard proves the cursor's flip only given that the owner's cursor is the znode's; and the
    model as written takes flips the fixed encoding has no step for."""
    cti = verdict_of("pip-477", "rollback-keeps-reads-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--rollback_schema-->" in cti.detail and "readable" not in cti.detail
    v, w, lid = zrb.Vars(""), zrb.Vars("'"), z3.Const("ledger", zrb.Ledger)
    weak = induction(z3.Not(v.cursor_new), z3.BoolVal(True), z3.BoolVal(True), zrb.steps(v, w, {zrb.FIX}, lid),
                     before=lambda m: zrb.describe(m, v), after=lambda m: zrb.describe(m, w),
                     also=lambda label: zrb.reads_kept(v, w) if label in zrb.FLIPS else z3.BoolVal(True))
    assert weak.status == VIOLATED and "--promote_cursor_handle-->" in weak.detail
    model, pairs = transitions_reached("pip-477", "as-written", "rollback-old-down")
    drifted = zrb.simulation(model, pairs, steps_of=lambda v, w, fixes, lid: zrb.steps(v, w, {zrb.FIX}, lid))
    assert {d.split("(")[0] for d in drifted} == {"rollback_schema", "promote_cursor_handle"}


END_CASES = [(v, p) for v in ("as-written", "off-segment-markers") for p in ("sealed", "faults", "two-txns-sealed")]
END_CASES += [("off-segment-markers", p) for p in ("two-txns", "acks-crash", "two-txns-acks")] if NIGHTLY else []


@pytest.mark.parametrize("case", END_CASES, ids="/".join)
def test_the_end_txn_encoding_simulates_the_v4_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("v4-txn", *case)
    assert zend.simulation(model, pairs) == []


def test_the_end_txn_ranking_fails_as_written_on_the_rejected_marker_needs_its_invariant_and_each_helper():
    """As written a sealed topic's rejection raises the marker's rank; with the fix, the TC's answer is enabled
    once every RPC is done only given that an ending client's txn is logged ending; a load that is never enabled
    (``mutant:no-recover-after-crash``'s model) leaves a sent RPC stuck; the helpers are fair in the model; and the
    model as written rejects markers the fixed encoding has no step for."""
    cti = verdict_of("v4-txn", "end-txn-completes-ranked", ("as-written",))
    assert cti.status == VIOLATED and "--marker_rejected-->" in cti.detail
    fixed = {zend.FIX}
    weak = zend.completes(fixed, invariant_of=lambda v: z3.BoolVal(True))
    assert weak.status == VIOLATED and weak.detail.startswith("tc_end is to be taken but disabled")
    stuck = zend.completes(fixed, helpers_of=lambda v, fixes, k: dict(
        zend.helpers(v, fixes, k), tb_recover=(zend.helpers(v, fixes, k)["tb_recover"][0], z3.BoolVal(False))))
    assert stuck.status == VIOLATED and stuck.detail.startswith("tb_recover is to be taken but disabled")
    helping = zend.helpers(zend.Vars(""), fixed, z3.Const("topic", zend.Topic))
    with pytest.raises(ValueError, match="crash"):  # a crash is the environment's: no argument may wait for one
        zend.completes(fixed, helpers_of=lambda v, fixes, k: dict(zend.helpers(v, fixes, k),
                                                                  crash=(z3.BoolVal(False), z3.BoolVal(True))))
    assert set(helping) <= set(V4_SYSTEM)
    model, pairs = transitions_reached("v4-txn", "as-written", "sealed")
    drifted = zend.simulation(model, pairs, steps_of=lambda v, w, _, k: zend.steps(v, w, fixed, k))
    assert drifted and all(d.startswith("marker_rejected(") for d in drifted)


OUTCOME_CASES = [("as-implemented", "tc-restart"), ("idempotent-end", "tc-restart"), ("all-fixes", "default")]
OUTCOME_CASES += [(v, p) for v in ("as-implemented", *zout.FIXED)
                  for p in models.model_class("v4-impl").in_process_presets() if (v, p) not in OUTCOME_CASES] \
    if NIGHTLY else []


@pytest.mark.parametrize("case", OUTCOME_CASES, ids="/".join)
def test_the_outcome_encoding_simulates_the_v4_impl_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("v4-impl", *case)
    assert zout.simulation(model, pairs) == []


def test_the_outcome_proof_fails_as_written_on_transaction_not_found_needs_its_strengthening_and_catches_drift():
    """As written the counterexample to induction is a committed txn's resent END_TXN answered
    TransactionNotFound; with the fix, the property alone is not inductive (a reply's answer must be known to
    match the decision); and the model as written answers TransactionNotFound, which the fixed encoding lacks."""
    cti = verdict_of("v4-impl", "told-the-outcome-inductive", ("as-implemented",))
    assert cti.status == VIOLATED and "--end_not_found-->" in cti.detail and "TC: committed" in cti.detail
    weak = zout.proof("idempotent-end", invariant_of=zout.told_the_outcome)
    assert weak.status == VIOLATED and "counterexample to induction" in weak.detail
    model, pairs = transitions_reached("v4-impl", "as-implemented", "tc-restart")
    fixed = frozenset({zout.FIX_IDEMPOTENT})
    drifted = zout.simulation(model, pairs, steps_of=lambda v, w, _: zout.steps(v, w, fixed))
    assert drifted and all(d.startswith("end_not_found(") for d in drifted)


HORIZON_CASES = [("as-implemented", "recovery"), ("pr-21466", "recovery"), ("pr-22610", "default"),
                 ("first-snapshot-catches-up", "default"), ("all-fixes", "tc-restart")]
HORIZON_CASES += [(v, p) for v in ("as-implemented", *zhz.FIXED, *zhz.CATCH_UP)
                  for p in models.model_class("v4-impl").in_process_presets() if (v, p) not in HORIZON_CASES] \
    if NIGHTLY else []


@pytest.mark.parametrize("case", HORIZON_CASES, ids="/".join)
def test_the_horizon_encoding_simulates_the_v4_impl_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("v4-impl", *case)
    assert zhz.simulation(model, pairs) == []


def test_the_horizon_proof_fails_as_written_on_the_last_entry_needs_its_strengthening_and_catches_drift():
    """As written the counterexample to induction is an answer at an open txn's entry; with the fix, the
    strengthening is needed (without the snapshot's part, a recovery from it may miss an open txn); the model as
    written answers where the fixed encoding does not; and an append that forgets to move maxReadPosition back
    before the new txn is caught."""
    cti = verdict_of("v4-impl", "last-id-within-horizon-inductive", ("as-implemented",))
    assert cti.status == VIOLATED and "--get_last_id-->" in cti.detail
    weak = zhz.proof(zhz.FIX_LAST_ID, invariant_of=lambda v: z3.And(
        *[c for name, c in zhz.strengthening(v).items() if name != "the snapshot's position"]))
    assert weak.status == VIOLATED and "--tb_recover-->" in weak.detail
    model, pairs = transitions_reached("v4-impl", "as-implemented", "default")
    fixed = fixes_of("v4-impl", zhz.FIX_LAST_ID)
    drifted = zhz.simulation(model, pairs, steps_of=lambda v, w, _, t, answer: zhz.steps(v, w, fixed, t, answer))
    assert drifted and all(d.startswith("get_last_id(") for d in drifted)

    def frozen_append(v, w, fixes, t, answer):
        out = zhz.steps(v, w, fixes, t, answer)
        return dict(out, append=z3.And(out["append"], w.max_read == v.max_read))
    model, pairs = transitions_reached("v4-impl", "pr-21466", "default")
    assert [d.split("(")[0] for d in zhz.simulation(model, pairs, steps_of=frozen_append)] == ["append"]


def test_the_plain_readable_proof_fails_as_written_on_the_first_snapshot_and_catches_a_model_without_the_catch_up():
    """As written the first snapshot's completion leaves plain messages published meanwhile beyond
    maxReadPosition; with the fix the claim is inductive; and the model as written completes first snapshots the
    fixed encoding has no step for."""
    cti = verdict_of("v4-impl", "plain-readable-inductive", ("as-implemented",))
    assert cti.status == VIOLATED and "--first_snapshot_written-->" in cti.detail
    model, pairs = transitions_reached("v4-impl", "as-implemented", "default")
    fixed = fixes_of("v4-impl", zhz.FIX_CATCH_UP)
    drifted = zhz.simulation(model, pairs, steps_of=lambda v, w, _, t, answer: zhz.steps(v, w, fixed, t, answer))
    assert drifted and all(d.startswith("first_snapshot_written(") for d in drifted)


TIMEOUT_CASES = [("as-implemented", "tc-restart"), ("pr-19201", "tc-restart"), ("all-fixes", "default")]
TIMEOUT_CASES += [(v, p) for v in ("as-implemented", *zto.FIXED)
                  for p in models.model_class("v4-impl").in_process_presets() if (v, p) not in TIMEOUT_CASES] \
    if NIGHTLY else []


@pytest.mark.parametrize("case", TIMEOUT_CASES, ids="/".join)
def test_the_timeout_encoding_simulates_the_v4_impl_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("v4-impl", *case)
    assert zto.simulation(model, pairs) == []


def test_the_timeout_ranking_fails_as_written_on_the_lost_timeout_needs_its_invariant_and_catches_drift():
    """As written the reload loses an open txn's timeout; with the fix, without the invariant the timeout is not
    known to be enabled; a reload that is never enabled leaves the argument stuck; the model as written takes
    reloads the fixed encoding has no step for; and a timeout said enabled where the model's is not is caught."""
    cti = verdict_of("v4-impl", "open-txn-ends-ranked", ("as-implemented",))
    assert cti.status == VIOLATED and "--tc_reload-->" in cti.detail and "its timeout lost" in cti.detail
    weak = zto.ends(zto.FIX_RECOVERY, invariant_of=lambda v: v.crashes >= 0)
    assert weak.status == VIOLATED and weak.detail.startswith("txn_timeout is to be taken but disabled")
    stuck = zto.ends(zto.FIX_RECOVERY, helpers_of=lambda v: dict(zto.helpers(v), tc_reload=(z3.Not(v.up),
                                                                                            z3.BoolVal(False))))
    assert stuck.status == VIOLATED and stuck.detail.startswith("tc_reload is to be taken but disabled")
    model, pairs = transitions_reached("v4-impl", "as-implemented", "tc-restart")
    fixed = frozenset({zto.FIX_RECOVERY})
    drifted = zto.simulation(model, pairs, steps_of=lambda v, w, _, lost: zto.steps(v, w, fixed, lost))
    assert drifted and all(d.startswith("tc_reload(") for d in drifted)
    blind = zto.simulation(model, pairs, helpers_of=lambda v: dict(zto.helpers(v), txn_timeout=(
        v.up, z3.And(v.up, v.tc == zto.T_OPEN))))
    assert blind and all(d.startswith("txn_timeout: enabled for txn") for d in blind)


ABORT_CASES = [("as-implemented", "default"), ("abort-marker-always", "default"), ("all-fixes", "recovery")]
ABORT_CASES += [(v, p) for v in ("as-implemented", *zab.FIXED)
                for p in models.model_class("v4-impl").in_process_presets() if (v, p) not in ABORT_CASES] \
    if NIGHTLY else []


@pytest.mark.parametrize("case", ABORT_CASES, ids="/".join)
def test_the_abort_encoding_simulates_the_v4_impl_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("v4-impl", *case)
    assert zab.simulation(model, pairs) == []


def test_the_abort_proof_fails_as_written_on_the_markerless_abort_and_catches_drift():
    """As written the counterexample to induction is the abort acknowledged without a marker, and the model as
    written acknowledges aborts the fixed encoding has no step for."""
    cti = verdict_of("v4-impl", "abort-recorded-inductive", ("as-implemented",))
    assert cti.status == VIOLATED and "--abort_without_marker-->" in cti.detail
    model, pairs = transitions_reached("v4-impl", "as-implemented", "default")
    drifted = zab.simulation(model, pairs, steps_of=lambda v, w, _: zab.steps(v, w, frozenset({zab.FIX})))
    assert drifted and all(d.startswith("abort_without_marker(") for d in drifted)


PENDING_CASES = [("as-implemented", "ack-timeout"), ("ack-after-end-rejected", "ack-timeout"), ("all-fixes", "shared")]
PENDING_CASES += [(v, p) for v in ("as-implemented", *zpa.FIXED)
                  for p in models.model_class("v4-impl").in_process_presets() if (v, p) not in PENDING_CASES] \
    if NIGHTLY else []


@pytest.mark.parametrize("case", PENDING_CASES, ids="/".join)
def test_the_pending_ack_encoding_simulates_the_v4_impl_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("v4-impl", *case)
    assert zpa.simulation(model, pairs) == []


def test_the_pending_ack_proof_fails_as_written_on_the_late_ack_needs_its_strengthening_and_catches_drift():
    """As written the counterexample to induction is an ack stored and held pending after the subscription ended
    its txn; with the fix, the claim alone is not inductive (the handle's recovery would make the txn pending from
    a record after its marker); and the model as written stores late acks the fixed encoding refuses."""
    cti = verdict_of("v4-impl", "ended-txn-releases-acks-inductive", ("as-implemented",))
    assert cti.status == VIOLATED and "--ack_pending-->" in cti.detail
    weak = zpa.proof(zpa.FIX_ENDED, invariant_of=zpa.released)
    assert weak.status == VIOLATED and "--tb_recover-->" in weak.detail
    model, pairs = transitions_reached("v4-impl", "as-implemented", "ack-timeout")
    drifted = zpa.simulation(model, pairs, steps_of=lambda v, w, _: zpa.steps(v, w, frozenset({zpa.FIX_ENDED})))
    assert drifted and {d.split("(")[0] for d in drifted} <= {"ack_pending", "ack_conflict"}


INTENT_CASES = [(v, p) for v in ("op-intent", "all-fixes") for p in ("failover", "split-merge", "merge-new-sub")]
INTENT_CASES += [(v, p) for v in ("op-intent", "all-fixes") for p in ("consumer-failover", "session-failover",
                                                                      "merge")] if NIGHTLY else []


@pytest.mark.parametrize("case", INTENT_CASES, ids="/".join)
def test_the_intent_encoding_simulates_the_pip468_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-468", *case)
    assert zoi.simulation(model, pairs) == []


def test_the_intent_ranking_fails_without_the_resume_its_invariant_or_a_helper_and_catches_unrecorded_operations():
    """Without the fix's resume a new leader holds the lock with nothing running the intent; without the invariant a
    stranded layout may have no intent to resume; a CAS that is never enabled leaves the copy stuck; and the model as
    written terminates parents of operations the fixed encoding has no record of."""
    fixed = frozenset({zoi.FIX})
    assert "--elect-->" in zoi.resumed(frozenset()).detail
    weak = zoi.resumed(fixed, invariant_of=lambda v: z3.BoolVal(True))
    assert weak.status == VIOLATED and weak.detail.startswith("counterexample to progress")
    stuck = zoi.resumed(fixed, helpers_of=lambda v, fixes, k, x: dict(
        zoi.helpers(v, fixes, k, x), cas=(zoi.helpers(v, fixes, k, x)["cas"][0], z3.BoolVal(False))))
    assert stuck.status == VIOLATED and stuck.detail.startswith("cas is to be taken but disabled")
    assert set(zoi.helpers(zoi.Vars(""), fixed, z3.Const("b", zoi.Broker), z3.Const("g", zoi.Seg))) <= set(
        PIP468_SYSTEM)
    model, pairs = transitions_reached("pip-468", "as-written", "failover")
    drifted = zoi.simulation(model, pairs, steps_of=lambda v, w, _, k, x: zoi.steps(v, w, fixed, k, x))
    assert drifted and {d.split("(")[0] for d in drifted} == {"terminate", "cas"}


REBALANCE_CASES = [("leader-watches-layout", p) for p in ("failover", "consumer-failover", "session-failover")]
REBALANCE_CASES += [(v, p) for v in ("leader-watches-layout", "all-fixes") for p in (
    "consumers", "merge-new-sub", "two-new-subs", "two-consumers-failover")] + [
    ("all-fixes", p) for p in ("failover", "consumer-failover", "session-failover")] if NIGHTLY else []


@pytest.mark.parametrize("case", REBALANCE_CASES, ids="/".join)
def test_the_rebalance_encoding_simulates_the_pip468_model_on_every_reachable_state(case):
    """The encoding's steps simulate every fix variant, though the ranking is proved for the fix alone."""
    model, pairs = transitions_reached("pip-468", *case)
    assert zrbl.simulation(model, pairs) == []


def test_the_rebalance_ranking_fails_as_written_with_every_fix_without_its_invariant_or_a_helper():
    """As written the election restores a stale assignment; with every fix a createSubscription's reload makes a
    stale leader current without a rebalance (op-intent's copy, not kept here, rebalances it); without the invariant
    the holder need not believe it leads, so its watch is not known to fire; a notify step never enabled leaves the
    holder stale; and the model as written elects leaders whose assignment the fixed encoding does not allow."""
    fixed = fixes_of("pip-468", zrbl.FIX)
    assert "--elect-->" in zrbl.rebalanced(frozenset()).detail
    every = zrbl.rebalanced(fixes_of("pip-468", "all-fixes"))
    assert every.status == VIOLATED and "--create_subscription-->" in every.detail
    weak = zrbl.rebalanced(fixed, invariant_of=lambda v: z3.BoolVal(True))
    assert weak.status == VIOLATED and weak.detail.startswith("layout_changed is to be taken but disabled")
    stuck = zrbl.rebalanced(fixed, helpers_of=lambda v, fixes, k: dict(
        zrbl.helpers(v, fixes, k), notify=(zrbl.helpers(v, fixes, k)["notify"][0], z3.BoolVal(False))))
    assert stuck.status == VIOLATED and stuck.detail.startswith("notify is to be taken but disabled")
    assert set(zrbl.helpers(zrbl.Vars(""), fixed, z3.Const("b", zrbl.Broker))) <= set(PIP468_SYSTEM)
    model, pairs = transitions_reached("pip-468", "as-written", "consumer-failover")
    drifted = zrbl.simulation(model, pairs, steps_of=lambda v, w, _, k: zrbl.steps(v, w, fixed, k))
    assert drifted and {d.split("(")[0] for d in drifted} == {"elect"}


FORGET_CASES = [("all-fixes", "acks", {"crashes": 0}), ("forget-collected-acks", "default", None)]
FORGET_CASES += [(v, "acks", None) for v in ("forget-collected-acks", "all-fixes")] if NIGHTLY else []


@pytest.mark.parametrize("case", FORGET_CASES, ids=lambda c: "/".join(c[:2]) + ("/no-crash" if c[2] else ""))
def test_the_forget_encoding_simulates_the_pip473_model_on_every_reachable_state(case):
    variant, preset, overrides = case
    model, pairs = transitions_reached("pip-473", variant, preset, overrides)
    assert zfg.simulation(model, pairs) == []


def test_the_forget_ranking_fails_as_written_needs_its_invariant_and_catches_a_store_keeping_acks():
    """As written the invariant breaks where a store keeps a pending ack nothing will ever drop; with the fix, without
    the invariant the deliveries are not known to be enabled; and the model as written keeps acks on the header
    watch that the fixed encoding drops."""
    cti = verdict_of("pip-473", "collected-txns-leave-brokers-ranked", ("as-written",))
    assert cti.status == VIOLATED and "--txn_ack-->" in cti.detail
    weak = zfg.leaves(frozenset({zfg.FIX}), invariant_of=lambda v: z3.BoolVal(True))
    assert weak.status == VIOLATED and "is to be taken but disabled" in weak.detail
    assert set(zfg.DELIVERIES) <= set(PIP473_SYSTEM)
    model, pairs = transitions_reached("pip-473", "as-written", "acks", {"crashes": 0})
    assert zfg.simulation(model, pairs) == []
    drifted = zfg.simulation(model, pairs, steps_of=lambda v, w, _, k, st: zfg.steps(v, w, {zfg.FIX}, k, st))
    assert drifted and all(d.startswith("pa_header(") for d in drifted)


REAP_CASES = [("owners-reap-orphans", "default"), ("all-fixes", "acks")]
REAP_CASES += [("owners-reap-orphans", p) for p in ("sealed", "faults", "two-txns")] if NIGHTLY else []


@pytest.mark.parametrize("case", REAP_CASES, ids="/".join)
def test_the_reap_encoding_simulates_the_pip473_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-473", *case)
    assert zrp.simulation(model, pairs) == []


def test_the_reap_ranking_fails_as_written_needs_its_invariant_and_catches_a_send_that_is_never_given_back():
    """As written a record in a running buffer's view, with no header, has no step to take it away; with the fix,
    without the invariant a send may be in flight to a down broker; and an encoding that counts a send to a
    sealed segment as spent misses the model's TopicTerminated giving the client its slot back."""
    cti = verdict_of("pip-473", "orphan-records-reaped-ranked", ("as-written",))
    assert cti.status == VIOLATED and "no fair step is to be taken" in cti.detail
    assert "in its index view" in cti.detail
    fixed = frozenset({zrp.FIX})
    weak = zrp.reaped(fixed, invariant_of=lambda v: z3.BoolVal(True))  # a down broker's sends in flight, say
    assert weak.status == VIOLATED and "no fair step is to be taken" in weak.detail
    assert set(zrp.HELPERS) <= set(PIP473_SYSTEM)

    def spent(v, w, fixes, k, st):
        out = zrp.steps(v, w, fixes, k, st)
        return dict(out, send=z3.And(out["send"], w.left == v.left - 1))
    model, pairs = transitions_reached("pip-473", zrp.FIX, "sealed", {"nontxn": 0})
    drifted = zrp.simulation(model, pairs, steps_of=spent)
    assert drifted and all(d.startswith("send(") for d in drifted)


POSITION_CASES = [("as-written", "cursor"), ("all-fixes", "cursor"), ("all-fixes", "rollback")]
POSITION_CASES += [("all-fixes", p) for p in ("restart", "schema", "close", "old-down", "sub-property",
                                              "rollback-old-down")] if NIGHTLY else []


@pytest.mark.parametrize("case", POSITION_CASES, ids="/".join)
def test_the_position_encoding_simulates_the_pip477_model_on_every_reachable_state(case):
    model, pairs = transitions_reached("pip-477", *case)
    assert zpos.simulation(model, pairs) == []


def test_the_position_proof_fails_as_written_on_promote_needs_its_strengthening_and_catches_a_model_without_the_fix():
    """As written the counterexample is PROMOTE stamping new a cursor ledger whose copy is behind the confirmed
    position; with the fixes the claim is not inductive on its own (a markDelete through a handle the znode no longer
    routes to); the model as written promotes and keeps writing where the fixed encoding does not; and with the cursor
    fix alone the cursor ledger and a schema ledger PROMOTE re-stamps share an id (a rollover on the new cluster takes
    it, or the promote comes after), which is why the claim is made for all-fixes."""
    cti = verdict_of("pip-477", "position-not-rewound-inductive", ("as-written",))
    assert cti.status == VIOLATED and "--promote_cursor_handle-->" in cti.detail
    fixes = fixes_of("pip-477", "all-fixes")
    weak = zpos.inductive(fixes, strong=lambda v, _: zpos.recovers(v))
    assert weak.status == VIOLATED
    model, pairs = transitions_reached("pip-477", "as-written", "cursor")
    drifted = zpos.simulation(model, pairs, steps_of=lambda v, w, _, *xs: zpos.steps(v, w, fixes, *xs))
    assert drifted and all(d.startswith("promote_cursor_handle(") for d in drifted)
    model, pairs = transitions_reached("pip-477", zpos.FIX, "schema")
    # past the shared id (the search expands the state that breaks I11), the cursor's promote meets the new
    # cluster's ledger of that id already longer than the copy
    assert {d.split("(")[0] for d in zpos.simulation(model, pairs)} == {"cursor_rollover", "promote_schema_cas",
                                                                       "promote_cursor_handle"}


SESSION_CASES = [(v, "consumer-failover") for v in ("as-written", "fenced-registrations", "all-fixes",
                                                    "mutant:no-rebalance-on-join")]
SESSION_CASES += [(v, "session-failover") for v in ("as-written", "fenced-registrations", "all-fixes")]
SESSION_CASES += [(v, "consumers") for v in ("as-written", "atomic-registrations", "mutant:no-rebalance-on-join")]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SESSION_CASES), st.integers(0, 10**9))
def test_session_formulas_agree_with_the_pip468_model(case, pick):
    assert disagreements_at(zss, "pip-468", case, pick, 3000) == []


def test_a_drifted_sessions_encoding_is_caught():
    model, states = explored("pip-468", "fenced-registrations", "session-failover", 3000)

    def drifted(v, w, b, c, fixes, variant):  # a registration write that lands unfenced
        t = zss.transitions(v, w, b, c, fixes, variant)
        t["persist_registration"] = zss.transitions(v, w, b, c, frozenset(), variant)["persist_registration"]
        return t
    pairs = [(s, a, t) for s in states for a, t in model.successors(s)
             if a.name == "persist_registration" and s.lock != a.param("broker")]
    assert pairs and zss.disagreements(model, pairs, drifted)


def test_bounded_checking_finds_the_deposed_leader_run_with_the_explorers_length():
    finding = next(f for f in json.loads(open("findings/pip-468/index.json").read())
                   if f["name"] == "deposed-leader-erases-consumer-session")
    run = z468.sessions_durable("as-written")
    assert run.status == VIOLATED and run.detail.startswith(f"sessions-durable in {finding['length']} steps: ")
    # the fenced variant's obligation checks runs one step longer than the explorer's deepest there
    result, _ = explore(models.build("pip-468", "fenced-registrations", preset="session-failover"))
    assert all(v.prop.id != "sessions-durable" for v in result.violations)


PIP373_VARIANTS = ("as-written", "persist-before-append", "confirm-unmarked", "all-fixes", "mutant:admin-can-write",
                   "mutant:always-rebuild", "mutant:commit-marks-aborted")
V4_VARIANTS = ("as-written", "off-segment-markers", "mutant:deliver-aborted", "mutant:commit-marks-aborted",
               "mutant:end-any-state")


def found_lengths(found: dict) -> dict:
    """The length of each breaking run (or lasso) a step-for-step check found, by property."""
    return {p: len(run[0]) for p, run in found.items() if run is not None}


def drifted_step(steps, label: str, edit):
    """``steps``' transition formulas with ``label``'s changes edited by ``edit(v, changes)`` (a
    deliberately drifted encoding, for the agreement check to catch)."""
    def transitions(v, w):
        t = steps.transitions(v, w)
        guard, changes = steps.actions(v)[label]
        t[label] = z3.And(guard, same(v, w, edit(v, changes)))
        return t
    return transitions


def lengths_found_step_for_step(name: str, variant: str, preset: str, broken_only: bool = False):
    """The explorer's violations at ``preset`` of the properties the step-for-step encoding states, and
    the encoding's shortest breaking runs within the explorer's depth plus one, by property (lengths);
    ``broken_only``: of the properties the explorer finds broken, up to the longest of their runs."""
    model = models.build(name, variant, preset=preset)
    result, _ = explore(model)
    encoding = {"pip-373": z373, "v4-txn": zv4}[name].encoding(variant, preset)
    stated = set(encoding.properties) | set(encoding.liveness)
    explorer = {v.prop.id: v.length for v in result.violations if v.prop.id in stated}
    if broken_only:
        return explorer, found_lengths(encoding.check(max(explorer.values()), only=set(explorer))) if explorer else {}
    return explorer, found_lengths(encoding.check(result.depth + 1))


def test_step_for_step_pip373_checking_reports_the_explorers_verdicts_and_lengths():
    """Every variant, mutants too (each breaks the property it is there for), at the findings' bounds. In CI, of
    the fixes only all-fixes, and each mutant only for what it breaks (the nightly checks the rest holds within the
    explorer's depth, step for step)."""
    findings = {(f["property"], f["bounds"]): f["length"] for f in json.loads(open("findings/pip-373/index.json").read())}
    fixes = {v.name for v in models.model_class("pip-373").variants if v.kind == "fix"} - {"all-fixes"}
    for variant in PIP373_VARIANTS if NIGHTLY else [v for v in PIP373_VARIANTS if v not in fixes]:
        for preset in z373.PRESETS:
            broken_only = variant.startswith("mutant:") and not NIGHTLY
            explorer, z3_lengths = lengths_found_step_for_step("pip-373", variant, preset, broken_only)
            assert z3_lengths == explorer, (variant, preset)
            if variant == "as-written":  # the findings of the properties the encoding states
                stated = z373.Pip373Steps.properties
                assert {p: n for (p, b), n in findings.items() if b == preset and p in stated} == z3_lengths


def test_step_for_step_v4_checking_reports_the_explorers_verdicts_and_lengths():
    """The sealed-segment stall (a lasso) and each mutant's property, as the explorer reports them."""
    finding = json.loads(open("findings/v4-txn/index.json").read())[0]
    fair = models.build("v4-txn").liveness[0].fair
    assert set(zv4.Steps.fair) == set(fair) - {"end_on_subscription"}  # acks are outside the encoding
    for variant in V4_VARIANTS:
        for preset in zv4.PRESETS:
            explorer, z3_lengths = lengths_found_step_for_step("v4-txn", variant, preset)
            assert z3_lengths == explorer, (variant, preset)
            if variant == "as-written" and preset == finding["bounds"]:
                assert z3_lengths == {finding["property"]: finding["length"]}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(v, p) for v in PIP373_VARIANTS for p in ("default", "upgrade-user-false", "upgrade-absent")]),
       st.integers(0, 10**9))
def test_step_formulas_agree_with_the_pip373_model(case, pick):
    assert disagreements_at(z373, "pip-373", case, pick) == []


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([(v, p) for v in V4_VARIANTS for p in zv4.PRESETS]), st.integers(0, 10**9))
def test_step_formulas_agree_with_the_v4_model(case, pick):
    assert disagreements_at(zv4, "v4-txn", case, pick) == []


def test_a_drifted_pip373_step_encoding_is_caught():
    model, states = explored("pip-373", "as-written", "default")
    steps = z373.encoding("as-written", "default")
    # a crash that keeps the dispatcher's read position
    drifted = drifted_step(steps, "crash", lambda v, changes: {**changes, "read": v["read"]})
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "crash" and s.subs[0].read]
    assert pairs and steps.disagreements(model, pairs[:5], drifted)


def test_a_drifted_v4_step_encoding_is_caught():
    model, states = explored("v4-txn", "as-written", "sealed")
    steps = zv4.encoding("as-written", "sealed")

    def drifted(v, w):  # a sealed segment that accepts the marker
        t = steps.transitions(v, w)
        guard, changes = steps.actions(v)["end_on_partition(1)"]
        t["end_on_partition(1)"] = z3.And(v["rpc1"] == zv4.SENT, v["ready"], same(v, w, changes))
        return t
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if a.name == "marker_rejected"]
    assert pairs and all("end_on_partition(1) is enabled in the formulas only" in d
                         for d in steps.disagreements(model, pairs, drifted))


def explorer_lengths(name: str, variant: str, preset: str, depth: int | None = None) -> dict:
    """The explorer's shortest counterexample length by broken property (a deadlock is not one the
    encodings state); with ``depth``, the explorer's depth must be within it."""
    result, _ = explore(models.build(name, variant, preset=preset))
    assert depth is None or result.depth <= depth
    return {v.prop.id: v.length for v in result.violations if v.prop.id != "deadlock"}


def verdict_lengths(verdict) -> dict:
    """The length of each breaking run a bounded verdict shows, by property."""
    return {p: int(n) for p, n in re.findall(r"([\w-]+) in (\d+) steps?", verdict.detail)}


def assert_obligations_have_the_explorers_lengths(name: str, cases: dict):
    """Each ``steps-bounded-<preset>`` obligation's whole verdict (``cases``: preset -> (variants,
    the explorer's depth)) breaks the properties the explorer reports, with its lengths."""
    for preset, (variants, depth) in cases.items():
        for variant in variants:
            verdict = verdict_of(name, f"steps-bounded-{preset}", (variant,))
            assert verdict_lengths(verdict) == explorer_lengths(name, variant, preset, depth), (variant, preset)


# properties the PIP-468 step encodings do not state yet (the explorer alone decides them)
NOT_IN_PIP468_STEPS = {"departed-consumers-evicted", "created-when-propagated", "remaining-consumers-served"}


PIP468_STEP_CASES = [(module, preset) for module in (z468, z468l) for preset in module.CASES]
# consumer-failover's two lassos (13 and 14 steps) take the solver about five minutes: the nightly run checks them
PIP468_STEP_CI = [(module, preset) for module, preset in PIP468_STEP_CASES if NIGHTLY or preset != "consumer-failover"]


# findings whose bounds have two stream consumers, which the step encodings (one consumer) leave to the explorer
TWO_CONSUMERS = {"segment-granted-before-revoked"}


def test_the_pip468_step_encodings_cover_every_findings_bounds():
    findings = json.loads(open("findings/pip-468/index.json").read())
    assert {f["bounds"] for f in findings if f["name"] not in TWO_CONSUMERS} <= {p for _, p in PIP468_STEP_CASES}
    assert all(Pip468.presets[f["bounds"]].get("consumers") == 2 for f in findings if f["name"] in TWO_CONSUMERS)


@pytest.mark.parametrize("module,preset", PIP468_STEP_CI, ids=lambda x: getattr(x, "__name__", x).split(".")[-1])
def test_step_for_step_pip468_checking_finds_the_explorers_findings_with_their_lengths(module, preset):
    """As written, at the findings' bounds: the shortest run (or lasso) breaking each property the
    explorer reports broken has the explorer's length; each finding is among them. (The whole
    verdicts, every property up to the explorer's depth plus one and the fixes, take minutes: they
    are compared in the nightly run.)"""
    findings = json.loads(open("findings/pip-468/index.json").read())
    variants = module.CASES[preset]
    depth = explorer_depth("pip-468", preset, variants)
    for variant in variants if NIGHTLY else ("as-written",):
        explorer = explorer_lengths("pip-468", variant, preset, depth)
        enc = module.encoding(variant, preset)
        unstated = {p for p in explorer if p not in set(enc.properties) | set(enc.liveness)}
        assert unstated <= NOT_IN_PIP468_STEPS, (variant, preset, unstated)
        explorer = {p: n for p, n in explorer.items() if p not in unstated}
        if NIGHTLY:
            lengths = verdict_lengths(verdict_of("pip-468", f"steps-bounded-{preset}", (variant,)))
        else:
            lengths = found_lengths(enc.check(depth + 1, only=set(explorer)))
        assert lengths == explorer, (variant, preset)
        if variant == "as-written":
            assert all(lengths[f["property"]] == f["length"] for f in findings
                       if f["bounds"] == preset and f["property"] not in NOT_IN_PIP468_STEPS)


def test_step_for_step_pip468_checking_finds_each_mutants_violations_with_their_lengths():
    """The split's steps out of order: the shortest runs breaking ``sealed-accepts-no-write``,
    ``one-writable-segment``, ``cursors-before-routing`` and ``no-message-loss`` have the explorer's
    lengths; so do ``reconnect-keeps-assignment``'s (a reconnect that rebalances) and
    ``per-key-order``'s (no catch-up), so each of those step formulas can fail."""
    cases = (("mutant:cas-before-terminate", "default", None), ("mutant:cas-before-create", "default", None),
             ("mutant:rebalance-on-reconnect", "consumer-failover", {"reconnect-keeps-assignment"}),
             ("mutant:no-catch-up", "stream-order", {"per-key-order"}))
    for variant, preset, props in cases:
        explorer = explorer_lengths("pip-468", variant, preset)
        props = props or set(explorer)
        found = z468.encoding(variant, preset).check(max(explorer[p] for p in props), only=props)
        assert found_lengths(found) == {p: explorer[p] for p in props}, variant


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([(v, p) for v in ("as-written", "subs-in-metadata", "op-intent", "leader-watches-layout",
                                         "all-fixes", "mutant:cas-before-terminate", "mutant:cas-before-create")
                        for p in ("new-sub", "failover", "default")] +
                       [(v, "consumer-failover") for v in ("as-written", "fenced-registrations",
                                                           "leader-watches-layout", "atomic-registrations",
                                                           "all-fixes", "mutant:rebalance-on-reconnect")] +
                       [(v, "session-failover") for v in ("as-written", "fenced-registrations", "all-fixes",
                                                          "mutant:no-rebalance-on-join")] +
                       [("mutant:no-catch-up", "stream-order")]), st.integers(0, 10**9))
def test_step_formulas_agree_with_the_pip468_model(case, pick):
    assert disagreements_at(z468, "pip-468", case, pick) == []


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(("as-written", "subs-in-metadata", "op-intent", "leader-watches-layout", "all-fixes")),
       st.integers(0, 10**9))
def test_layout_step_formulas_agree_with_the_pip468_model(variant, pick):
    assert disagreements_at(z468l, "pip-468", (variant, "split-merge"), pick) == []


def test_a_drifted_pip468_step_encoding_is_caught():
    model, states = explored("pip-468", "as-written", "new-sub")
    steps = z468.Pip468Steps(model.config)
    # a split that discovers no subscriptions (its children get no cursors)
    drifted = drifted_step(steps, "discover(0)",
                           lambda v, changes: {**changes, **{f"osub0_{s}": False for s in steps.subs}})
    pairs = [(s, a, t) for s in states for a, t in model.successors(s)
             if steps.label(a) == "discover(0)" and s.topics[0].cursors]
    assert pairs and steps.disagreements(model, pairs[:5], drifted)
    model, states = explored("pip-468", "as-written", "consumer-failover")
    steps = z468.Pip468Steps(model.config)
    # a registration write that lands but pushes nothing to the connected consumer
    drifted = drifted_step(steps, "persist_registration(0,c1)", lambda v, changes: {**changes, "inbox": v["inbox"]})
    pairs = [(s, a, t) for s in states for a, t in model.successors(s)
             if steps.label(a) == "persist_registration(0,c1)" and t.consumers[0].inbox != s.consumers[0].inbox]
    assert pairs and steps.disagreements(model, pairs[:5], drifted)
    model, states = explored("pip-468", "as-written", "split-merge")
    steps = z468l.Pip468LayoutSteps(model.config)
    # a merge whose BadVersion always starts it over, even when its parents are no longer active
    drifted = drifted_step(steps, "cas_conflict(0,merge)", lambda v, changes: {
        **changes, **steps.op_on(0, "merge", v["version"], v["layout"], v["p10merge"], v["p20merge"])})
    pairs = [(s, a, t) for s in states for a, t in model.successors(s)
             if steps.label(a) == "cas_conflict(0,merge)" and "merge" not in {op.kind for op in t.ctrls[0].ops}]
    assert pairs and steps.disagreements(model, pairs[:5], drifted)


PIP473_VARIANTS = ("as-written", "open-entry-barrier", "finalize-in-cas", "recheck-before-ack",
                   "gc-waits-for-participants", "keep-decisions-with-data", "owners-reap-orphans",
                   "forget-collected-acks", "all-fixes",
                   "mutant:blind-cas", "mutant:deliver-aborted", "mutant:end-needs-append", "mutant:pin-committed")
# what CI checks: each finding's bounds as written, and each mutant where it breaks its property; the lasso of
# mutant:end-needs-append at ``sealed`` (end-txn-completes' trigger failing), a search of 2-3 minutes, is nightly's
# (CI checks the encoding's lassos of the findings, finalized-txns-collected and collected-txns-leave-brokers)
PIP473_CI = (("as-written", "default"), ("as-written", "faults"), ("as-written", "acks"),
             ("mutant:blind-cas", "default"), ("mutant:apply-aborted-acks", "acks"),
             ("mutant:deliver-aborted", "default"), ("mutant:pin-committed", "default"),
             *([("mutant:end-needs-append", "sealed")] if NIGHTLY else []))


@pytest.mark.parametrize("case", PIP473_CI, ids="/".join)
def test_step_for_step_pip473_checking_finds_the_explorers_findings_with_their_lengths(case):
    """The shortest run (or lasso) breaking each property the explorer reports broken has the
    explorer's length: all eight findings, and each mutant's property (so every step formula and
    trigger can fail)."""
    variant, preset = case
    findings = json.loads(open("findings/pip-473/index.json").read())
    explorer = explorer_lengths("pip-473", variant, preset)
    found = z473.encoding(variant, preset).check(max(explorer.values()), only=set(explorer))
    assert found_lengths(found) == explorer, (variant, preset)
    if variant == "as-written":
        assert all(explorer[f["property"]] == f["length"] for f in findings if f["bounds"] == preset)


@pytest.mark.skipif(not NIGHTLY, reason="the whole verdicts take minutes: nightly")
def test_the_pip473_step_obligations_have_the_explorers_lengths():
    """Every property, up to the explorer's depth plus one."""
    assert_obligations_have_the_explorers_lengths("pip-473", {p: (vs, None) for p, vs in z473.CASES.items()})


@settings(max_examples=SAMPLED_STATES, deadline=None)
@given(st.sampled_from([(v, "default") for v in PIP473_VARIANTS] + [("as-written", "faults"), ("all-fixes", "faults"),
                                                                   ("mutant:end-needs-append", "sealed"),
                                                                   ("as-written", "acks"),
                                                                   ("mutant:apply-aborted-acks", "acks")]),
       st.integers(0, 10**9))
def test_step_formulas_agree_with_the_pip473_model(case, pick):
    assert disagreements_at(z473, "pip-473", case, pick) == []


def test_a_drifted_pip473_step_encoding_is_caught():
    model, states = explored("pip-473", "as-written", "default")
    steps = z473.Pip473Steps(model.config)
    # a CAS whose header watch never fires (the buffer keeps its OPEN entry)
    drifted = drifted_step(steps, "tc_cas(client)", lambda v, changes: {**changes, "pend_hdr": v["pend_hdr"]})
    pairs = [(s, a, t) for s in states for a, t in model.successors(s)
             if steps.label(a) == "tc_cas(client)" and s.buffers[0].hdr]
    assert pairs and steps.disagreements(model, pairs[:5], drifted)


# the findings (as written, each with the property the explorer finds it by) and the mutants whose property
# breaks there: CI compares these lengths (the two longest, nightly: CI checks that the explorer's run of
# cleanup's I12, 18 steps, is one of the encoding's; rollback-resets-hash's 17-step search took 217 s)
PIP477_CI = (("as-written", "legacy", "I2"), ("as-written", "restart", "I6"), ("as-written", "schema", "I2"),
             ("as-written", "cursor", "I11"),
             ("as-written", "cleanup", "I12"), ("as-written", "sub-property", "I16"),
             ("as-written", "close-restart", "I6"), ("mutant:every-broker-orchestrates", "default", "I14"),
             ("mutant:stamp-after-create", "cursor", "I1"), ("mutant:read-through-active-client", "legacy", "I4"),
             ("mutant:promote-clears-cursor-props", "cleanup", "I9"), ("mutant:promote-resets-hash", "cleanup", "I10"),
             ("mutant:rollback-resets-hash", "rollback", "rollback-keeps-business-znodes"),
             ("as-written", "rollback-old-down", "rollback-keeps-reads"),
             ("mutant:blind-schema-promote", "schema", "I3"))
PIP477_NIGHTLY = {("as-written", "cleanup", "I12"), ("mutant:rollback-resets-hash", "rollback",
                                                      "rollback-keeps-business-znodes")}


def z477_lengths(variant: str, preset: str, props: set, k: int) -> dict:
    return found_lengths(z477.encoding(variant, preset).check(k, only=props))


def _pip477_step_findings() -> list:
    """The findings whose property the steps state, other than those of ``PIP477_CI``."""
    ci = {(preset, prop) for variant, preset, prop in PIP477_CI if variant == "as-written"}
    return [f for f in catalogue("pip-477") if f.bounds in z477.PRESETS and f.property in z477.Pip477Steps.properties
            and (f.bounds, f.property) not in ci]


@pytest.mark.parametrize("case", PIP477_CI, ids="/".join)
def test_step_for_step_pip477_checking_finds_the_explorers_findings_with_their_lengths(case):
    """Each finding's property, and each mutant's, is broken first at the explorer's length (so those step
    formulas can fail). For the two of ``PIP477_NIGHTLY``, CI checks only that the explorer's run is one of the
    encoding's (an invariant's). Nightly also: every property the explorer reports at those bounds."""
    variant, preset, prop = case
    if case in PIP477_NIGHTLY and not NIGHTLY:
        if prop in z477.Pip477Steps.invariants:  # the explorer's run is one of the encoding's, and ends there
            run = [z477.Pip477Steps.label(a) for a in violated("pip-477", variant, preset)[prop].actions]
            steps = z477.encoding(variant, preset)
            assert steps.run_of(len(run), prop, labels=run) == run
            assert steps.run_of(len(run), prop, labels=run[:-1] + ["register"]) is None
        return
    explorer = explorer_lengths("pip-477", variant, preset)
    props = set(explorer) & set(z477.Pip477Steps.properties) if NIGHTLY else {prop}
    lengths = z477_lengths(variant, preset, props, max(explorer[p] for p in props))
    assert lengths == {p: explorer[p] for p in props}, (variant, preset)


@pytest.mark.skipif(not NIGHTLY, reason="the whole verdicts take minutes: nightly")
def test_the_pip477_step_obligations_have_the_explorers_lengths():
    assert_obligations_have_the_explorers_lengths("pip-477", {p: (vs, None) for p, vs in z477.CASES.items()})


# the two of these checks that take over a minute each; the other findings are checked so in CI
PIP477_RUN_NIGHTLY = {"cursor-position-rewound-after-promote", "lagging-broker-stalls-after-close-client"}


@pytest.mark.parametrize("name", [f.name for f in _pip477_step_findings()
                                  if NIGHTLY or f.name not in PIP477_RUN_NIGHTLY])
def test_each_pip477_finding_is_a_run_of_the_steps(name):
    """A finding outside ``PIP477_CI`` whose run has up to ``z477.SHORTEST_UP_TO`` steps is broken first at its
    length; for a longer one, one query finds a run of the explorer's length (the obligation's whole search:
    nightly)."""
    f = next(f for f in _pip477_step_findings() if f.name == name)
    if f.length <= z477.SHORTEST_UP_TO:
        assert shortest(f)[1].length == f.length
        assert z477_lengths("as-written", f.bounds, {f.property}, f.length) == {f.property: f.length}
        return
    assert z477.LONG[f.bounds] == (f.property, f.length)
    explorer = [z477.Pip477Steps.label(a) for a in shortest(f)[1].actions]
    assert len(explorer) == f.length
    steps = z477.encoding("as-written", f.bounds)
    assert steps.run_of(f.length, f.property, labels=explorer) == explorer
    assert steps.run_of(f.length, f.property, labels=explorer[:-1] + ["register"]) is None
    if NIGHTLY:
        verdict = verdict_of("pip-477", f"steps-run-{f.bounds}", ("as-written",))
        assert verdict_lengths(verdict) == {f.property: f.length}


@settings(max_examples=SAMPLED_STATES, deadline=None)
@given(st.sampled_from([(v, p) for v in ("as-written", "all-fixes") for p in z477.PRESETS] +
                       [("mutant:every-broker-orchestrates", "default"), ("mutant:blind-schema-promote", "schema")] +
                       [(v, "cleanup") for v in ("fallback-to-source-cluster", "recover-from-directive",
                                                 "promote-built-only", "promote-cursor-at-copied-lac",
                                                 "single-cas-status-flip", "fence-old-idgen",
                                                 "close-after-data-expires", "reserved-keys-rejected",
                                                 "mutant:stamp-after-create", "mutant:promote-resets-hash")] +
                       [("rollback-only-to-readable-old", "rollback-old-down")]),
       st.integers(0, 10**9))
def test_step_formulas_agree_with_the_pip477_model(case, pick):
    assert disagreements_at(z477, "pip-477", case, pick) == []


def test_a_drifted_pip477_step_encoding_is_caught():
    model, states = explored("pip-477", "as-written", "cursor")
    steps = z477.Pip477Steps(model.config)
    # BUILD that copies the ledger under its id but drops its last entry
    drifted = drifted_step(steps, "build(0,cursor,2)", lambda v, changes: {**changes, "n2_2": changes["n2_2"] - 1})
    pairs = [(s, a, t) for s in states for a, t in model.successors(s) if steps.label(a) == "build(0,cursor,2)"]
    assert pairs and steps.disagreements(model, pairs[:5], drifted)
