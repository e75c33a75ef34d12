"""What monitoring tools read (docs/operations.md): INFO sections as redis-py
parses them, commandstats/errorstats, CLIENT LIST/SETINFO/REPLY, COMMAND DOCS/GETKEYS/LIST,
redis-cli's argument hints, MONITOR, SLOWLOG, LATENCY, CONFIG SET compatibility, the
Prometheus /metrics endpoint scraped by a real Prometheus server, and
prometheus-redis-exporter reading INFO.

Run: PION_BIN_DIR=build/<preset>/bin /usr/bin/python3 -m pytest -q tests/integration/test_observability.py
"""
from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import termios
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import redis.exceptions as rex

from conftest import RawConn, RawError, free_port, poll


# ---------------------------------------------------------------- INFO


SECTIONS = {
    "server": ["redis_version", "process_id", "run_id", "tcp_port", "uptime_in_seconds"],
    "clients": ["connected_clients", "maxclients"],
    "memory": ["used_memory", "used_memory_rss", "used_memory_peak", "mem_fragmentation_ratio",
               "maxmemory"],
    "persistence": ["loading"],
    "stats": ["total_commands_processed", "instantaneous_ops_per_sec", "total_net_input_bytes",
              "total_net_output_bytes", "total_error_replies"],
    "replication": ["role", "connected_slaves", "master_replid", "master_repl_offset"],
    "cpu": ["used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"],
    "pion": ["kvprefix_hits", "stats_scope"],
    "cluster": ["cluster_enabled"],
}


def test_every_info_section_parses_with_redis_py(r):
    r.execute_command("KV.PREFIX.REGISTER", "ns", 64, "int8")  # a keyspace line
    for section, fields in SECTIONS.items():
        got = r.info(section)
        for f in fields:
            assert f in got, (section, f, got)
    assert r.info("replication")["role"] == "master"
    assert r.info("replication")["connected_slaves"] == 0
    replid = r.info("replication")["master_replid"]
    assert re.fullmatch(r"[0-9a-f]{40}", replid)
    cpu = r.info("cpu")
    assert all(isinstance(cpu[k], float) for k in SECTIONS["cpu"])
    mem = r.info("memory")
    assert 0 <= mem["used_memory"] <= mem["used_memory_peak"]
    assert 0 < mem["allocator_allocated"] <= mem["allocator_peak"]
    assert mem["used_memory_rss"] > 0
    assert isinstance(mem["mem_fragmentation_ratio"], float)
    r.info("commandstats")
    r.info("errorstats")
    assert "db0" in r.info("keyspace")
    # all / everything: every section, commandstats included; default leaves it out.
    r.echo("x")
    everything = r.info("everything")
    for key in (f for fs in SECTIONS.values() for f in fs):
        assert key in everything, key
    assert "cmdstat_echo" in everything and "cmdstat_echo" in r.info("all")
    assert "cmdstat_echo" not in r.info() and "cmdstat_echo" not in r.info("default")
    # Several sections at once.
    both = r.execute_command("INFO", "cpu", "replication")  # parsed by redis-py's info parser
    assert "used_cpu_sys" in both and "master_replid" in both and "redis_version" not in both
    assert r.info("replication")["master_replid"] == replid  # stable while it runs


def test_replid_differs_per_start(server_factory):
    a = server_factory(sub="a").client().info("replication")["master_replid"]
    b = server_factory(sub="b").client().info("replication")["master_replid"]
    assert a != b


def errorstat(r, code):
    """errorstat_<code>:count=N as redis-py parses it (a bare "count=N" string: no comma)."""
    v = r.info("errorstats").get(f"errorstat_{code}")
    if v is None:
        return 0
    return v["count"] if isinstance(v, dict) else int(v.split("=")[1])


