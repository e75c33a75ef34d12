"""ACL users, key patterns and tenant isolation; TLS (docs/security.md).

Against the real binary. Certificates are made by the test with the openssl tool.
"""
from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import redis

from conftest import free_port, poll

NOPERM_KEY = "this user has no permissions to access one of the keys used as arguments"


def noperm_cmd(cmd: str) -> str:
    return f"this user has no permissions to run the '{cmd}' command"


def err(fn, *args):
    """The error text of a redis-py call that must fail."""
    with pytest.raises(redis.ResponseError) as e:
        fn(*args)
    return str(e.value)


def login(s, user, password, **kw):
    return s.client(username=user, password=password, **kw)


# ----------------------------------------------------------------- tenant matrix

@pytest.fixture
def tenants(server_factory):
    s = server_factory(["--appendonly", "no"])
    admin = s.client()
    admin.execute_command("ACL", "SETUSER", "alice", "on", ">pa", "~a|*", "+@all", "-@dangerous")
    admin.execute_command("ACL", "SETUSER", "bob", "on", ">pb", "~b|*", "+@all", "-@dangerous")
    d = 64
    x = np.random.default_rng(1).random((8, d), dtype=np.float32)
    for ns in ("a|x", "b|x"):
        assert admin.execute_command("KV.PREFIX.REGISTER", ns, d, "fp16") == b"OK"
        admin.execute_command("V.STOREBATCH", ns + "_pk", 0, 0, 8, x.tobytes())
        admin.execute_command("V.STOREBATCH", ns + "_pv", 0, 0, 8, x.tobytes())
    return s, admin, x


def probes(ns: str, x):
    """Every keyed command a tenant could use to learn about `ns`."""
    hashes = np.arange(4, dtype=np.uint64).tobytes()
    return [
        ("KV.PREFIX.LOOKUP", ns),
        ("KV.PREFIX.MEMBERSHIP", ns, 4, hashes),
        ("KV.PREFIX.BLOCKS", ns),
        ("V.FETCH", ns + "_pk", 0, "RANGE", 0, 8),
        ("V.FETCH", ns + "_pv", 0, 0, 1, 2),
        ("V.FETCH", ns + "_pk", "BATCH", 0, 8, 1),
        ("V.INFO", ns + "_pk"),
        ("V.INFO", ns + "_attn"),
        ("V.STOREBATCH", ns + "_pk", 0, 0, 8, x.tobytes()),
        ("KV.PREFIX.DROP", ns),
        ("KV.PREFIX.REGISTER", ns, 64, "fp16"),
    ]


def test_tenant_cannot_tell_existing_from_missing_namespace(tenants):
    s, admin, x = tenants
    alice = login(s, "alice", "pa")
    for existing, missing in zip(probes("b|x", x), probes("b|nothing-here", x)):
        e1 = err(alice.execute_command, *existing)
        e2 = err(alice.execute_command, *missing)
        assert e1 == e2 == NOPERM_KEY, (existing[0], e1, e2)
        assert "b|" not in e1
    # Nothing of bob's changed, and alice's own namespace works.
    assert admin.execute_command("KV.PREFIX.LOOKUP", "b|x") == b"HIT"
    assert alice.execute_command("KV.PREFIX.LOOKUP", "a|x") == b"HIT"
    got = alice.execute_command("V.FETCH", "a|x_pk", 0, "RANGE", 0, 8, "FMT", "F32")
    assert np.allclose(np.frombuffer(got, np.float32).reshape(8, 64), x, atol=1e-3)
    assert alice.execute_command("KV.PREFIX.LOOKUP", "a|missing") == b"MISS"


def test_tenant_sees_only_its_namespaces_in_keyspace_counts(tenants):
    s, admin, x = tenants
    alice = login(s, "alice", "pa")
    assert admin.dbsize() == 2
    assert alice.dbsize() == 1
    # Server-wide state is @dangerous (as INFO is in Redis) or needs every key.
    assert err(alice.info, "keyspace") == noperm_cmd("info")
    assert err(alice.execute_command, "KV.PREFIX.INFO") == noperm_cmd("kv.prefix.info")
    assert err(alice.execute_command, "PION.STATS") == noperm_cmd("pion.stats")
    assert err(alice.execute_command, "V.INFO") == NOPERM_KEY
    assert err(alice.flushall) == noperm_cmd("flushall")
    # Other clients are not a tenant's business either.
    assert err(alice.execute_command, "CLIENT", "LIST") == noperm_cmd("client|list")
    assert err(alice.execute_command, "CLIENT", "KILL", "ID", 1) == noperm_cmd("client|kill")
    assert alice.execute_command("CLIENT", "SETNAME", "a1") == b"OK"
    # A tenant allowed @dangerous still only sees and flushes its own namespaces.
    admin.execute_command("ACL", "SETUSER", "alice", "+@dangerous")
    keyspace = alice.info("keyspace")
    assert keyspace["db0"]["keys"] == 1
    assert alice.flushall() is True
    assert admin.execute_command("KV.PREFIX.LOOKUP", "a|x") == b"MISS"
    assert admin.execute_command("KV.PREFIX.LOOKUP", "b|x") == b"HIT"
    assert admin.dbsize() == 1


