"""Shared test helpers: run the CLI in a fresh interpreter, as a user would; cached explorations."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

from pulsar_verify import registry
from pulsar_verify.explorer import explore

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = os.environ.get("HYPOTHESIS_PROFILE") == "nightly"  # tox -e nightly (conftest.py defaults it to ci)


def cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "pulsar_verify", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, timeout=600)


@lru_cache(maxsize=None)
def explored(model: str, variant: str, preset: str):
    """The exploration result of one model variant at a named bound set, computed once per test session."""
    result, _ = explore(registry.build(model, variant, preset=preset))
    return result


def violated(model: str, variant: str, preset: str) -> dict:
    return {v.prop.id: v for v in explored(model, variant, preset).violations}


def assert_finding_found_and_fixed(finding) -> None:
    """The finding's property is violated by the model's baseline at the finding's bounds, at its length;
    its explanation names the property and the fix; its trace reproduces, and neither its fix nor every
    fix together allows it."""
    from pulsar_verify.replay import replay
    v = violated(finding.model, registry.model_class(finding.model).baseline(), finding.bounds)[finding.property]
    assert v.length == finding.length
    text = finding.explanation.read_text()
    assert finding.property in text and finding.fix in text and "## What users see" in text
    assert replay(finding.trace).reproduced
    assert not replay(finding.trace, finding.fix).reproduced
    assert not replay(finding.trace, "all-fixes").reproduced


def free_port() -> int:
    """A TCP port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, what: str, seconds: float = 120) -> None:
    """Poll ``predicate`` (an OSError or ValueError counts as not yet) until true, or fail the test."""
    import pytest
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")