def test_commandstats_and_errorstats_count(r):
    r.config_resetstat()
    for _ in range(3):
        r.echo("hi")
    with pytest.raises(rex.ResponseError):
        r.execute_command("ECHO")  # arity: rejected before it ran
    with pytest.raises(rex.ResponseError):
        r.execute_command("SELECT", 5)  # ran and failed
    with pytest.raises(rex.ResponseError):
        r.execute_command("NOSUCHCMD")
    r.client_list()
    cs = r.info("commandstats")
    echo = cs["cmdstat_echo"]
    assert echo["calls"] == 3 and echo["rejected_calls"] == 1 and echo["failed_calls"] == 0
    assert echo["usec"] >= 0 and "usec_per_call" in echo
    sel = cs["cmdstat_select"]
    assert sel["calls"] == 1 and sel["failed_calls"] == 1
    assert cs["cmdstat_client|list"]["calls"] == 1  # per subcommand, as Redis
    assert errorstat(r, "ERR") == 3  # arity, DB index, unknown command
    assert r.info("stats")["total_error_replies"] == 3
    r.config_resetstat()
    assert "cmdstat_echo" not in r.info("commandstats")
    assert r.info("errorstats") == {}


def test_instantaneous_ops_per_sec_is_sampled(r):
    # The cron samples every 100 ms: under a steady stream the rate becomes nonzero.
    def busy():
        for _ in range(200):
            r.ping()
        return r.info("stats")["instantaneous_ops_per_sec"] > 0
    assert poll(busy, timeout=30)


# ---------------------------------------------------------------- CLIENT


def test_client_list_fields_and_setinfo(server, raw_factory):
    c = raw_factory(server)
    assert c.call("CLIENT", "SETINFO", "LIB-NAME", "mylib") == "OK"
    assert c.call("CLIENT", "SETINFO", "lib-ver", "1.2.3") == "OK"
    assert isinstance(c.call("CLIENT", "SETINFO", "lib-name", "has space"), RawError)
    assert isinstance(c.call("CLIENT", "SETINFO", "colour", "x"), RawError)
    line = c.call("CLIENT", "LIST").decode()
    f = dict(kv.split("=", 1) for kv in line.split())
    assert f["cmd"] == "client|list"
    assert f["lib-name"] == "mylib" and f["lib-ver"] == "1.2.3"
    for k in ("qbuf", "qbuf-free", "omem", "tot-mem"):
        assert int(f[k]) >= 0
    c.call("ECHO", "x")
    other = raw_factory(server)
    lines = other.call("CLIENT", "LIST").decode().splitlines()
    mine = [l for l in lines if "lib-name=mylib" in l]
    assert len(mine) == 1 and " cmd=echo " in mine[0]
    # Real buffers: a client whose reply is queued unread shows omem/tot-mem.
    assert c.call("CLIENT", "NO-EVICT", "on") == "OK"
    assert c.call("CLIENT", "NO-TOUCH", "off") == "OK"
    assert isinstance(c.call("CLIENT", "NO-EVICT", "maybe"), RawError)


def test_client_list_shows_held_output(server, raw_factory):
    # A client that does not read: its unsent reply is its omem.
    r = server.client()
    big = b"x" * (32 << 20)  # more than the socket buffers take
    slow = raw_factory(server)
    slow.send(RawConn.encode("CLIENT", "SETNAME", "slow") + RawConn.encode("ECHO", big))

    def omem():
        for line in r.client_list():
            if line["name"] == "slow" and int(line["omem"]) > 0:
                return int(line["omem"]), int(line["tot-mem"])
        return None
    got = poll(omem)
    assert got and got[0] > 0 and got[1] >= 0
    assert slow.read() == "OK"
    assert slow.read() == big


