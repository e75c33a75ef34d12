"""The `make bench` harness as a package (bench/run.py is its command line).

harness.py: processes and pinning, the RESP client, the run context, result rows;
suites_*.py: one function per suite returning its rows; report.py: the result files.
The package's RESP codec and free_port come from python/pion (put on sys.path here).
"""
import os
import sys

_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       'python')
if _PYTHON not in sys.path:
    sys.path.insert(0, _PYTHON)