def test_denials_are_logged_with_the_key_for_admins(tenants):
    s, admin, x = tenants
    admin.execute_command("ACL", "LOG", "RESET")
    alice = login(s, "alice", "pa")
    err(alice.execute_command, "KV.PREFIX.LOOKUP", "b|x")
    err(alice.execute_command, "KV.PREFIX.LOOKUP", "b|x")
    err(alice.flushall)
    log = admin.execute_command("ACL", "LOG")
    entries = [dict(zip(e[0::2], e[1::2])) for e in log]
    assert entries[0][b"reason"] == b"command" and entries[0][b"object"] == b"flushall"
    assert entries[1][b"reason"] == b"key" and entries[1][b"object"] == b"b|x"
    assert entries[1][b"count"] == 2 and entries[1][b"username"] == b"alice"
    assert b"user=alice" in entries[1][b"client-info"]
    assert len(admin.execute_command("ACL", "LOG", 1)) == 1
    assert admin.execute_command("ACL", "LOG", "RESET") == b"OK"
    assert admin.execute_command("ACL", "LOG") == []


def test_read_and_write_patterns(server_factory):
    s = server_factory(["--appendonly", "no"])
    admin = s.client()
    admin.execute_command("KV.PREFIX.REGISTER", "shared|m", 64, "fp16")
    admin.execute_command("ACL", "SETUSER", "ro", "on", ">p", "%R~shared|*", "%RW~own|*", "+@all")
    ro = login(s, "ro", "p")
    assert ro.execute_command("KV.PREFIX.LOOKUP", "shared|m") == b"HIT"
    assert err(ro.execute_command, "KV.PREFIX.DROP", "shared|m") == NOPERM_KEY
    assert err(ro.execute_command, "KV.PREFIX.REGISTER", "shared|n", 64, "fp16") == NOPERM_KEY
    assert ro.execute_command("KV.PREFIX.REGISTER", "own|n", 64, "fp16") == b"OK"
    # DROP of several: one refused key refuses the command.
    assert err(ro.execute_command, "KV.PREFIX.DROP", "own|n", "shared|m") == NOPERM_KEY
    assert admin.execute_command("KV.PREFIX.LOOKUP", "own|n") == b"HIT"
    assert ro.execute_command("KV.PREFIX.DROP", "own|n") == 1
    desc = admin.execute_command("ACL", "GETUSER", "ro")
    d = dict(zip(desc[0::2], desc[1::2]))
    assert d[b"keys"] == b"%R~shared|* ~own|*"


def test_del_of_a_parent_checks_its_descendants(server_factory):
    # DEL/UNLINK of a namespace drops its subtree: like KV.PREFIX.DROP, every
    # descendant needs the write permission, or nothing is deleted.
    s = server_factory(["--appendonly", "no"])
    admin = s.client()
    admin.execute_command("KV.PREFIX.REGISTER", "own|p", 64, "fp16")
    admin.execute_command("KV.PREFIX.REGISTER", "shared|c", 64, "fp16", "PARENT", "own|p")
    admin.execute_command("ACL", "SETUSER", "rw", "on", ">p", "%R~shared|*", "%RW~own|*", "+@all")
    rw = login(s, "rw", "p")
    for cmd in ("DEL", "UNLINK"):
        for key in ("own|p", "own|p_pk"):
            assert err(rw.execute_command, cmd, key) == NOPERM_KEY
    assert admin.execute_command("KV.PREFIX.LOOKUP", "own|p") == b"HIT"
    assert admin.execute_command("KV.PREFIX.LOOKUP", "shared|c") == b"HIT"
    # A leaf it may write goes; then the parent has no refused descendant.
    admin.execute_command("KV.PREFIX.REGISTER", "own|q", 64, "fp16", "PARENT", "own|p")
    assert rw.execute_command("UNLINK", "own|q") == 1
    admin.execute_command("KV.PREFIX.DROP", "shared|c")
    assert rw.execute_command("DEL", "own|p") == 1
    assert admin.execute_command("KV.PREFIX.LOOKUP", "own|p") == b"MISS"


def test_flushall_of_a_restricted_user_keeps_a_parent_with_a_protected_descendant(server_factory):
    # FLUSHALL by a user with key patterns removes what it may write; a writable
    # parent whose subtree holds a namespace it may not write stays (DEL of it is
    # refused), while its other keys go.
    s = server_factory(["--appendonly", "no"])
    admin = s.client()
    admin.execute_command("KV.PREFIX.REGISTER", "own|p", 64, "fp16")
    admin.execute_command("KV.PREFIX.REGISTER", "shared|c", 64, "fp16", "PARENT", "own|p")
    admin.execute_command("KV.PREFIX.REGISTER", "own|solo", 64, "fp16")
    admin.set("own|str", b"v")
    admin.set("other|str", b"v")
    admin.execute_command("ACL", "SETUSER", "rw", "on", ">p", "%R~shared|*", "%RW~own|*", "+@all")
    rw = login(s, "rw", "p")
    assert rw.execute_command("FLUSHALL") in (True, b"OK")
    assert admin.execute_command("KV.PREFIX.LOOKUP", "own|p") == b"HIT"
    assert admin.execute_command("KV.PREFIX.LOOKUP", "shared|c") == b"HIT"
    assert admin.execute_command("KV.PREFIX.LOOKUP", "own|solo") == b"MISS"
    assert admin.get("own|str") is None
    assert admin.get("other|str") == b"v"