def test_idle_client_query_buffer_is_released(server, raw_factory):
    """As Redis: an active client keeps its 16 KiB query buffer (CLIENT LIST qbuf-free);
    after 2 s without activity the server's cron returns it (qbuf-free 0)."""
    c = raw_factory(server)
    assert c.call("CLIENT", "SETNAME", "qb") == "OK"
    other = raw_factory(server)

    def fields():
        for line in other.call("CLIENT", "LIST").decode().splitlines():
            f = dict(kv.split("=", 1) for kv in line.split())
            if f["name"] == "qb":
                return f
        raise AssertionError("client qb not listed")
    # While it is active (idle < 2 s when listed) it keeps the buffer; a machine
    # slow enough to take 2 s between its command and the listing tries again.
    for _ in range(3):
        assert c.call("PING") == "PONG"
        f = fields()
        if int(f["idle"]) < 2:
            break
    assert int(f["idle"]) < 2, f
    assert 16384 <= int(f["qbuf"]) + int(f["qbuf-free"]) < 32768
    assert poll(lambda: int(fields()["qbuf-free"]) == 0, timeout=10)
    f = fields()
    assert int(f["qbuf"]) == 0 and int(f["idle"]) >= 2
    assert c.call("PING") == "PONG"  # it reads again into a new buffer


def test_client_reply_off_skip_on(server, raw_factory):
    c = raw_factory(server)
    enc = RawConn.encode
    c.send(enc("CLIENT", "REPLY", "SKIP") + enc("PING", "skipped") + enc("PING", "sent"))
    assert c.read() == b"sent"
    c.send(enc("CLIENT", "REPLY", "OFF") + enc("PING", "a") + enc("ECHO", "b") +
           enc("NOSUCH") + enc("CLIENT", "REPLY", "ON") + enc("PING", "c"))
    assert c.read() == "OK"
    assert c.read() == b"c"
    assert isinstance(c.call("CLIENT", "REPLY", "MAYBE"), RawError)
    # The dropped error still counts.
    assert errorstat(server.client(), "ERR") >= 2


# ---------------------------------------------------------------- COMMAND


def test_command_docs_have_arguments_for_every_command(server, raw_factory):
    # Raw RESP3 (maps): the argument trees nest deeper than hiredis' reader allows
    # redis-py, as Redis' own COMMAND DOCS does.
    c = raw_factory(server)
    c.call("HELLO", 3)
    docs = c.call("COMMAND", "DOCS")
    names = {n.decode() for n in c.call("COMMAND", "LIST")}
    assert {"client|list", "slowlog|get", "latency|latest"} <= names
    no_args = {"quit", "reset", "time", "dbsize", "kv.prefix.info", "kv.prefix.commit",
               "role", "lastsave", "monitor", "multi", "exec", "discard", "unwatch",
               "randomkey", "readonly", "readwrite", "save", "bgrewriteaof"}
    assert set(docs) == {n for n in names if "|" not in n}
    for name, d in docs.items():
        assert {"summary", "since", "group"} <= set(d), name
        if name not in no_args:
            assert "arguments" in d or "subcommands" in d, name
    first = docs["kv.prefix.register"]["arguments"][0]
    assert first["name"] == b"namespace" and first["type"] == b"string"
    opt = docs["kv.prefix.register"]["arguments"][3]
    assert opt["type"] == b"block" and set(opt["flags"]) == {"optional"}
    subs = docs["client"]["subcommands"]
    assert {"client|list", "client|reply", "client|setinfo"} <= set(subs)
    reply = subs["client|reply"]["arguments"][0]
    assert reply["type"] == b"oneof"
    assert [a["token"] for a in reply["arguments"]] == [b"ON", b"OFF", b"SKIP"]
    # Named commands only; unknown names are left out.
    one = c.call("COMMAND", "DOCS", "echo", "nosuch")
    assert list(one) == ["echo"]
    assert one["echo"]["arguments"][0]["name"] == b"message"


