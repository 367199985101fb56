"""Shared test helpers: run the CLI in a fresh interpreter, as a user would."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "pulsar_verify", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, timeout=600)
