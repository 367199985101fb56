"""The ``spark-submit`` entry point for nightly jobs: the command line of ``pulsar-verify``, run
in the driver that spark-submit starts, on the master and settings it was given. The file is
part of the installed package::

    spark-submit --master spark://HOST:7077 \
        "$(python -c 'import pulsar_verify.spark_checks.submit as m; print(m.__file__)')" \
        explore pip-473 --bounds two-txns --engine spark --out /data/nightly/pip-473
"""
import sys

from pulsar_verify.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
