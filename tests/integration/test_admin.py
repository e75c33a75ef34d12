"""Connection and admin commands of pion-server (docs/protocol.md "Connection"): AUTH/HELLO flows
with --requirepass, SELECT, QUIT, RESET, CLIENT (including KILL across workers),
COMMAND, CONFIG GET/SET, INFO sections, DBSIZE, FLUSHALL, TIME, --kvcache gating,
SHUTDOWN and signals (exit 0), and the command line itself."""
from __future__ import annotations

import signal
import subprocess
import time

import pytest
import redis

from conftest import BIN_DIR, RawConn, Verbatim, poll


# ---------------------------------------------------------------- AUTH / HELLO

NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."


def test_auth_flow(server_factory, raw_factory):
    s = server_factory(["--requirepass", "s3cret"], kvcache=False)
    c = raw_factory(s)
    assert c.call("PING") == NOAUTH
    assert c.call("ECHO", "x") == NOAUTH
    assert c.call("CLIENT", "ID") == NOAUTH
    # Unknown commands and arity are checked first, as in Redis.
    assert c.call("NOSUCH").startswith("ERR unknown command")
    assert c.call("AUTH", "wrong") == WRONGPASS
    assert c.call("AUTH", "someone", "s3cret") == WRONGPASS
    assert c.call("AUTH", "a", "b", "c") == "ERR syntax error"
    assert c.call("AUTH", "s3cret") == "OK"
    assert c.call("PING") == "PONG"
    # RESET drops the authentication.
    assert c.call("RESET") == "RESET"
    assert c.call("PING") == NOAUTH
    assert c.call("AUTH", "default", "s3cret") == "OK"
    assert c.call("PING") == "PONG"
    # QUIT works before AUTH.
    q = raw_factory(s)
    assert q.call("QUIT") == "OK"
    assert q.at_eof()


def test_hello_auth(server_factory, raw_factory):
    s = server_factory(["--requirepass", "pw"], kvcache=False)
    c = raw_factory(s)
    e = c.call("HELLO", "3")
    assert e.startswith("NOAUTH HELLO must be called with the client already authenticated")
    assert c.call("HELLO", "3", "AUTH", "default", "bad") == WRONGPASS
    h = c.call("HELLO", "3", "AUTH", "default", "pw", "SETNAME", "n1")
    assert isinstance(h, dict) and h["proto"] == 3
    assert c.call("CLIENT", "GETNAME") == b"n1"
    assert c.call("PING") == "PONG"


def test_redis_py_with_password(server_factory):
    s = server_factory(["--requirepass", "pw"], kvcache=False)
    r = s.client()  # the fixture passes the password
    assert r.ping() is True
    bad = redis.Redis(port=s.port, socket_timeout=10)
    with pytest.raises(redis.AuthenticationError):
        bad.ping()
    with pytest.raises((redis.AuthenticationError, redis.ResponseError), match="WRONGPASS"):
        redis.Redis(port=s.port, password="nope", socket_timeout=10).ping()


def test_auth_without_password_configured(server, raw_factory):
    c = raw_factory(server)
    # Redis 7.0's text, which redis-py maps to AuthenticationError.
    assert c.call("AUTH", "x") == ("ERR AUTH <password> called without any password configured "
                                   "for the default user. Are you sure your configuration is "
                                   "correct?")
    assert c.call("AUTH", "default", "anything") == "OK"
    assert c.call("AUTH", "other", "anything") == WRONGPASS


# ---------------------------------------------------------------- small commands

def test_select_quit_time(server, raw_factory):
    c = raw_factory(server)
    assert c.call("SELECT", "0") == "OK"
    assert c.call("SELECT", "1") == "ERR DB index is out of range"
    assert c.call("SELECT", "x") == "ERR value is not an integer or out of range"
    t = c.call("TIME")
    assert abs(int(t[0]) - time.time()) < 60 and 0 <= int(t[1]) < 1_000_000
    assert c.call("QUIT") == "OK"
    assert c.at_eof()


def test_dbsize_flushall(server_factory, raw_factory):
    for kv in (True, False):
        s = server_factory(kvcache=kv, sub="kv" if kv else "plain")
        c = raw_factory(s)
        assert c.call("DBSIZE") == 0
        assert c.call("FLUSHALL") == "OK"
        assert c.call("FLUSHALL", "ASYNC") == "OK"
        assert c.call("FLUSHALL", "SYNC") == "OK"
        assert c.call("FLUSHALL", "NOW") == "ERR syntax error"


