import os

from pulsar_verify.hypo import load_profile

os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")
load_profile()
