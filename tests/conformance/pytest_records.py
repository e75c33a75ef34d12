"""pytest plugin of the conformance run: one line per test phase, as it happens.

Loaded with `-p pytest_records` (tests/conformance on PYTHONPATH); writes to the file
named by $PION_CONFORMANCE_RESULTS. Lines are `start<TAB>nodeid` when a test begins and
`<outcome><TAB>nodeid<TAB>message` when it ends (passed, failed, error, skipped, xfailed,
xpassed; the message is the failure's last line),
so a run cut short by a hang still leaves every finished test and the one in progress.
"""

import os

_path = os.environ.get("PION_CONFORMANCE_RESULTS")
_outcome = {}


_message = {}


def _write(status, nodeid, msg=""):
    if not _path:
        return
    msg = " ".join(msg.split())[:300]
    with open(_path, "a") as f:
        f.write(f"{status}\t{nodeid}\t{msg}\n")


def pytest_runtest_logstart(nodeid, location):
    _outcome[nodeid] = None
    _write("start", nodeid)


def pytest_runtest_logreport(report):
    cur = _outcome.get(report.nodeid)
    if report.when == "setup":
        if report.failed:
            cur = "error"
        elif report.skipped:
            cur = "xfailed" if hasattr(report, "wasxfail") else "skipped"
    elif report.when == "call":
        if hasattr(report, "wasxfail"):
            cur = "xfailed" if report.skipped else "xpassed"
        elif report.passed:
            cur = "passed"
        elif report.failed:
            cur = "failed"
        elif report.skipped:
            cur = "skipped"
    elif report.when == "teardown" and report.failed and cur in (None, "passed"):
        cur = "error"
    _outcome[report.nodeid] = cur
    if report.failed and report.nodeid not in _message:
        lines = [l for l in str(report.longrepr).splitlines() if l.strip()]
        _message[report.nodeid] = lines[-1] if lines else ""


def pytest_runtest_logfinish(nodeid, location):
    _write(_outcome.pop(nodeid, None) or "error", nodeid, _message.pop(nodeid, ""))
