"""Swarm mode: seeded random walks, reproducible from their seeds, the same on every engine."""
from __future__ import annotations

import json

import pytest

from pulsar_verify import registry
from pulsar_verify.replay import replay
from pulsar_verify.spark_checks.swarm import swarm, walk, walk_seed

from .helpers import cli


def outcome(r) -> tuple:
    return r.total_steps, [(v.prop.id, v.length, r.seeds[v.prop.id]) for v in r.violations]


def test_a_walk_is_reproducible_from_its_seed():
    model = registry.build("pip-473", "as-written")
    seed = walk_seed(7, 3)
    assert walk(model, seed, 40) == walk(registry.build("pip-473", "as-written"), seed, 40)
    assert walk_seed(7, 3) == walk_seed(7, 3) != walk_seed(7, 4)


def test_swarm_finds_what_exhaustive_search_finds_and_its_traces_replay(tmp_path):
    r = cli("swarm", "pip-473", "--walks", "500", "--steps", "40", "--seed", "1", "--out", str(tmp_path), "--json")
    assert r.returncode == 1, r.stderr
    summary = json.loads(r.stdout)
    assert "read-committed" in {v["property"] for v in summary["violations"]}
    for path in summary["trace_files"]:
        assert replay(path).reproduced
        meta = json.loads(open(path).read())["#meta"]
        assert {"walk_seed", "swarm_seed"} <= set(meta["violation"])


def test_a_fixed_variant_survives_the_swarm():
    result = swarm(registry.build("toy-lock", "atomic-acquire"), walks=300, steps=30, seed=0)
    assert not result.violations and result.total_steps > 0


def test_spark_swarm_equals_in_process_swarm():
    pytest.importorskip("pyspark")
    model = registry.build("pip-477", "as-written", preset="cursor")
    local = swarm(model, walks=400, steps=50, seed=11)
    spark = swarm(model, walks=400, steps=50, seed=11, engine="spark", master="local[2]")
    assert outcome(spark) == outcome(local) and local.violations