# ------------------------------------------------------------- ACL subcommands

def test_acl_subcommands(server_factory):
    s = server_factory(kvcache=False)
    c = s.client()
    acl = lambda *a: c.execute_command("ACL", *a)  # noqa: E731
    assert acl("WHOAMI") == b"default"
    assert acl("USERS") == [b"default"]
    assert acl("LIST") == [b"user default on nopass ~* &* +@all"]
    assert acl("SETUSER", "u1", "on", ">secret", "~x*", "+@read", "-kv.prefix.lookup") == b"OK"
    assert acl("SETUSER", "u1", "+ping") == b"OK"
    line = acl("LIST")[1].decode()
    h = __import__("hashlib").sha256(b"secret").hexdigest()
    assert line == f"user u1 on #{h} ~x* resetchannels -@all +@read -kv.prefix.lookup +ping"
    g = acl("GETUSER", "u1")
    d = dict(zip(g[0::2], g[1::2]))
    assert d[b"flags"] == [b"on"] and d[b"passwords"] == [h.encode()]
    assert d[b"commands"] == b"-@all +@read -kv.prefix.lookup +ping" and d[b"keys"] == b"~x*"
    assert acl("GETUSER", "nobody") is None
    # Errors (Redis 7.0's texts).
    assert err(acl, "SETUSER", "u2", "bogus") == \
        "Error in ACL SETUSER modifier 'bogus': Syntax error"
    assert err(acl, "SETUSER", "u2", "+nosuch") == \
        "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
    assert err(acl, "SETUSER", "u2", "+@nosuch").endswith("Unknown command or category name in ACL")
    assert "Adding a pattern after the * pattern" in err(acl, "SETUSER", "u2", "allkeys", "~y")
    assert "does not exist" in err(acl, "SETUSER", "u2", "<nope")
    assert "exactly 64 characters" in err(acl, "SETUSER", "u2", "#abc")
    assert acl("USERS") == [b"default", b"u1"]  # failed SETUSERs created nothing
    assert err(acl, "WHOAMI", "x") == "wrong number of arguments for 'acl|whoami' command"
    assert err(acl, "NOPE").startswith("unknown subcommand 'NOPE'")
    # CAT.
    cats = acl("CAT")
    assert b"kvcache" in cats and b"attend" in cats and b"dangerous" in cats and b"read" in cats
    assert b"kv.prefix.lookup" in acl("CAT", "kvcache")  # listed even without --kvcache
    assert b"flushall" in acl("CAT", "dangerous")
    assert b"ping" in acl("CAT", "connection")
    assert err(acl, "CAT", "nosuch") == "Unknown category 'nosuch'"
    # DRYRUN.
    assert acl("DRYRUN", "u1", "DBSIZE") == b"OK"
    assert acl("DRYRUN", "u1", "FLUSHALL") == \
        b"This user has no permissions to run the 'flushall' command"
    assert acl("DRYRUN", "u1", "KV.PREFIX.LOOKUP", "x1") == \
        b"This user has no permissions to run the 'kv.prefix.lookup' command"
    assert acl("DRYRUN", "u1", "V.INFO", "y_pk") == \
        b"This user has no permissions to access the 'y_pk' key"
    assert acl("DRYRUN", "u1", "V.INFO", "x1_pk") == b"OK"
    assert err(acl, "DRYRUN", "nobody", "PING") == "User 'nobody' not found"
    assert err(acl, "DRYRUN", "u1", "NOSUCH") == "Command 'NOSUCH' not found"
    # GENPASS.
    p = acl("GENPASS")
    assert len(p) == 64 and int(p, 16) >= 0 and p != acl("GENPASS")
    assert len(acl("GENPASS", 32)) == 8 and len(acl("GENPASS", 5)) == 2
    assert "GENPASS argument must be" in err(acl, "GENPASS", 0)
    assert "LOAD" in " ".join(x.decode() for x in acl("HELP"))
    # LOAD / SAVE without an aclfile.
    assert "not configured to use an ACL file" in err(acl, "LOAD")
    assert "not configured to use an ACL file" in err(acl, "SAVE")
    # DELUSER.
    assert err(acl, "DELUSER", "default") == "The 'default' user cannot be removed"
    assert acl("DELUSER", "u1", "nobody") == 1
    assert acl("USERS") == [b"default"]


