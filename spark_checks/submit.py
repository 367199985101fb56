"""The ``spark-submit`` entry point for nightly jobs: the command line of ``pulsar-verify``, run
in the driver that spark-submit starts, on the master and settings it was given::

    spark-submit --master spark://HOST:7077 spark_checks/submit.py \\
        explore pip-473 --bounds two-txns --engine spark --out /data/nightly/pip-473
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulsar_verify.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
