"""Where each model lives. Models are imported lazily so ``list`` and errors stay fast."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

from .model import Model, UsageError

REPO_ROOT = Path(__file__).resolve().parent.parent

MODELS: dict[str, str] = {
    "pip-473": "invariants.pip473:Pip473",
    "v4-txn": "invariants.v4txn:V4Txn",
    "pip-373": "invariants.pip373:Pip373",
    "pip-468": "invariants.pip468:Pip468",
    "pip-477": "invariants.pip477:Pip477",
    "toy-lock": "tests.toy_lock:LockModel",
}


def model_class(name: str) -> type[Model]:
    try:
        target = MODELS[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r} (known: {', '.join(MODELS)})") from None
    module, _, attr = target.partition(":")
    if module.startswith("tests.") and str(REPO_ROOT) not in sys.path and (REPO_ROOT / "tests").is_dir():
        sys.path.insert(0, str(REPO_ROOT))  # the kernel's own test model lives in tests/
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise UsageError(f"model {name!r} cannot be loaded from {module}: {exc}") from None


def build(name: str, variant: str = "as-written", overrides: dict[str, str] | None = None,
          values: dict | None = None, preset: str = "default") -> Model:
    cls = model_class(name)
    return cls(cls.make_config(variant, overrides, values, preset))


def all_models() -> list[type[Model]]:
    return [model_class(n) for n in MODELS]