def test_kvcache_gating(server_factory, raw_factory):
    s = server_factory(kvcache=False)
    c = raw_factory(s)
    assert c.call("KV.PREFIX.LOOKUP", "ns") == "NOKVCACHE V-store not enabled (use --kvcache)"
    assert c.call("kv.prefix.lookup", "ns") == "NOKVCACHE V-store not enabled (use --kvcache)"
    assert c.call("PING") == "PONG"


# ---------------------------------------------------------------- CLIENT

def test_client_basics(server, raw_factory):
    c = raw_factory(server)
    cid = c.call("CLIENT", "ID")
    assert isinstance(cid, int) and cid > 0
    assert c.call("CLIENT", "GETNAME") is None
    assert c.call("CLIENT", "SETNAME", "worker-a") == "OK"
    assert c.call("CLIENT", "GETNAME") == b"worker-a"
    assert c.call("CLIENT", "SETNAME", "bad name") == (
        "ERR Client names cannot contain spaces, newlines or special characters.")
    info = c.call("CLIENT", "INFO").decode()
    assert info.startswith(f"id={cid} ") and "name=worker-a" in info and "cmd=client" in info
    assert c.call("CLIENT", "BOGUS") == "ERR unknown subcommand 'BOGUS'. Try CLIENT HELP."
    assert c.call("CLIENT", "ID", "x") == "ERR wrong number of arguments for 'client|id' command"
    assert c.call("CLIENT", "NO-EVICT", "on") == "OK"
    assert isinstance(c.call("CLIENT", "HELP"), list)
    lst = c.call("CLIENT", "LIST").decode()
    assert f"id={cid} " in lst and "name=worker-a" in lst
    assert c.call("CLIENT", "LIST", "ID", str(cid)).decode().count("\n") == 1
    assert c.call("CLIENT", "LIST", "TYPE", "pubsub") == b""


def test_client_list_redis_py(server):
    r = server.client(client_name="pyclient")
    clients = r.client_list()
    assert any(cl["name"] == "pyclient" for cl in clients)
    assert r.client_getname() == "pyclient"
    assert r.client_id() > 0


def test_client_kill_filters(server, raw_factory):
    admin = raw_factory(server)
    v1, v2, v3 = raw_factory(server), raw_factory(server), raw_factory(server)
    id1 = v1.call("CLIENT", "ID")
    addr2 = v2.call("CLIENT", "INFO").decode().split()[1].split("=", 1)[1]
    assert admin.call("CLIENT", "KILL", "ID", str(id1)) == 1
    assert v1.at_eof()
    assert admin.call("CLIENT", "KILL", "ADDR", addr2) == 1
    assert v2.at_eof()
    assert admin.call("CLIENT", "KILL", "ID", "999999") == 0
    assert admin.call("CLIENT", "KILL", "1.2.3.4:5") == "ERR No such client"
    assert admin.call("CLIENT", "KILL", "ID", "0") == "ERR client-id should be greater than 0"
    assert admin.call("CLIENT", "KILL", "ID") == "ERR No such client"  # old form: an address
    assert admin.call("CLIENT", "KILL", "ID", "1", "SKIPME") == "ERR syntax error"
    # SKIPME yes (default) spares the caller.
    me = admin.call("CLIENT", "ID")
    assert admin.call("CLIENT", "KILL", "ID", str(me)) == 0
    assert v3.call("PING") == "PONG"
    # SKIPME no: the caller gets its reply, then is closed.
    assert admin.call("CLIENT", "KILL", "ID", str(me), "SKIPME", "no") == 1
    assert admin.at_eof()
    assert v3.call("PING") == "PONG"


@pytest.mark.concurrency
def test_client_kill_across_workers(server_factory, raw_factory):
    s = server_factory(["-w", "4"], kvcache=False)
    admin = raw_factory(s)
    victims = [raw_factory(s) for _ in range(8)]
    ids = [v.call("CLIENT", "ID") for v in victims]
    lst = admin.call("CLIENT", "LIST").decode()
    worker_of = {}
    for line in lst.splitlines():
        f = dict(kv.split("=", 1) for kv in line.split())
        worker_of[int(f["id"])] = int(f["worker"])
    assert len({worker_of[i] for i in ids}) == 4  # spread over every worker
    for v, i in zip(victims, ids):
        assert admin.call("CLIENT", "KILL", "ID", str(i)) == 1
        # Gone for every later command at once, as Redis frees it, even while its
        # own worker has yet to close it.
        assert ("id=%d " % i) not in admin.call("CLIENT", "LIST").decode()
        assert admin.call("CLIENT", "KILL", "ID", str(i)) == 0
        assert v.at_eof()
    assert admin.call("PING") == "PONG"
    assert poll(lambda: admin.call("INFO", "clients").count(b"connected_clients:1\r\n") == 1)