def test_command_list_filterby_and_getkeys(server, raw_factory):
    # Raw: redis-py parses every COMMAND reply as COMMAND INFO.
    c = raw_factory(server)
    names = {n.decode() for n in c.call("COMMAND", "LIST")}
    assert {"info", "kv.prefix.lookup", "client|list"} <= names
    pat = {n.decode() for n in c.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "kv.prefix.*")}
    assert pat and all(n.startswith("kv.prefix.") for n in pat)
    assert "kv.prefix.register" in pat
    adm = {n.decode() for n in c.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "admin")}
    assert "config" in adm and "echo" not in adm
    assert c.call("COMMAND", "LIST", "FILTERBY", "MODULE", "x") == []
    assert c.call("COMMAND", "LIST", "FILTERBY", "COLOUR", "x") == "ERR syntax error"
    assert c.call("COMMAND", "GETKEYS", "KV.PREFIX.DROP", "a", "b") == [b"a", b"b"]
    kf = c.call("COMMAND", "GETKEYSANDFLAGS", "KV.PREFIX.LOOKUP", "ns")
    assert kf[0][0] == b"ns" and set(kf[0][1]) == {"RO", "access"}
    kf = c.call("COMMAND", "GETKEYSANDFLAGS", "KV.PREFIX.DROP", "ns")
    assert set(kf[0][1]) == {"RW", "access", "update"}  # as its COMMAND INFO key spec
    assert c.call("COMMAND", "GETKEYS", "NOSUCH", "a") == "ERR Invalid command specified"
    assert c.call("COMMAND", "GETKEYS", "PING") == "ERR The command has no key arguments"
    assert c.call("COMMAND", "GETKEYS", "KV.PREFIX.MEMBERSHIP", "a") == \
        "ERR Invalid number of arguments specified for command"