def test_command_permissions_and_whoami(server_factory):
    s = server_factory(kvcache=False)
    c = s.client()
    c.execute_command("ACL", "SETUSER", "ops", "on", ">o", "allkeys", "+@all", "-@admin")
    c.execute_command("ACL", "SETUSER", "off", "off", ">o", "allkeys", "+@all")
    ops = login(s, "ops", "o")
    assert ops.ping() is True and ops.dbsize() == 0
    assert err(ops.config_get, "port") == noperm_cmd("config|get")
    assert err(ops.execute_command, "ACL", "WHOAMI") == noperm_cmd("acl|whoami")
    with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
        login(s, "off", "o").ping()
    r = s.client()
    assert r.execute_command("AUTH", "ops", "o") is True
    assert c.execute_command("CLIENT", "LIST").decode().count("user=ops") == 2
    # HELLO 3 AUTH user pass.
    raw = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    raw.sendall(b"HELLO 3 AUTH ops wrong\r\n")
    assert raw.recv(4096).startswith(b"-WRONGPASS")
    raw.sendall(b"HELLO 3 AUTH ops o\r\nCONFIG GET port\r\n")
    got = b""
    deadline = time.monotonic() + 10
    while b"NOPERM" not in got and time.monotonic() < deadline:
        got += raw.recv(4096)
    assert got.startswith(b"%7") and b"-NOPERM this user has no permissions to run the 'config|get'" in got
    raw.close()


def test_deluser_disconnects_its_clients(server_factory):
    s = server_factory(kvcache=False)
    c = s.client()
    c.execute_command("ACL", "SETUSER", "tmp", "on", "nopass", "allkeys", "+@all")
    t = login(s, "tmp", "any")
    assert t.ping() is True
    assert c.execute_command("ACL", "DELUSER", "tmp") == 1
    assert poll(lambda: b"user=tmp" not in c.execute_command("CLIENT", "LIST"))
    with pytest.raises((redis.ConnectionError, redis.ResponseError, redis.AuthenticationError)):
        t.ping()


def test_auth_failures_are_counted_in_acl_log(server_factory):
    s = server_factory(["--requirepass", "pw"], kvcache=False)
    c = s.client()
    for _ in range(3):
        r = redis.Redis(port=s.port, password="bad", socket_timeout=10)
        with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
            r.ping()
    with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
        redis.Redis(port=s.port, username="ghost", password="x").ping()
    log = [dict(zip(e[0::2], e[1::2])) for e in c.execute_command("ACL", "LOG")]
    assert log[0][b"reason"] == b"auth" and log[0][b"username"] == b"ghost"
    assert log[1][b"reason"] == b"auth" and log[1][b"username"] == b"default"
    assert log[1][b"count"] == 3 and log[1][b"object"] == b"AUTH"
    # requirepass is the default user's password.
    assert c.execute_command("ACL", "GETUSER", "default")[3] == \
        [__import__("hashlib").sha256(b"pw").hexdigest().encode()]


def test_users_from_config_file_and_command_line(server_factory, tmp_path):
    conf = tmp_path / "pion.conf"
    conf.write_text("user default on >dpw ~* &* +@all\n"
                    "user cfg on >c1 ~c|* +@all -@dangerous\n")
    s = server_factory(kvcache=False, start=False, args=["--user", "cli on >c2 ~* +@read"])
    binary, rest = s.cmdline()[0], s.cmdline()[1:]
    s.cmdline = lambda: [binary, str(conf), *rest]
    s.password = "dpw"
    s.start()
    c = s.client()
    assert c.execute_command("ACL", "USERS") == [b"cfg", b"cli", b"default"]
    cfg = login(s, "cfg", "c1")
    assert cfg.ping() is True
    assert err(cfg.execute_command, "KV.PREFIX.LOOKUP", "x") != ""
    assert login(s, "cli", "c2").dbsize() == 0
    assert err(login(s, "cli", "c2").config_get, "port") == noperm_cmd("config|get")
    # A bad user line refuses to start, naming the line.
    bad = server_factory(kvcache=False, start=False, sub="bad", args=["--user", "x on bogus"])
    e = subprocess.run(bad.cmdline(), capture_output=True, text=True, timeout=30)
    assert e.returncode != 0 and "bogus" in e.stdout + e.stderr