# ---------------------------------------------------------------- COMMAND

def test_command(server, raw_factory):
    c = raw_factory(server)
    n = c.call("COMMAND", "COUNT")
    assert n >= 15
    allc = c.call("COMMAND")
    assert len(allc) == n
    names = {e[0] for e in allc}
    for want in (b"ping", b"hello", b"info", b"config", b"client", b"kv.prefix.lookup"):
        assert want in names
    ping = c.call("COMMAND", "INFO", "ping", "nosuch")
    assert ping[1] is None
    p = ping[0]
    assert p[0] == b"ping" and p[1] == -1 and "fast" in p[2] and len(p) == 10
    docs = c.call("COMMAND", "DOCS", "echo")
    assert docs[0] == b"echo" and b"summary" in docs[1]
    listed = c.call("COMMAND", "LIST")  # with subcommands ("client|list"), as Redis 7
    assert len([x for x in listed if b"|" not in x]) == n and b"client|list" in listed
    assert c.call("COMMAND", "NOPE") == "ERR unknown subcommand 'NOPE'. Try COMMAND HELP."


def test_command_redis_py(r):
    cmds = r.command()
    assert "ping" in cmds and cmds["echo"]["arity"] == 2
    assert r.command_count() == len(cmds)


# ---------------------------------------------------------------- CONFIG

def test_config_get(server, raw_factory):
    c = raw_factory(server)
    assert c.call("CONFIG", "GET", "port") == [b"port", str(server.port).encode()]
    assert c.call("CONFIG", "GET", "nosuch") == []
    got = c.call("CONFIG", "GET", "max*")
    m = dict(zip(got[0::2], got[1::2]))
    assert m[b"maxmemory"] == b"0" and m[b"maxclients"] == b"10000" and b"max-sessions" in m
    got = c.call("CONFIG", "GET", "port", "bind", "PORT")
    assert got == [b"port", str(server.port).encode(), b"bind", b"127.0.0.1"]
    allc = c.call("CONFIG", "GET", "*")
    keys = set(allc[0::2])
    for k in (b"dir", b"kvcache", b"appendfsync", b"timeout", b"proto-max-bulk-len",
              b"client-output-buffer-limit", b"save", b"appendonly"):
        assert k in keys
    c.call("HELLO", "3")
    assert c.call("CONFIG", "GET", "timeout") == {"timeout": b"0"}


def test_config_set(server, raw_factory):
    c = raw_factory(server)
    assert c.call("CONFIG", "SET", "maxmemory", "100mb") == "OK"
    assert c.call("CONFIG", "GET", "maxmemory") == [b"maxmemory", str(100 << 20).encode()]
    info = c.call("INFO", "memory").decode()
    assert f"maxmemory:{100 << 20}" in info
    assert c.call("CONFIG", "SET", "loglevel", "warning", "timeout", "100") == "OK"
    assert c.call("CONFIG", "GET", "loglevel") == [b"loglevel", b"warning"]
    assert c.call("CONFIG", "SET", "appendfsync", "always") == "OK"
    assert c.call("CONFIG", "SET", "appendfsync", "everysec") == "OK"
    assert c.call("CONFIG", "SET", "maxclients", "500") == "OK"
    assert c.call("CONFIG", "SET", "client-output-buffer-limit", "64mb") == "OK"
    assert c.call("CONFIG", "SET", "bind", "0.0.0.0") == (
        "ERR CONFIG SET failed (possibly related to argument 'bind') - can't set immutable config")
    assert c.call("CONFIG", "SET", "nosuch", "1") == (
        "ERR Unknown option or number of args for CONFIG SET - 'nosuch'")
    e = c.call("CONFIG", "SET", "maxmemory", "lots")
    assert e.startswith("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - ")
    # All or nothing: a bad pair applies none.
    assert c.call("CONFIG", "SET", "timeout", "7", "loglevel", "loud").startswith("ERR")
    assert c.call("CONFIG", "GET", "timeout") == [b"timeout", b"100"]
    assert c.call("CONFIG", "SET", "timeout", "1", "timeout", "2").endswith("duplicate parameter")
    assert c.call("CONFIG", "SET", "timeout") == (
        "ERR wrong number of arguments for 'config|set' command")
    assert c.call("CONFIG", "RESETSTAT") == "OK"
    assert c.call("CONFIG", "NOPE") == "ERR unknown subcommand 'NOPE'. Try CONFIG HELP."
    assert c.call("CONFIG", "SET", "loglevel", "notice") == "OK"