def _redis_cli_session(port, keys: list[bytes], settle=b"> ") -> list[bytes]:
    """Types each of `keys` into an interactive redis-cli (a pty) and returns the screen
    output after each one (what linenoise drew)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm"
        os.execvp("redis-cli", ["redis-cli", "-p", str(port)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))
    outs = []
    try:
        def read_until(pred, timeout=15.0):
            buf = b""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and not pred(buf):
                ready, _, _ = select.select([fd], [], [], 0.05)
                if ready:
                    try:
                        buf += os.read(fd, 65536)
                    except OSError:
                        break
            return buf
        read_until(lambda b: settle in b)
        for k, want in keys:
            os.write(fd, k)
            outs.append(read_until(lambda b, w=want: w in b))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    return outs


def test_redis_cli_argument_hints_from_command_docs(server):
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli is not installed (scripts/deps.sh installs redis-tools)")
    hint = b"namespace [TOKENS n] [PREFILL_MS ms]"
    outs = _redis_cli_session(server.port, [
        (b"KV.PREFIX.LOOKUP ", hint),
        (b"\x15client list ", b"[TYPE NORMAL|MASTER|REPLICA|PUBSUB]"),
        (b"\x15help v.storebatch\r", b"summary:"),
    ])
    assert hint in outs[0], outs[0]
    assert b"[TYPE NORMAL|MASTER|REPLICA|PUBSUB]" in outs[1], outs[1]
    assert b"sid layer start count blob [FMT F32|F16]" in outs[2], outs[2]


# ---------------------------------------------------------------- MONITOR


# Arguments appear as the client sent them (redis-py sends upper-case names).
MONITOR_LINE = re.compile(r'^\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] "ECHO" "from-(\d)"$')


@pytest.mark.concurrency
def test_monitor_sees_every_workers_clients(server_factory, raw_factory):
    s = server_factory(["--workers", "2"])
    mon = raw_factory(s)
    assert mon.call("MONITOR") == "OK"
    assert s.client().client_list()  # the monitor is registered on its worker
    clients = [s.client() for _ in range(4)]  # round-robin: both workers
    workers = set()
    for i, c in enumerate(clients):
        c.echo(f"from-{i}")
        workers.add(c.client_info()["worker"])
    assert len(workers) == 2
    seen = set()
    for _ in range(64):  # bounded: 4 echoes and the other commands sent meanwhile
        line = mon.read()
        m = MONITOR_LINE.match(line)
        if m:
            seen.add(int(m.group(1)))
        if len(seen) == 4:
            break
    assert seen == {0, 1, 2, 3}
    # Arguments are quoted like Redis (sdscatrepr); AUTH is redacted; CONFIG (admin) is not shown.
    c = clients[0]
    c.execute_command("ECHO", b'a "q"\n\x01')
    c.config_get("maxmemory")
    c.echo("end")
    lines = []
    while True:
        line = mon.read()
        lines.append(line)
        if '"end"' in line or len(lines) > 64:
            break
    assert any(l.endswith(r'"ECHO" "a \"q\"\n\x01"') for l in lines), lines
    assert not any('"CONFIG"' in l for l in lines)


# ---------------------------------------------------------------- SLOWLOG / LATENCY


def test_slowlog_with_threshold_zero(server_factory):
    r = server_factory(["--slowlog-log-slower-than", "0", "--slowlog-max-len", "5"]).client()
    r.slowlog_reset()
    r.client_setname("me")
    r.echo("y" * 300)
    entries = r.slowlog_get(10)
    assert 1 <= len(entries) <= 5
    echo = [e for e in entries if e["command"].startswith(b"ECHO") or
            e["command"].startswith(b"echo")]
    assert echo, entries
    raw = r.execute_command("SLOWLOG", "GET", 1)
    assert len(raw) == 1 and len(raw[0]) == 6
    args = r.execute_command("SLOWLOG", "GET", -1)
    echo_raw = [e for e in args if e[3][0].lower() == b"echo"][0]
    assert echo_raw[3][1].endswith(b"... (172 more bytes)")  # 128 bytes kept
    assert echo_raw[4].startswith(b"127.0.0.1:") and echo_raw[5] == b"me"
    for _ in range(10):
        r.ping()
    assert r.slowlog_len() == 5
    r.config_set("slowlog-max-len", 2)
    assert r.slowlog_len() <= 3  # trimmed (the CONFIG SET itself may be logged after)
    r.config_set("slowlog-log-slower-than", -1)
    r.slowlog_reset()
    r.ping()
    assert r.slowlog_len() == 0
    with pytest.raises(rex.ResponseError, match="count should be greater"):
        r.execute_command("SLOWLOG", "GET", -5)


def test_latency_monitor(server_factory):
    # Off (the default, 0), nothing is recorded. Then 1 ms: on a loaded machine (two
    # test files at once under ASan) even a PING may pass it ("fast-command" events), so
    # the checks below look only for the "command" event of a slow command.
    r = server_factory().client()
    r.ping()
    assert r.execute_command("LATENCY", "LATEST") == []
    assert r.config_set("latency-monitor-threshold", 1)
    r.execute_command("KV.PREFIX.REGISTER", "lat", 1024, "int8")
    x = np.random.default_rng(1).standard_normal((4096, 1024), dtype=np.float32)
    # 16 MiB of rows quantised in one command: well over a millisecond.
    def slow_event():
        r.execute_command("V.STOREBATCH", "lat_pk", 0, 0, 4096, x.tobytes())
        return [e for e in r.execute_command("LATENCY", "LATEST") if e[0] == b"command"]
    ev = poll(slow_event, timeout=30)
    assert ev and ev[0][2] >= 1 and ev[0][3] >= ev[0][2]
    hist = r.execute_command("LATENCY", "HISTORY", "command")
    assert hist and all(len(h) == 2 and h[1] >= 1 for h in hist)
    assert r.execute_command("LATENCY", "HISTORY", "nosuch") == []
    assert b"command" in r.execute_command("LATENCY", "DOCTOR")
    # Off again first, so that no slow RESET or LATEST is recorded after the reset.
    r.config_set("latency-monitor-threshold", 0)
    assert r.execute_command("LATENCY", "RESET") >= 1
    assert r.execute_command("LATENCY", "LATEST") == []
    r.execute_command("V.STOREBATCH", "lat_pk", 0, 0, 4096, x.tobytes())
    assert r.execute_command("LATENCY", "LATEST") == []


# ---------------------------------------------------------------- server commands


def test_config_set_compat_role_lastsave(r):
    bind = r.config_get("bind")["bind"]
    assert r.config_set("bind", bind)  # unchanged immutable value: OK
    with pytest.raises(rex.ResponseError, match="can't set immutable config"):
        r.config_set("bind", "0.0.0.0")
    assert r.config_set("save", "900 1")  # save points (test_redis_persistence_config.py)
    assert r.config_get("save") == {"save": "900 1"}
    assert r.config_set("save", "")
    with pytest.raises(rex.ResponseError, match="Invalid save parameters"):
        r.config_set("save", "900")
    assert r.execute_command("ROLE") == [b"master", 0, []]
    t = r.lastsave()
    assert abs(t.timestamp() - time.time()) < 3600
    r.execute_command("KV.PREFIX.SAVE")
    assert abs(r.lastsave().timestamp() - time.time()) < 120


# ---------------------------------------------------------------- Prometheus


def _http(url, data=None, timeout=10.0):
    with urllib.request.urlopen(url, data=data, timeout=timeout) as resp:
        return resp.status, resp.headers.get("Content-Type"), resp.read()


def test_metrics_endpoint_text_format_and_limits(server_factory):
    mport = free_port()
    s = server_factory(["--metrics-port", str(mport)])
    r = s.client()
    r.execute_command("KV.PREFIX.REGISTER", "m", 64, "int8")
    r.execute_command("KV.PREFIX.LOOKUP", "m")
    r.execute_command("KV.PREFIX.LOOKUP", "nosuch")
    r.execute_command("KV.PREFIX.COMMIT")
    r.set("sk1", "v")
    r.set("sk2", "v", ex=1000)
    r.set("sk3", b"x" * 40000)  # a big argument: adopted
    assert r.get("sk1") == b"v" and r.get("nosuchkey") is None
    r.set("gone", "v", px=1)
    assert poll(lambda: r.get("gone") is None)  # an expired key counted once
    status, ctype, body = _http(f"http://127.0.0.1:{mport}/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    text = body.decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"# (HELP|TYPE) pion_\w+ ", line), line
            continue
        m = re.fullmatch(r'(pion_\w+)(\{[^}]*\})? (\S+)', line)
        assert m, line
        float(m.group(3))
        samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    assert samples["pion_kvprefix_hits_total"] == 1
    assert samples["pion_kvprefix_misses_total"] == 1
    assert samples["pion_connected_clients"] >= 1
    assert samples["pion_memory_used_bytes"] > 0
    assert samples["pion_wal_bytes"] > 0
    assert samples['pion_wal_fsync_seconds_count'] >= 1
    assert samples['pion_wal_fsync_seconds_bucket{le="+Inf"}'] == samples[
        "pion_wal_fsync_seconds_count"]
    assert samples['pion_command_calls_total{cmd="kv.prefix.lookup"}'] == 2
    assert samples['pion_command_duration_seconds_count{cmd="kv.prefix.lookup"}'] == 2
    assert "pion_evictions_total" in samples and "pion_net_input_bytes_total" in samples
    # The keyspace: 3 string keys + the namespace, one with a TTL.
    assert samples["pion_keys"] == 4
    assert samples["pion_keys_with_expiry"] == 1
    assert samples["pion_keyspace_hits_total"] >= 1
    assert samples["pion_keyspace_misses_total"] >= 2  # nosuchkey, the expired key
    assert samples["pion_expired_keys_total"] == 1
    assert samples["pion_evicted_keys_total"] == 0
    assert samples["pion_string_bytes"] >= 40000
    assert samples["pion_string_values_adopted_total"] >= 1
    # Buckets are cumulative.
    buckets = [v for k, v in samples.items()
               if k.startswith('pion_command_duration_seconds_bucket{cmd="kv.prefix.lookup"')]
    assert buckets == sorted(buckets) and buckets[-1] == 2
    with pytest.raises(urllib.error.HTTPError) as e:
        _http(f"http://127.0.0.1:{mport}/other")
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        _http(f"http://127.0.0.1:{mport}/metrics", data=b"x")
    assert e.value.code == 405
    # An oversized request head is refused, and the server still serves.
    with socket.create_connection(("127.0.0.1", mport), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000)
        reply = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 431")
    assert r.ping()
    assert _http(f"http://127.0.0.1:{mport}/metrics")[0] == 200


def _need(binary: str, package: str):
    path = shutil.which(binary)
    if path is None:
        pytest.skip(f"{binary} not found: install the Debian package '{package}' "
                    "(scripts/deps.sh does)")
    return path


def test_prometheus_server_scrapes_metrics(server_factory, tmpdir_path):
    prom = _need("prometheus", "prometheus")
    mport, pport = free_port(), free_port()
    s = server_factory(["--metrics-port", str(mport)])
    s.client().execute_command("KV.PREFIX.LOOKUP", "nosuch")
    cfg = tmpdir_path / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: pion\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{mport}']\n")
    log = open(tmpdir_path / "prometheus.log", "wb")
    p = subprocess.Popen([prom, f"--config.file={cfg}", f"--storage.tsdb.path={tmpdir_path}/tsdb",
                          f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        def query(q):
            url = f"http://127.0.0.1:{pport}/api/v1/query?query=" + urllib.request.quote(q)
            try:
                _, _, body = _http(url, timeout=2)
            except (urllib.error.URLError, ConnectionError, OSError):
                return None
            res = json.loads(body)["data"]["result"]
            return res or None
        got = poll(lambda: query("pion_kvprefix_misses_total"), timeout=60, interval=0.2)
        assert got, (tmpdir_path / "prometheus.log").read_text()
        assert float(got[0]["value"][1]) == 1
        up = poll(lambda: query('up{job="pion"}'), timeout=30, interval=0.2)
        assert up and up[0]["value"][1] == "1"
        hist = poll(lambda: query('pion_command_duration_seconds_bucket{cmd="kv.prefix.lookup"}'),
                    timeout=30, interval=0.2)
        assert hist and len(hist) > 2
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def test_prometheus_redis_exporter_reads_info(server_factory, tmpdir_path):
    exporter = _need("prometheus-redis-exporter", "prometheus-redis-exporter")
    s = server_factory()
    r = s.client()
    r.execute_command("KV.PREFIX.LOOKUP", "nosuch")
    eport = free_port()
    log_path = tmpdir_path / "exporter.log"
    log = open(log_path, "wb")
    p = subprocess.Popen([exporter, "-redis.addr", f"redis://127.0.0.1:{s.port}",
                          "-web.listen-address", f"127.0.0.1:{eport}"],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        def scrape():
            try:
                return _http(f"http://127.0.0.1:{eport}/metrics", timeout=5)[2].decode()
            except (urllib.error.URLError, ConnectionError, OSError):
                return None
        text = poll(scrape, timeout=30, interval=0.1)
        assert text, log_path.read_text()
        metrics = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                metrics[k] = v
        assert metrics["redis_up"] == "1"
        assert metrics['redis_exporter_last_scrape_error{err=""}'] == "0"
        assert int(metrics["redis_connected_clients"]) >= 1
        assert 'redis_commands_total{cmd="kv.prefix.lookup"}' in metrics
        assert "redis_memory_used_bytes" in metrics and "redis_cpu_sys_seconds_total" in metrics
        assert any(k.startswith("redis_instance_info{") and 'role="master"' in k for k in metrics)
        # No error from the exporter, and none of its commands was refused by pion.
        log.flush()
        bad = [l for l in log_path.read_text().splitlines()
               if "level=error" in l or "level=warn" in l]
        assert not bad, bad
        assert r.info("stats")["total_error_replies"] == 0, r.info("errorstats")
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def test_reset_ends_monitor(server, raw_factory):
    """RESET turns MONITOR off (as Redis): no `O` flag, and no line for later commands."""
    mon, c = raw_factory(server), raw_factory(server)
    assert mon.call("MONITOR") == "OK"
    assert c.call("ECHO", "before") == b"before"
    assert b'"ECHO" "before"' in mon.read().encode()
    mon.send(RawConn.encode("RESET"))
    # The ECHO line may still come before RESET's reply; nothing after it.
    while (v := mon.read()) != "RESET":
        assert "before" in v or "RESET" in v, v
    assert b"flags=O" not in c.call("CLIENT", "LIST")
    assert c.call("ECHO", "after") == b"after"
    assert mon.call("PING") == "PONG"  # a line for ECHO would precede this reply