def test_aclfile_save_load_round_trip(server_factory, tmp_path):
    f = tmp_path / "users.acl"
    f.write_text("# tenants\nuser t1 on >p1 ~t1|* +@all -@dangerous\n\n")
    s = server_factory(["--aclfile", str(f)], kvcache=False)
    c = s.client()
    assert c.execute_command("ACL", "USERS") == [b"default", b"t1"]
    c.execute_command("ACL", "SETUSER", "t2", "on", ">p2", "%R~t2|*", "+@read")
    before = c.execute_command("ACL", "LIST")
    assert c.execute_command("ACL", "SAVE") == b"OK"
    assert f.read_text().splitlines() == [x.decode() for x in before]
    c.execute_command("ACL", "DELUSER", "t2")
    c.execute_command("ACL", "SETUSER", "t3", "on")
    assert c.execute_command("ACL", "LOAD") == b"OK"
    assert c.execute_command("ACL", "LIST") == before
    # A broken file is refused and nothing changes.
    f.write_text("user ok on nopass\nuser broken on +nosuch\n")
    e = err(c.execute_command, "ACL", "LOAD")
    assert ":2: Error in ACL SETUSER modifier '+nosuch'" in e
    assert c.execute_command("ACL", "LIST") == before
    # After a restart the saved users are back.
    f.write_text("\n".join(x.decode() for x in before) + "\n")
    s.restart()
    assert s.client().execute_command("ACL", "LIST") == before
    assert login(s, "t2", "p2").dbsize() == 0
    # Both an aclfile and user lines: refused at start.
    both = server_factory(["--aclfile", str(f), "--user", "x on"], kvcache=False, start=False,
                          sub="both")
    r = subprocess.run(both.cmdline(), capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "aclfile" in r.stdout + r.stderr


def test_command_info_lists_categories(server_factory, raw_factory):
    s = server_factory(kvcache=False)
    info = raw_factory(s).call("COMMAND", "INFO", "KV.PREFIX.LOOKUP", "FLUSHALL", "PING")
    cats = [{c.encode() if isinstance(c, str) else c for c in x[6]} for x in info]
    assert {b"@read", b"@fast", b"@kvcache"} <= cats[0]
    assert {b"@write", b"@keyspace", b"@dangerous"} <= cats[1]
    assert {b"@fast", b"@connection"} <= cats[2]


def test_open_bind_without_password_warns(server_factory):
    s = server_factory(["--bind", "0.0.0.0", "--protected-mode", "no"], kvcache=False)
    # The line follows the listen (a client may get in first): poll for it.
    assert poll(lambda: "no password for the default user" in s.log())
    quiet = server_factory(["--bind", "0.0.0.0", "--protected-mode", "no", "--requirepass", "x"],
                           kvcache=False, sub="quiet")
    assert poll(lambda: "Ready to accept connections" in quiet.log())
    assert "no password for the default user" not in quiet.log()


# ------------------------------------------------------------------------- TLS

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "2", "-subj", "/CN=pion-test-ca", cwd=d)
    (d / "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, cn in (("server", "localhost"), ("server2", "localhost"), ("client", "client")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                f"{name}.csr", "-subj", f"/CN={cn}/O={name}", cwd=d)
        extra = ["-extfile", "ext"] if name.startswith("server") else []
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", *extra, cwd=d)
    return d


def tls_args(certs: Path, auth: str = "no", port: int | None = None):
    return ["--tls-port", str(port or free_port()), "--tls-cert-file", str(certs / "server.crt"),
            "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file",
            str(certs / "ca.crt"), "--tls-auth-clients", auth, "--appendonly", "no"]


def tls_port(s) -> int:
    return int(s.args[s.args.index("--tls-port") + 1])


def tls_client(s, certs, cert=False, **kw):
    if cert:
        kw.update(ssl_certfile=str(certs / "client.crt"), ssl_keyfile=str(certs / "client.key"))
    kw.setdefault("socket_timeout", 60)
    return redis.Redis(port=tls_port(s), ssl=True, ssl_ca_certs=str(certs / "ca.crt"), **kw)


def mib16(seed=0):
    rows, d = 4096, 1024  # 4096 x 1024 f32 = 16 MiB
    return np.random.default_rng(seed).random((rows, d), dtype=np.float32)


def test_redis_py_tls_round_trip_16mib(server_factory, certs):
    s = server_factory(tls_args(certs))
    r = tls_client(s, certs)
    x = mib16()
    assert r.execute_command("KV.PREFIX.REGISTER", "tls|a", 1024, "fp16") == b"OK"
    assert r.execute_command("V.STOREBATCH", "tls|a_pk", 0, 0, 4096, x.tobytes()) == b"OK"
    got = r.execute_command("V.FETCH", "tls|a_pk", 0, "RANGE", 0, 4096, "FMT", "F32")
    assert len(got) == 16 << 20
    assert np.array_equal(np.frombuffer(got, np.float32).reshape(x.shape),
                          x.astype(np.float16).astype(np.float32))
    native = r.execute_command("V.FETCH", "tls|a_pk", 0, "RANGE", 0, 4096, "FMT", "NATIVE")
    assert native == x.astype(np.float16).tobytes()
    # The same bytes over plaintext.
    assert s.client().execute_command("V.FETCH", "tls|a_pk", 0, "RANGE", 0, 4096, "FMT",
                                      "NATIVE") == native


def test_redis_cli_tls_round_trip_16mib(server_factory, certs, tmp_path):
    s = server_factory(tls_args(certs))
    cli = ["redis-cli", "-p", str(tls_port(s)), "--tls", "--cacert", str(certs / "ca.crt")]
    x = mib16(2)  # -x sends stdin as the last argument: F32 rows, the default FMT
    blob = tmp_path / "rows.bin"
    blob.write_bytes(x.tobytes())
    run = lambda *a, **kw: subprocess.run(cli + list(a), capture_output=True, timeout=120, **kw)  # noqa
    assert run("KV.PREFIX.REGISTER", "cli|a", "1024", "fp16").stdout.strip() == b"OK"
    with open(blob, "rb") as f:
        out = run("-x", "V.STOREBATCH", "cli|a_pv", "3", "0", "4096", stdin=f)
    assert out.stdout.strip() == b"OK", out
    out = run("--raw", "V.FETCH", "cli|a_pv", "3", "RANGE", "0", "4096", "FMT", "F32")
    # --raw ends the reply with a newline.
    assert out.stdout[:-1] == x.astype(np.float16).astype(np.float32).tobytes()
    assert run("KV.PREFIX.LOOKUP", "cli|a").stdout.strip() == b"HIT"


def test_client_certificate_required(server_factory, certs):
    s = server_factory(tls_args(certs, auth="yes"))
    with pytest.raises(redis.ConnectionError):
        tls_client(s, certs).ping()
    assert tls_client(s, certs, cert=True).ping() is True
    assert s.client().config_get("tls-auth-clients") == {"tls-auth-clients": "yes"}
    # optional: no certificate is fine, a certificate is still checked.
    s.client().config_set("tls-auth-clients", "optional")
    assert tls_client(s, certs).ping() is True
    assert tls_client(s, certs, cert=True).ping() is True


def test_plaintext_client_on_tls_port_is_refused_without_affecting_others(server_factory, certs):
    s = server_factory(tls_args(certs) + ["--workers", "1"])
    good = tls_client(s, certs)
    assert good.ping() is True
    raw = socket.create_connection(("127.0.0.1", tls_port(s)), timeout=10)
    raw.sendall(b"*1\r\n$4\r\nPING\r\n")
    data = b""
    while True:  # the server closes it (EOF or a reset); nothing RESP comes back
        try:
            chunk = raw.recv(4096)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    assert b"PONG" not in data
    raw.close()
    assert good.ping() is True
    assert good.execute_command("KV.PREFIX.REGISTER", "after|x", 64, "fp16") == b"OK"
    assert poll(lambda: good.info("stats")["tls_handshake_failures"] >= 1)


def test_stalled_handshake_does_not_delay_others(server_factory, certs):
    s = server_factory(tls_args(certs) + ["--workers", "1"])
    stalled = []
    for _ in range(3):
        t = socket.create_connection(("127.0.0.1", tls_port(s)), timeout=10)
        t.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello
        stalled.append(t)
    bare = socket.create_connection(("127.0.0.1", tls_port(s)), timeout=10)  # sends nothing
    stalled.append(bare)
    # With one worker, every other client shares the loop those handshakes sit in.
    r = tls_client(s, certs, socket_timeout=10)
    x = np.random.default_rng(3).random((64, 64), dtype=np.float32)
    assert r.execute_command("KV.PREFIX.REGISTER", "ok|x", 64, "fp16") == b"OK"
    assert r.execute_command("V.STOREBATCH", "ok|x_pk", 0, 0, 64, x.tobytes()) == b"OK"
    assert s.client(socket_timeout=10).execute_command("KV.PREFIX.LOOKUP", "ok|x") == b"HIT"
    info = s.client().execute_command("CLIENT", "LIST").decode()
    assert info.count("\n") >= 5  # the stalled ones are still connected, each on its own
    for t in stalled:
        t.close()


def test_tls_only_and_certificate_reload(server_factory, certs):
    port = free_port()
    s = server_factory(tls_args(certs, port=port) + ["--port", "0"], start=False)
    s.start(wait=False)
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))

    def peer_org():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as t:
                    subject = dict(x[0] for x in t.getpeercert()["subject"])
                    return subject.get("organizationName")
        except OSError:
            return None

    assert poll(peer_org) == "server"
    # No plaintext listener on the port the fixture picked.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=5).recv(1)
    r = redis.Redis(port=port, ssl=True, ssl_ca_certs=str(certs / "ca.crt"), socket_timeout=30)
    assert r.ping() is True
    assert r.config_set("tls-cert-file", str(certs / "server2.crt"), "tls-key-file",
                        str(certs / "server2.key")) is True
    assert peer_org() == "server2"
    assert r.ping() is True  # the open connection kept its session
    # A bad certificate is refused and changes nothing.
    with pytest.raises(redis.ResponseError) as e:
        r.config_set("tls-cert-file", str(certs / "missing.crt"))
    assert "Unable to update TLS configuration" in str(e.value)
    assert r.config_get("tls-cert-file")["tls-cert-file"] == str(certs / "server2.crt")
    assert peer_org() == "server2"