def test_config_set_maxclients_applies(server_factory, raw_factory):
    s = server_factory(kvcache=False)
    c = raw_factory(s)
    # The fixture's readiness connection may still be closing on the server side:
    # wait (with a deadline) until this is the only client before lowering the cap.
    deadline = time.monotonic() + 30
    while len([l for l in c.call("CLIENT", "LIST").splitlines() if l.strip()]) > 1:
        assert time.monotonic() < deadline, "other clients never went away"
        time.sleep(0.01)
    assert c.call("CONFIG", "SET", "maxclients", "2") == "OK"
    second = raw_factory(s)
    assert second.call("PING") == "PONG"
    third = raw_factory(s)
    assert third.read() == "ERR max number of clients reached"


# ---------------------------------------------------------------- INFO

def parse_info(text: bytes) -> dict[str, dict[str, str]]:
    sections: dict[str, dict[str, str]] = {}
    cur = None
    for line in text.decode().split("\r\n"):
        if line.startswith("# "):
            cur = sections.setdefault(line[2:].lower(), {})
        elif line and cur is not None:
            k, v = line.split(":", 1)
            cur[k] = v
    return sections


def test_info_sections(server, raw_factory):
    c = raw_factory(server)
    full = parse_info(c.call("INFO"))
    assert set(full) >= {"server", "clients", "memory", "persistence", "stats", "pion"}
    srv = full["server"]
    assert srv["redis_version"] == "7.0.0"
    assert srv["tcp_port"] == str(server.port)
    assert srv["pion_version"].startswith("0.1.0+")
    assert int(srv["process_id"]) == server.proc.pid
    assert int(srv["uptime_in_seconds"]) >= 0
    assert int(full["clients"]["connected_clients"]) >= 1
    assert int(full["memory"]["used_memory"]) >= 0  # bytes charged against maxmemory
    assert int(full["memory"]["allocator_allocated"]) > 0  # allocator bytes (mallinfo2)
    assert int(full["memory"]["used_memory_rss"]) > 1 << 20
    assert full["persistence"]["loading"] == "0"
    pion = full["pion"]
    assert pion["stats_scope"] == "server"
    for k in ("kvprefix_hits", "kvprefix_misses", "kvprefix_tokens_served",
              "prefill_seconds_avoided", "prefill_seconds_avoided_measured", "vector_queries"):
        assert k in pion
    assert "keyspace" not in full or full["keyspace"] == {}  # empty: no db0 line
    only = parse_info(c.call("INFO", "server"))
    assert list(only) == ["server"]
    two = parse_info(c.call("INFO", "CLIENTS", "stats"))
    assert list(two) == ["clients", "stats"]
    assert int(two["stats"]["total_commands_processed"]) >= 3
    # default leaves commandstats and latencystats out (Redis); all and everything have them.
    assert "commandstats" not in full and "latencystats" not in full
    every = list(parse_info(c.call("INFO", "everything")))
    assert [x for x in every if x not in ("commandstats", "latencystats")] == list(full)
    assert "commandstats" in every and "latencystats" in every
    assert list(parse_info(c.call("INFO", "all"))) == every
    assert c.call("INFO", "nosuchsection") == b""


def test_info_keyspace_counts_namespaces(server, raw_factory):
    c = raw_factory(server)
    assert c.call("KV.PREFIX.REGISTER", "ns1", "KV_DIM", "64") == "OK" or True
    n = c.call("DBSIZE")
    ks = parse_info(c.call("INFO", "keyspace")).get("keyspace", {})
    if n:
        assert ks["db0"].startswith(f"keys={n},expires=0")
    else:
        assert "db0" not in ks


def test_info_redis_py_and_resp3(server, raw_factory, r):
    info = r.info()
    assert info["redis_version"] == "7.0.0" and info["tcp_port"] == server.port
    assert r.info("persistence")["loading"] == 0
    c = raw_factory(server)
    c.call("HELLO", "3")
    v = c.call("INFO", "pion")
    assert isinstance(v, Verbatim) and v.startswith(b"# Pion\r\n")


# ---------------------------------------------------------------- shutdown and signals

