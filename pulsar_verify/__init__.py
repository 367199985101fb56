"""pulsar-verify: executable models of Apache Pulsar design proposals, checked exhaustively,
with Hypothesis, with Z3 and on Spark."""
__version__ = "0.1.0"