def test_tls_bad_settings_refuse_to_start(server_factory, certs):
    s = server_factory(tls_args(certs) + ["--tls-cert-file", str(certs / "nope.crt")],
                       start=False, kvcache=False)
    r = subprocess.run(s.cmdline(), capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "tls-cert-file" in r.stdout + r.stderr
    s = server_factory(tls_args(certs) + ["--tls-protocols", "SSLv3"], start=False,
                       kvcache=False, sub="p")
    r = subprocess.run(s.cmdline(), capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "tls-protocols" in r.stdout + r.stderr


# ------------------------------------------------- string keys, observability, the lane

def string_probes(key: str):
    """Every string/generic command a tenant could use to learn about `key`."""
    return [
        ("GET", key), ("EXISTS", key), ("TYPE", key), ("TTL", key), ("PTTL", key),
        ("EXPIRETIME", key), ("STRLEN", key), ("GETRANGE", key, 0, -1), ("MGET", "a|s", key),
        ("MEMORY", "USAGE", key), ("SET", key, "v", "NX"), ("SETNX", key, "v"),
        ("APPEND", key, "v"), ("GETDEL", key), ("GETEX", key), ("EXPIRE", key, 100),
        ("PERSIST", key), ("DEL", key), ("UNLINK", "a|s", key), ("RENAME", "a|s", key),
        ("RENAMENX", key, "a|new"), ("MSET", "a|s", "v", key, "v"), ("MSETNX", key, "v"),
        ("WATCH", key),
    ]


def test_tenant_cannot_learn_other_tenants_string_keys(tenants):
    s, admin, x = tenants
    admin.set("a|s", "mine", ex=1000)
    admin.set("b|s", "theirs", ex=1000)
    alice = login(s, "alice", "pa")
    for existing, missing in zip(string_probes("b|s"), string_probes("b|nothing-here")):
        e1 = err(alice.execute_command, *existing)
        e2 = err(alice.execute_command, *missing)
        assert e1 == e2 == NOPERM_KEY, (existing[0], e1, e2)
    assert admin.get("b|s") == b"theirs" and admin.get("a|s") == b"mine"
    # The listing commands show only alice's keys; KEYS is @dangerous (as Redis).
    assert err(alice.keys, "*") == noperm_cmd("keys")
    seen, cur = set(), 0
    for _ in range(100):
        cur, keys = alice.scan(cur, count=1)
        seen |= set(keys)
        if cur == 0:
            break
    assert cur == 0 and seen == {b"a|s", b"a|x"}
    assert set(alice.scan(0, match="b|*", count=1000)[1]) == set()
    assert {alice.randomkey() for _ in range(20)} <= {b"a|s", b"a|x"}
    assert alice.dbsize() == 2 and admin.dbsize() == 4
    # Allowed @dangerous: KEYS and FLUSHALL/FLUSHDB still only see alice's keys.
    admin.execute_command("ACL", "SETUSER", "alice", "+@dangerous")
    assert set(alice.keys("*")) == {b"a|s", b"a|x"}
    assert alice.info("keyspace")["db0"]["keys"] == 2
    assert alice.flushdb() is True
    assert alice.dbsize() == 0 and alice.randomkey() is None
    assert set(admin.keys("*")) == {b"b|s", b"b|x"}


def test_tenant_flush_is_logged(server_factory):
    s = server_factory([])
    admin = s.client()
    admin.execute_command("ACL", "SETUSER", "alice", "on", ">pa", "~a|*", "+@all")
    for k in ("a|1", "a|2", "b|1"):
        admin.set(k, "v")
    admin.execute_command("KV.PREFIX.REGISTER", "a|ns", 64, "fp16")
    admin.execute_command("KV.PREFIX.REGISTER", "b|ns", 64, "fp16")
    assert login(s, "alice", "pa").flushall() is True
    s.restart()
    assert sorted(s.client().keys("*")) == [b"b|1", b"b|ns"]


def test_observability_is_not_for_tenants(tenants):
    s, admin, x = tenants
    alice = login(s, "alice", "pa")
    alice.client_setname("alice-conn")
    for cmd in (("MONITOR",), ("SLOWLOG", "GET"), ("LATENCY", "LATEST"), ("CONFIG", "GET", "*"),
                ("ACL", "LOG"), ("FLUSHALL",), ("FLUSHDB",), ("KEYS", "*")):
        # As Redis: a subcommand is named in full ("config|get").
        name = "|".join(cmd[:2]).lower() if len(cmd) > 1 and cmd[0] != "KEYS" else cmd[0].lower()
        assert err(alice.execute_command, *cmd) == noperm_cmd(name), cmd
    # The admin sees which user each connection is.
    mine = [c for c in admin.client_list() if c.get("name") == "alice-conn"]
    assert len(mine) == 1 and mine[0]["user"] == "alice"
    assert any(c["user"] == "default" for c in admin.client_list())


def test_categories_of_the_newer_commands(server_factory, raw_factory):
    s = server_factory(kvcache=False)
    names = ("GET", "DEL", "KEYS", "MULTI", "WATCH", "MONITOR", "SLOWLOG",
             "ATTEND.PREFIX.QUERY", "KV.PREFIX.WARM", "V.FETCH")
    info = raw_factory(s).call("COMMAND", "INFO", *names)
    cats = {n: {c.encode() if isinstance(c, str) else c for c in x[6]} for n, x in zip(names, info)}
    assert {b"@read", b"@string", b"@fast"} <= cats["GET"]
    assert {b"@write", b"@keyspace"} <= cats["DEL"] and b"@kvcache" not in cats["GET"]
    assert {b"@keyspace", b"@dangerous"} <= cats["KEYS"]
    assert b"@transaction" in cats["MULTI"] and b"@transaction" in cats["WATCH"]
    assert {b"@admin", b"@dangerous"} <= cats["MONITOR"] and b"@dangerous" in cats["SLOWLOG"]
    assert b"@attend" in cats["ATTEND.PREFIX.QUERY"] and b"@kvcache" not in cats["ATTEND.PREFIX.QUERY"]
    assert b"@kvcache" in cats["KV.PREFIX.WARM"] and b"@kvcache" in cats["V.FETCH"]
    # ACL CAT lists them.
    r = s.client()
    assert b"get" in r.execute_command("ACL", "CAT", "string")
    assert b"attend.prefix.query" in r.execute_command("ACL", "CAT", "attend")


def _lane_attn(admin, sid: bytes, h=2, n=4, d=8):
    k = np.random.default_rng(5).random((h, n, d), dtype=np.float32).tobytes()
    assert admin.execute_command("ATTEND.PREFIX.STORE", sid, 0, h, n, d, k, k) in (b"OK", True)


def test_fast_lane_frames_are_checked_like_their_resp_twins(server_factory):
    from test_fastlane import AUTH, ERROR, OK, PING, QUERY, Lane, query_body
    port = free_port()
    s = server_factory(["--appendonly", "no", "--fastlane-port", str(port)])
    admin = s.client()
    admin.execute_command("ACL", "SETUSER", "alice", "on", ">pa", "~a|*", "+@all", "-@dangerous")
    admin.execute_command("ACL", "SETUSER", "eve", "on", ">pe", "~*", "+@all", "-@attend")
    _lane_attn(admin, b"b|x_attn")
    _lane_attn(admin, b"a|x_attn")
    q = np.zeros((2, 1, 8), np.float32).tobytes()
    c = Lane(port)
    try:
        assert c.call(AUTH, b"alice\x00wrong")[0] == ERROR
        assert c.call(AUTH, b"alice\x00pa") == (OK, b"")
        existing = c.call(QUERY, query_body(b"b|x_attn", 0, 2, 8, 1, q))
        missing = c.call(QUERY, query_body(b"b|none_attn", 0, 2, 8, 1, q))
        assert existing == missing == (ERROR, b"NOPERM " + NOPERM_KEY.encode())
        st, out = c.call(QUERY, query_body(b"a|x_attn", 0, 2, 8, 1, q))
        assert st == OK and len(out) == 2 * 8 * 4
        assert c.call(PING, b"hi") == (OK, b"hi")
    finally:
        c.close()
    e = Lane(port)
    try:
        assert e.call(AUTH, b"eve\x00pe") == (OK, b"")
        assert e.call(QUERY, query_body(b"a|x_attn", 0, 2, 8, 1, q)) == (
            ERROR, b"NOPERM " + noperm_cmd("attend.prefix.query").encode())
    finally:
        e.close()
    # KV.PREFIX.WARM's attend_sid is a key too: alice cannot warm into bob's slots.
    ra = login(s, "alice", "pa")
    for sid in ("b|x_attn", "b|none_attn"):
        assert err(ra.execute_command, "KV.PREFIX.WARM", "a|x", 2, 8, sid) == NOPERM_KEY
    log = [dict(zip(x[0::2], x[1::2])) for x in admin.execute_command("ACL", "LOG")]
    assert any(x[b"reason"] == b"key" and x[b"username"] == b"alice" for x in log)



def test_fast_lane_over_tls(server_factory, certs):
    from test_fastlane import AUTH, ERROR, OK, PING, QUERY, Lane, query_body
    lane_port = free_port()
    s = server_factory([*tls_args(certs), "--fastlane-port", str(lane_port), "--tls-fastlane",
                        "yes", "--requirepass", "pw"])
    admin = s.client(password="pw")
    assert admin.config_get("tls-fastlane") == {"tls-fastlane": "yes"}
    _lane_attn(admin, b"t|x_attn")
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    c = Lane.__new__(Lane)
    c.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", lane_port), timeout=30),
                             server_hostname="localhost")
    c.buf = b""
    try:
        assert c.call(PING)[0] == ERROR  # NOAUTH
        assert c.call(AUTH, b"default\x00pw") == (OK, b"")
        assert c.call(PING, b"x" * 100_000) == (OK, b"x" * 100_000)
        q = np.ones((2, 3, 8), np.float32).tobytes()
        st, out = c.call(QUERY, query_body(b"t|x_attn", 0, 2, 8, 3, q))
        want = admin.execute_command("ATTEND.PREFIX.QUERY", b"t|x_attn", 0, 2, 8, 1, q)
        assert (st, out) == (OK, want)
    finally:
        c.close()
    # A plaintext frame client on the TLS lane is refused; others are unaffected.
    plain = Lane(lane_port)
    try:
        plain.send(struct.pack("<HBI", 0xCA5E, PING, 0))
        assert plain.at_eof()
    finally:
        plain.close()
    assert admin.ping() is True
    # Without certificates a TLS lane refuses to start.
    bad = server_factory(["--fastlane-port", str(free_port()), "--tls-fastlane", "yes"],
                         start=False, sub="bad")
    r = subprocess.run(bad.cmdline(), capture_output=True, text=True, timeout=30)
    assert r.returncode != 0


def test_exec_checks_permissions_again(tenants):
    s, admin, x = tenants
    alice = login(s, "alice", "pa")
    conn = alice.connection_pool.get_connection("MULTI")
    try:
        conn.send_command("MULTI")
        assert conn.read_response() in (b"OK", "OK")
        conn.send_command("SET", "a|1", "v")
        assert conn.read_response() in (b"QUEUED", "QUEUED")
        conn.send_command("GET", "a|1")
        assert conn.read_response() in (b"QUEUED", "QUEUED")
        # Narrowed between queueing and EXEC.
        admin.execute_command("ACL", "SETUSER", "alice", "-set")
        conn.send_command("EXEC")
        out = conn.read_response()
        assert isinstance(out[0], redis.ResponseError) and "'set' command" in str(out[0])
        assert out[1] is None
    finally:
        alice.connection_pool.release(conn)
    assert admin.get("a|1") is None