def test_shutdown_command_exit_0(server_factory, raw_factory):
    s = server_factory(kvcache=False)
    c = raw_factory(s)
    assert c.call("SHUTDOWN", "ABORT") == "ERR No shutdown in progress."
    assert c.call("SHUTDOWN", "BOGUS") == "ERR syntax error"
    assert c.call("SHUTDOWN", "SAVE", "NOSAVE") == "ERR syntax error"
    other = raw_factory(s)
    assert other.call("PING") == "PONG"
    c.send(RawConn.encode("SHUTDOWN", "NOSAVE"))
    assert s.proc.wait(30) == 0
    assert c.at_eof() and other.at_eof()
    assert "ready to exit" in s.log()


def test_shutdown_redis_py(server_factory):
    s = server_factory(kvcache=False)
    r = s.client()
    r.shutdown()  # redis-py expects the connection to drop, and raises otherwise
    assert s.proc.wait(30) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_exit_0(server_factory, raw_factory, sig):
    s = server_factory(["-w", "2"])
    c = raw_factory(s)
    assert c.call("PING") == "PONG"
    assert s.stop(sig) == 0
    assert c.at_eof()


def test_shutdown_finishes_queued_replies(server_factory, raw_factory):
    """In-flight replies are sent before the connection closes at shutdown."""
    s = server_factory(kvcache=False)
    c = raw_factory(s)
    big = b"q" * (8 << 20)
    c.send(RawConn.encode("ECHO", big))
    # Wait until the command ran (its reply is queued or being sent).
    poll(lambda: b"total_commands_processed:" in s.client().execute_command("INFO", "stats")
         and int(parse_info(s.client().execute_command("INFO", "stats"))["stats"]
                 ["total_commands_processed"]) >= 2)
    s.proc.send_signal(signal.SIGTERM)
    assert c.read() == big
    assert s.proc.wait(30) == 0


# ---------------------------------------------------------------- command line

def run_server(*args, timeout=30):
    return subprocess.run([str(BIN_DIR / "pion-server"), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_help_version_and_bad_flags(tmp_path):
    out = run_server("--help")
    assert out.returncode == 0 and "--maxmemory" in out.stdout
    out = run_server("--version")
    assert out.returncode == 0 and "0.1.0" in out.stdout
    out = run_server("--maxmemory", "lots")
    assert out.returncode == 1 and "maxmemory" in out.stderr and "lots" in out.stderr
    out = run_server("--bogus")
    assert out.returncode == 1 and "--bogus" in out.stderr
    out = run_server("-w", "100")
    assert out.returncode == 1 and "workers" in out.stderr
    out = run_server(str(tmp_path / "missing.conf"))
    assert out.returncode == 1 and "missing.conf" in out.stderr


def test_config_file(server_factory, tmp_path, raw_factory):
    conf = tmp_path / "test.conf"
    conf.write_text("# test config\nmaxclients 77\ntimeout 55\nloglevel verbose\n")
    s = server_factory([], kvcache=False, start=False)
    s.args = [str(conf)]  # the file must come first
    binary, rest = s.cmdline()[0], s.cmdline()[1:]
    s.cmdline = lambda: [binary, str(conf), *rest[:-1]]
    s.start()
    c = raw_factory(s)
    assert c.call("CONFIG", "GET", "maxclients") == [b"maxclients", b"77"]
    assert c.call("CONFIG", "GET", "timeout") == [b"timeout", b"55"]
    assert parse_info(c.call("INFO", "server"))["server"]["config_file"] == str(conf)


def test_dir_is_created(server_factory, tmp_path, raw_factory):
    d = tmp_path / "a" / "b" / "c"
    s = server_factory(kvcache=False, start=False)
    s.dir.mkdir(parents=True, exist_ok=True)
    s.args = ["--dir", str(d)]
    s.start()
    assert d.is_dir()
    assert raw_factory(s).call("CONFIG", "GET", "dir") == [b"dir", str(d).encode()]


def test_repo_pion_conf_is_valid_and_complete(server_factory, raw_factory):
    """pion.conf at the repository root loads, and documents every setting."""
    from conftest import ROOT
    conf = ROOT / "pion.conf"
    s = server_factory(kvcache=False, start=False)
    binary, rest = s.cmdline()[0], s.cmdline()[1:]
    s.cmdline = lambda: [binary, str(conf), *rest]
    s.start()
    c = raw_factory(s)
    got = c.call("CONFIG", "GET", "*")
    # Read-only names answered for Redis tools (not settings).
    names = {k.decode() for k in got[0::2]} - {"save", "databases", "replicaof", "slaveof"}
    text = conf.read_text()
    documented = {line.split()[0] for line in text.splitlines()
                  if line and not line.startswith("#")}
    assert names <= documented, names - documented
