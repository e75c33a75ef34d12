"""Redis's persistence and listener settings as pion answers them, end to end:
save points (config `save`), FLUSHALL's snapshot with them, INFO's total_forks and
aof_rewrite_in_progress for background snapshots, CONFIG SET port (with its
rollback), the hidden key-load-delay, and KEYS stopped at the output limit."""
import socket
import time

import redis
from conftest import free_port


def _wait(pred, what, secs=20.0):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_bgrewriteaof_counts_as_a_fork_and_reports_its_progress(server):
    r = redis.Redis(port=server.port)
    forks = r.info("stats")["total_forks"]
    info = r.info("persistence")
    assert info["aof_rewrite_in_progress"] == 0 and info["aof_rewrite_scheduled"] == 0
    conn = r.connection_pool.get_connection("MULTI")
    try:
        for cmd in (("MULTI",), ("SET", "foo", "bar"), ("BGREWRITEAOF",)):
            conn.send_command(*cmd)
            conn.read_response()
        conn.send_command("EXEC")
        res = conn.read_response()
    finally:
        r.connection_pool.release(conn)
    assert res[1] == b"Background append only file rewriting scheduled"
    assert r.info("stats")["total_forks"] == forks + 1
    _wait(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0, "the rewrite")
    assert r.info("persistence")["rdb_changes_since_last_save"] == 0
    r.bgsave()
    assert r.info("stats")["total_forks"] == forks + 2
    _wait(lambda: r.info("persistence")["rdb_bgsave_in_progress"] == 0, "the BGSAVE")


def test_save_config_round_trips_and_refuses_bad_points(server):
    r = redis.Redis(port=server.port, decode_responses=True)
    assert r.config_get("save") == {"save": ""}
    assert r.config_set("save", "3600 1 300 100 60 10000")
    assert r.config_get("save") == {"save": "3600 1 300 100 60 10000"}
    for bad in ("3600", "0 1", "x 1", "3600 -1"):
        try:
            r.config_set("save", bad)
            raise AssertionError(f"save {bad!r} accepted")
        except redis.ResponseError as e:
            assert str(e) == ("CONFIG SET failed (possibly related to argument 'save') - "
                              "Invalid save parameters")
    assert r.config_get("save") == {"save": "3600 1 300 100 60 10000"}
    assert r.config_set("save", "")
    assert r.config_get("save") == {"save": ""}


def test_flushall_resets_the_dirty_counter_only_with_save_points(server):
    r = redis.Redis(port=server.port)
    r.set("key", "value")
    r.flushall()
    assert r.info("persistence")["rdb_changes_since_last_save"] > 0
    r.config_set("save", "3600 1 300 100 60 10000")
    r.set("key", "value")
    saves = r.info("persistence")["rdb_saves"]
    r.flushall()
    info = r.info("persistence")
    assert info["rdb_changes_since_last_save"] == 0
    assert info["rdb_saves"] == saves + 1


def test_a_due_save_point_starts_a_background_snapshot(server):
    r = redis.Redis(port=server.port)
    r.execute_command("SAVE")  # the clock and the count start here
    forks = r.info("stats")["total_forks"]
    r.config_set("save", "1 3")
    r.set("a", "1")
    r.set("b", "2")
    r.set("c", "3")
    _wait(lambda: r.info("stats")["total_forks"] > forks, "the save point's snapshot")
    _wait(lambda: r.info("persistence")["rdb_bgsave_in_progress"] == 0, "its end")
    assert r.info("persistence")["rdb_changes_since_last_save"] == 0


def test_config_set_port_moves_the_listener(server):
    r = redis.Redis(port=server.port, decode_responses=True)
    r.set("k", "v")
    new = free_port()
    assert r.config_set("port", str(new))
    assert r.config_get("port") == {"port": str(new)}
    assert r.info("server")["tcp_port"] == new
    assert r.get("k") == "v"  # the connection made before stays
    assert redis.Redis(port=new, decode_responses=True).get("k") == "v"
    try:
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
        refused = False
    except OSError:
        refused = True
    assert refused, "the old port still accepts"


def test_config_set_port_in_use_rolls_everything_back(server):
    r = redis.Redis(port=server.port, decode_responses=True)
    before = {k: r.config_get(k)[k] for k in ("maxmemory", "port", "client-query-buffer-limit")}
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        used = busy.getsockname()[1]
        try:
            r.execute_command("CONFIG", "SET", "maxmemory", "10000001", "port", str(used),
                              "client-query-buffer-limit", "10m")
            raise AssertionError("CONFIG SET of a port in use succeeded")
        except redis.ResponseError as e:
            assert str(e).startswith(
                "CONFIG SET failed (possibly related to argument 'port') - "
                "Unable to listen on this port")
    finally:
        busy.close()
    after = {k: r.config_get(k)[k] for k in before}
    assert after == before
    assert redis.Redis(port=server.port).ping()


def test_hidden_config_answers_only_to_its_name(server):
    r = redis.Redis(port=server.port, decode_responses=True)
    assert "key-load-delay" not in r.config_get("*")
    assert "key-load-delay" not in r.config_get("key-load-*")
    assert r.config_get("key-load-delay") == {"key-load-delay": "0"}
    assert r.config_set("key-load-delay", "100")
    assert r.config_get("KEY-LOAD-DELAY") == {"key-load-delay": "100"}


def test_keys_past_the_output_limit_closes_the_client(server):
    r = redis.Redis(port=server.port)
    r.config_set("client-output-buffer-limit", "normal 100000 0 0")
    prefix = "long-key-name-prefix-of-100-chars-" + "-" * 65
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set(f"{prefix}{i}", "x")
    p.execute()
    before = r.info("stats")["client_output_buffer_limit_disconnections"]
    c = redis.Redis(port=server.port)
    try:
        c.keys("*")
        raise AssertionError("KEYS answered past the output limit")
    except redis.ConnectionError:
        pass
    assert r.info("stats")["client_output_buffer_limit_disconnections"] == before + 1
    # A reply under the limit is sent whole.
    assert len(r.keys(f"{prefix}1*")) == 111
