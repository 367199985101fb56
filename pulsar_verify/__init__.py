"""pulsar-verify: executable models of Apache Pulsar design proposals, checked exhaustively,
with Hypothesis, with Z3 and on Spark."""
__version__ = "0.1.0"

from .compiled import install as _install_compiled

_install_compiled()  # the compiled modules, where the cache has them for the current source (compiled.py)
