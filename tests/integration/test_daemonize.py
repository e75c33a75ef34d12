"""daemonize yes: the command returns at once and the server answers from the background."""
from __future__ import annotations

import os
import signal
import subprocess

import redis

from conftest import BIN_DIR, free_port, poll


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_daemonize_detaches_and_serves(tmp_path):
    port = free_port()
    log = tmp_path / "pion.log"
    p = subprocess.run([str(BIN_DIR / "pion-server"), "--daemonize", "yes", "--port", str(port),
                        "--fastlane-port", "0", "--logfile", str(log), "--dir", str(tmp_path)],
                       timeout=30, capture_output=True)
    assert p.returncode == 0, p.stderr
    r = redis.Redis(port=port, socket_timeout=10)

    def ping():
        try:
            return r.ping()
        except redis.ConnectionError:
            return False

    pid = 0
    try:
        assert poll(ping, timeout=30)
        pid = int(r.info("server")["process_id"])
        assert pid != os.getpid()
        assert r.config_get("daemonize") == {"daemonize": "yes"}
        # As Redis: an immutable option.
        try:
            r.config_set("daemonize", "no")
            raise AssertionError("CONFIG SET daemonize no succeeded")
        except redis.ResponseError as e:
            assert str(e) == ("CONFIG SET failed (possibly related to argument 'daemonize') - "
                              "can't set immutable config")
        # The log goes to logfile. Its first line is written by the main thread
        # once the workers already accept (server.Start() then LOG_NOTICE), so
        # the commands above may be answered before it lands: wait for it.
        assert poll(lambda: log.stat().st_size > 0, timeout=30)
    finally:
        if pid:
            os.kill(pid, signal.SIGTERM)
            assert poll(lambda: _gone(pid), timeout=30)
