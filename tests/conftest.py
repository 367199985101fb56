import os

# the tests run the models from source whatever the compiled cache holds; tests/test_compiled.py compiles
os.environ.setdefault("PULSAR_VERIFY_COMPILED", "0")

from pulsar_verify.hypo import load_profile  # noqa: E402

os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")
load_profile()
