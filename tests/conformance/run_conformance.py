#!/usr/bin/python3
"""Runs Redis's own test suites against pion-server and checks what must pass.

`make test-conformance` runs this. Redis 7.0.15's Tcl suite (external-server mode) and
redis-py's pytest suite come from Debian's source packages
(scripts/conformance_sources.sh puts them under build/conformance/src); nothing of
either is in this repository. Each file gets a fresh server. The results are one line
per test, written to build/conformance/results-<server>.txt:

    tcl unit/expire :: <test name> : ok|fail|err|hang
    py test_commands.py::<class>::<test> : passed|failed|error|skipped|...|hang

and compared with tests/conformance/must_pass.txt: the run fails when a listed test does
not pass (unless flaky.txt names it), when a file runs past its wall time, or when the
server dies, stops answering, does not stop on SIGTERM or logs a crash. Tests not listed
may fail (a test that waits for a reply that never comes counts as `hang`).

Modes:
  (default)    run pion, check must_pass.txt, print the report;
  --update     run pion and rewrite must_pass.txt (what passes now, less flaky.txt)
               and remaining.txt;
  --baseline   run Debian's redis-server 7.0.15 first (rewriting redis_results.txt),
               then pion, and report both side by side.
remaining.txt is the work list: tests that pass on Redis, do not pass on pion, and that
out_of_scope.txt does not exclude. tests/conformance/README.md explains the files.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "python"))
import tcl_harness  # noqa: E402
from pion.testing import free_port  # noqa: E402

BUILD = ROOT / "build" / "conformance"
REDIS_SRC = BUILD / "src" / "redis-7.0.15"
REDISPY_SRC = BUILD / "src" / "python-redis"

TCL_FILES = [
    "unit/protocol", "unit/type/string", "unit/type/incr", "unit/expire", "unit/keyspace",
    "unit/multi", "unit/acl", "unit/acl-v2", "unit/auth", "unit/info", "unit/info-command",
    "unit/introspection", "unit/introspection-2", "unit/latency-monitor", "unit/slowlog",
    "unit/scan", "unit/querybuf", "unit/limits", "unit/quit", "unit/other", "unit/maxmemory",
    "unit/client-eviction", "unit/obuf-limits", "unit/pubsub", "unit/pubsubshard",
]
PY_FILES = ["test_commands.py", "test_connection.py", "test_pipeline.py", "test_pubsub.py"]

# Wall time of one file (seconds) before it counts as hung. The Tcl harness's own
# --timeout (60 s without progress) usually notices a hung test first.
TCL_WALL = {"default": 240}
PY_WALL = {"default": 240}
TCL_TAGS = "-needs:repl -needs:debug -needs:pfdebug"
MAX_RERUNS = 2  # reruns of a Tcl file after a test made no progress, each skipping it

PASS = {"ok", "passed"}
CRASH_LOG = re.compile(
    r"(FATAL .*check failed|==\d+==ERROR: \w+Sanitizer|WARNING: ThreadSanitizer|"
    r"runtime error: |terminate called|REDIS BUG REPORT|crashed by signal|Segmentation fault)")


# ---------------------------------------------------------------- servers


def ping(port: int, loading_ok: bool = False) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = s.recv(64)
            # Any reply will do (a test may leave a password set: -NOAUTH), except
            # -LOADING at start: a server still loading its data is not ready for a
            # suite, whose set-up would fail on it.
            if reply.startswith(b"-LOADING") and not loading_ok:
                return False
            return reply[:1] in (b"+", b"-")
    except OSError:
        return False


class Server:
    """One server process for one suite file, in its own temporary directory."""

    def __init__(self, kind: str, pion_bin: Path, workdir: Path):
        self.kind = kind
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=workdir))
        self.log_path = self.dir / "server.log"
        if kind == "pion":
            # Redis's default eviction policy (pion's own default is allkeys-lru): the
            # suites set maxmemory expecting noeviction, and a key evicted there fails a
            # test that then leaves maxmemory set for the tests after it. Likewise Redis's
            # default proto-max-bulk-len (pion's own is 1gb, for large block batches): the
            # string tests expect SETBIT/SETRANGE past 512 MiB to be refused.
            # Persistence on (pion's default) in the server's own directory: Redis's
            # `appendonly no` still saves RDB snapshots to `dir` (SAVE, BGSAVE), which the
            # suites use; pion's one persistence is the WAL with its snapshots, and its
            # `appendonly no` keeps nothing on disk (docs/operations.md, Persistence).
            self.cmd = [str(pion_bin), "--kvcache", "--appendonly", "yes", "--fastlane-port", "0",
                        "--maxmemory-policy", "noeviction", "--proto-max-bulk-len", "512mb",
                        "--port", str(self.port), "--dir", str(self.dir)]
        else:
            self.cmd = ["redis-server", "--port", str(self.port), "--save", "",
                        "--appendonly", "no", "--dir", str(self.dir)]
        self.proc: subprocess.Popen | None = None
        self.problems: list[str] = []

    def start(self, timeout: float = 30.0) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with {self.proc.returncode} at start:\n"
                                   + self.log()[-4000:])
            if ping(self.port):
                return
            time.sleep(0.05)  # polling interval of a deadline loop
        self.kill()
        raise RuntimeError(f"{self.kind} did not answer PING within {timeout} s")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def finish(self, keep_log: Path) -> list[str]:
        """Checks the server survived the file, stops it, scans its log (kept as keep_log).
        Returns the problems found."""
        problems = []
        if self.proc.poll() is not None:
            problems.append(f"server died during the file (exit status {self.proc.returncode})")
        elif not ping(self.port, loading_ok=True):
            problems.append("server alive but not answering PING after the file")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                problems.append("server did not stop within 20 s of SIGTERM")
                self.kill()
        m = CRASH_LOG.search(self.log())
        if m:
            problems.append(f"server log: {self.log()[m.start():m.start() + 300]!r}")
        if self.log_path.exists():
            shutil.copyfile(self.log_path, keep_log)
        shutil.rmtree(self.dir, ignore_errors=True)
        return [f"{p} (server log {keep_log})" for p in problems]


# ---------------------------------------------------------------- results


@dataclass
class FileResult:
    suite: str  # "tcl" or "py"
    name: str  # unit/expire or test_commands.py
    tests: dict[str, str] = field(default_factory=dict)  # key -> status, in run order
    messages: dict[str, str] = field(default_factory=dict)  # key -> failure message
    problems: list[str] = field(default_factory=list)  # fail the run: crash, server hang
    hangs: list[str] = field(default_factory=list)  # tests that made no progress
    seconds: float = 0.0

    def count(self, statuses) -> int:
        return sum(1 for s in self.tests.values() if s in statuses)


def tcl_key(file: str, name: str) -> str:
    return f"tcl {file} :: {name}"


def py_key(nodeid: str) -> str:
    return "py " + (nodeid[len("tests/"):] if nodeid.startswith("tests/") else nodeid)


def read_records(path: Path, suite: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(key, status, message) of finished tests in order, and the keys started but not
    finished."""
    done: list[tuple[str, str, str]] = []
    started: list[str] = []
    seen: dict[str, int] = {}
    if not path.exists():
        return done, started
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split("\t")
        if suite == "tcl":
            if len(parts) != 4:
                continue
            status, curfile, name, msg = parts
            file = curfile.removeprefix("tests/").removesuffix(".tcl")
            key = tcl_key(file, name)
        else:
            if len(parts) != 3:
                continue
            status, nodeid, msg = parts
            key = py_key(nodeid)
        if status == "start":
            n = seen.get(key, 0) + 1
            seen[key] = n
            started.append(key if n == 1 else f"{key} #{n}")
            continue
        # The result belongs to the latest start of that name (Tcl names repeat).
        n = seen.get(key, 0)
        k = key if n <= 1 else f"{key} #{n}"
        if k in started:
            started.remove(k)
        elif key.startswith("tcl ") and "(block " in key:
            # block-level records have no start line; number repeats the same way
            n = seen.get(key, 0) + 1
            seen[key] = n
            k = key if n == 1 else f"{key} #{n}"
        done.append((k, status, msg))
    return done, started


def run_tcl_file(kind: str, file: str, harness: Path, pion_bin: Path, work: Path,
                 logdir: Path, not_run: list[str]) -> FileResult:
    res = FileResult("tcl", file)
    t0 = time.monotonic()
    skip: list[str] = []
    never = [k.split(" :: ", 1)[1] for k in not_run]
    for attempt in range(MAX_RERUNS + 1):
        server = Server(kind, pion_bin, work)
        try:
            server.start()
        except RuntimeError as e:
            res.problems.append(str(e))
            break
        rec = work / f"tcl-{file.replace('/', '_')}.rec"
        rec.unlink(missing_ok=True)
        cmd = ["tclsh", "tests/test_helper.tcl", "--host", "127.0.0.1", "--port",
               str(server.port), "--singledb", "--durable", "--clients", "1", "--timeout", "60",
               "--tags", TCL_TAGS, "--single", file]
        for name in never + skip:
            cmd += ["--skiptest", name]
        env = dict(os.environ, PION_CONFORMANCE_RESULTS=str(rec))
        out = logdir / f"{kind}-tcl-{file.replace('/', '_')}.log"
        wall = TCL_WALL.get(file, TCL_WALL["default"])
        rc, timed_out = run_bounded(cmd, harness, env, out, wall - (time.monotonic() - t0))
        problems = server.finish(out.with_suffix(".server.log"))
        done, started = read_records(rec, "tcl")
        hung = [k.split(" :: ", 1)[1].rsplit(" #", 1)[0] for k in started]
        res.tests = {k: s for k, s, _ in done}
        res.messages = {k: m for k, _, m in done if m}
        for name in skip:
            res.tests[tcl_key(file, name)] = "hang"
            res.messages[tcl_key(file, name)] = "no progress for 60 s"
        res.problems += problems
        for name in hung:
            res.tests[tcl_key(file, name)] = "hang"
            res.messages[tcl_key(file, name)] = ("still running at the file's wall time"
                                                 if timed_out else "no progress for 60 s")
            res.hangs.append(tcl_key(file, name))
        if timed_out:
            res.problems.append(f"the file ran past its wall time of {wall} s")
            break
        if not hung:
            if rc != 0 and not done:
                res.problems.append(f"harness exited with {rc} and ran nothing (see {out})")
            break
        # The harness stopped at a test that made no progress for 60 s: run the file
        # again on a fresh server without it, so the tests after it still count.
        skip += hung
        if attempt == MAX_RERUNS:
            res.problems.append(f"more than {MAX_RERUNS} tests made no progress")
    res.seconds = time.monotonic() - t0
    return res


def run_py_file(kind: str, file: str, pion_bin: Path, work: Path, logdir: Path,
                not_run: list[str]) -> FileResult:
    res = FileResult("py", file)
    t0 = time.monotonic()
    ini = work / "pytest.ini"
    ini.write_text("[pytest]\naddopts = -p no:cacheprovider -p no:warnings\n")
    # pytest-timeout (Debian's python3-pytest-timeout) stops one hung test after 30 s.
    per_test = ["--timeout=30"] if importlib.util.find_spec("pytest_timeout") else []
    # One run: pytest-timeout ends a hung test, the wall time a hung file.
    server = Server(kind, pion_bin, work)
    try:
        server.start()
    except RuntimeError as e:
        res.problems.append(str(e))
        return res
    rec = work / f"py-{file}.rec"
    rec.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-c", str(ini), "--rootdir", str(REDISPY_SRC),
           "-q", "-p", "pytest_records", f"--redis-url=redis://127.0.0.1:{server.port}/0",
           "--tb=line", *per_test, f"tests/{file}"]
    for nodeid in ["tests/" + k[3:] for k in not_run]:
        cmd += ["--deselect", nodeid]
    env = dict(os.environ, PION_CONFORMANCE_RESULTS=str(rec), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(REDISPY_SRC), str(HERE)]))
    out = logdir / f"{kind}-py-{file}.log"
    wall = PY_WALL.get(file, PY_WALL["default"])
    rc, timed_out = run_bounded(cmd, REDISPY_SRC, env, out, wall)
    problems = server.finish(out.with_suffix(".server.log"))
    done, started = read_records(rec, "py")
    res.tests = {k: s for k, s, _ in done}
    res.messages = {k: m for k, _, m in done if m}
    res.problems += problems
    for k in started:
        res.tests[k] = "hang"
        res.messages[k] = f"still running at the file's wall time of {wall} s"
        res.hangs.append(k)
    if timed_out:
        res.problems.append(f"the file ran past its wall time of {wall} s")
    elif rc not in (0, 1) and not done:
        res.problems.append(f"pytest exited with {rc} and ran nothing (see {out})")
    res.seconds = time.monotonic() - t0
    return res


def run_bounded(cmd, cwd, env, out: Path, wall: float) -> tuple[int, bool]:
    """Runs cmd in its own process group, output to `out`; kills the group after `wall`."""
    wall = max(wall, 1.0)
    with open(out, "wb") as f:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            return p.wait(wall), False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return -9, True


# ---------------------------------------------------------------- lists


def glob_to_re(pattern: str) -> re.Pattern:
    """`*` any text, `?` one character; everything else literal (test names have brackets)."""
    out = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(out + r"\Z", re.S)


@dataclass
class Rules:
    """A pattern file: `[reason]` lines, each followed by the patterns it explains."""
    rules: list[tuple[re.Pattern, str, str]] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> "Rules":
        r = cls()
        reason = ""
        if not path.exists():
            return r
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                reason = line[1:-1]
                continue
            if not reason:
                raise ValueError(f"{path}: pattern {line!r} before any [reason] line")
            r.rules.append((glob_to_re(line), line, reason))
        return r

    def reason(self, key: str) -> str | None:
        for rx, _, why in self.rules:
            if rx.match(key):
                return why
        return None

    def not_run(self, prefix: str) -> list[str]:
        """Exact keys under a reason starting with "not run" that start with prefix."""
        return [pat for _, pat, why in self.rules
                if why.startswith("not run") and pat.startswith(prefix)]


def read_list(path: Path) -> tuple[list[str], dict[str, str]]:
    """Keys of a must-pass list (one per line) and its `# name: value` header fields."""
    keys, meta = [], {}
    if not path.exists():
        return keys, meta
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            m = re.match(r"#\s*([\w-]+):\s*(.*)", line)
            if m:
                meta[m.group(1)] = m.group(2).strip()
        elif line.strip():
            keys.append(line.rstrip("\n"))
    return keys, meta


def read_results(path: Path) -> dict[str, str]:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line and not line.startswith("#") and " : " in line:
                k, s = line.rsplit(" : ", 1)
                out[k] = s
    return out


def write_results(path: Path, results: list[FileResult], header: list[str]) -> None:
    lines = [f"# {h}" for h in header]
    for r in results:
        lines += [f"{k} : {s}" for k, s in r.tests.items()]
    path.write_text("\n".join(lines) + "\n")


def write_messages(path: Path, results: list[FileResult]) -> None:
    """Each test that did not pass, with its status and failure message (two lines)."""
    lines = []
    for r in results:
        for k, s in r.tests.items():
            if s not in PASS and s not in ("skipped", "xfailed"):
                lines += [f"{k} : {s}", f"    {r.messages.get(k, '')}"]
    path.write_text("\n".join(lines) + "\n")


def redispy_version() -> str:
    p = REDISPY_SRC / ".debian-version"
    return p.read_text().strip() if p.exists() else "unknown"


# ---------------------------------------------------------------- report


def file_of(key: str) -> str:
    if key.startswith("tcl "):
        return key[4:].split(" :: ", 1)[0]
    return key[3:].split("::", 1)[0]


def report(pion: list[FileResult], redis: dict[str, str], must: list[str], flaky: Rules,
           scope: Rules, enforce_py: bool) -> tuple[list[str], list[str], list[str]]:
    """Prints the per-file table. Returns (violations, flaky flips, remaining work)."""
    pion_status = {k: s for r in pion for k, s in r.tests.items()}
    must_by_file: dict[str, list[str]] = {}
    for k in must:
        must_by_file.setdefault(file_of(k), []).append(k)
    violations, flips = [], []
    for k in must:
        if k.startswith("py ") and not enforce_py:
            continue
        if file_of(k) not in {r.name for r in pion}:
            continue  # a file not run this time (--files)
        s = pion_status.get(k, "missing")
        if s in PASS:
            continue
        if flaky.reason(k):
            flips.append(f"{k} : {s}")
        else:
            violations.append(f"{k} : {s}")
    remaining = []
    for k, s in redis.items():
        if s in PASS and pion_status.get(k) not in PASS and file_of(k) in {r.name for r in pion}:
            if not scope.reason(k) and not flaky.reason(k):
                remaining.append(k)

    print()
    print(f"{'file':24} {'pion pass/fail/err':>19} {'Redis pass/fail/err':>20} "
          f"{'must-pass':>10} {'out-of-scope':>12} {'remaining':>9} {'secs':>5}")
    tot = [0] * 9
    for r in pion:
        bad = {"fail", "failed", "hang"}
        err = {"err", "error"}
        rk = [k for k in redis if file_of(k) == r.name]
        rp = sum(redis[k] in PASS for k in rk)
        rf = sum(redis[k] in bad for k in rk)
        re_ = sum(redis[k] in err for k in rk)
        mine = must_by_file.get(r.name, [])
        held = sum(pion_status.get(k) in PASS for k in mine)
        oos = sum(1 for k in rk if redis[k] in PASS and pion_status.get(k) not in PASS
                  and scope.reason(k))
        rem = sum(1 for k in remaining if file_of(k) == r.name)
        p, f, e = r.count(PASS), r.count(bad), r.count(err)
        redis_col = f"{rp}/{rf}/{re_}" if rk else "-"
        print(f"{r.suite + ' ' + r.name:24} {f'{p}/{f}/{e}':>19} {redis_col:>20} "
              f"{f'{held}/{len(mine)}':>10} {oos:>12} {rem:>9} {r.seconds:5.0f}")
        for i, v in enumerate([p, f, e, rp, rf, re_, held, len(mine), rem]):
            tot[i] += v
    print(f"{'total':24} {f'{tot[0]}/{tot[1]}/{tot[2]}':>19} {f'{tot[3]}/{tot[4]}/{tot[5]}':>20} "
          f"{f'{tot[6]}/{tot[7]}':>10} {'':>12} {tot[8]:>9}")
    return violations, flips, remaining


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_true",
                      help="rewrite must_pass.txt and remaining.txt from this run")
    mode.add_argument("--baseline", action="store_true",
                      help="run Debian's redis-server first and rewrite redis_results.txt")
    ap.add_argument("--bin", default=str(ROOT / "build" / "release" / "bin" / "pion-server"),
                    help="the pion-server binary (default: the release build)")
    ap.add_argument("--files", default="",
                    help="comma-separated subset, e.g. unit/expire,test_pipeline.py")
    ap.add_argument("--strict", action="store_true",
                    help="skip tests tagged external:skip, as Redis's own rule does "
                         "(for exploring only; the lists are made in relaxed mode)")
    args = ap.parse_args()

    for need in (REDIS_SRC / "tests" / "test_helper.tcl", REDISPY_SRC / "tests"):
        if not need.exists():
            print(f"conformance: {need} missing: run scripts/conformance_sources.sh", file=sys.stderr)
            return 2
    pion_bin = Path(args.bin)
    if not pion_bin.is_file():
        print(f"conformance: no pion-server at {pion_bin}", file=sys.stderr)
        return 2
    only = [f for f in args.files.split(",") if f]
    tcl_files = [f for f in TCL_FILES if not only or f in only]
    py_files = [f for f in PY_FILES if not only or f in only]
    unknown = set(only) - set(TCL_FILES) - set(PY_FILES)
    if unknown:
        print(f"conformance: unknown files {sorted(unknown)}", file=sys.stderr)
        return 2

    BUILD.mkdir(parents=True, exist_ok=True)
    harness = tcl_harness.prepare(REDIS_SRC, BUILD / "tcl", relaxed=not args.strict)
    logdir = BUILD / "logs"
    shutil.rmtree(logdir, ignore_errors=True)
    logdir.mkdir()
    work = Path(tempfile.mkdtemp(prefix="pion-conformance-"))
    t_start = time.monotonic()
    flaky = Rules.load(HERE / "flaky.txt")
    scope = Rules.load(HERE / "out_of_scope.txt")

    def run_all(kind: str) -> list[FileResult]:
        out = []
        for f in tcl_files:
            r = run_tcl_file(kind, f, harness, pion_bin, work, logdir,
                             flaky.not_run(f"tcl {f} :: "))
            print(f"  {kind:5} tcl {f:22} {r.count(PASS):4} pass {len(r.tests) - r.count(PASS):4} "
                  f"not  {r.seconds:5.1f} s" + note(r), flush=True)
            out.append(r)
        for f in py_files:
            r = run_py_file(kind, f, pion_bin, work, logdir, flaky.not_run(f"py {f}::"))
            print(f"  {kind:5} py  {f:22} {r.count(PASS):4} pass {len(r.tests) - r.count(PASS):4} "
                  f"not  {r.seconds:5.1f} s" + note(r), flush=True)
            out.append(r)
        return out

    def note(r: FileResult) -> str:
        return "".join(f"  hang: {k}" for k in r.hangs) + "".join(f"  {p}" for p in r.problems)

    pyver = redispy_version()
    redis_path = HERE / "redis_results.txt"
    if args.baseline:
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True)
        print(f"conformance: Debian redis-server ({version.stdout.strip()})")
        redis_runs = run_all("redis")
        if not only:
            write_results(redis_path, redis_runs, [
                "Results of Debian's redis-server 7.0.15 (--save '' --appendonly no) on the",
                "conformance files, relaxed external mode. Generated by",
                "`tests/conformance/run_conformance.py --baseline`; do not edit.",
                f"redis-py: {pyver}"])
        redis = {k: s for r in redis_runs for k, s in r.tests.items()}
    else:
        redis = read_results(redis_path)

    print(f"conformance: pion-server {pion_bin} (redis-py tests {pyver})")
    pion = run_all("pion")
    write_results(BUILD / "results-pion.txt", pion, [f"redis-py: {pyver}"])
    write_messages(BUILD / "failures-pion.txt", pion)
    if args.baseline:
        write_results(BUILD / "results-redis.txt", redis_runs, [f"redis-py: {pyver}"])
        write_messages(BUILD / "failures-redis.txt", redis_runs)

    must_path = HERE / "must_pass.txt"
    must, meta = read_list(must_path)
    enforce_py = meta.get("redis-py", pyver) == pyver
    violations, flips, remaining = report(pion, redis, must, flaky, scope, enforce_py)
    problems = [f"{r.suite} {r.name}: {p}" for r in pion for p in r.problems]
    elapsed = time.monotonic() - t_start
    messages = {k: m for r in pion for k, m in r.messages.items()}
    status = {k: s for r in pion for k, s in r.tests.items()}
    (BUILD / "remaining.txt").write_text("".join(
        f"{k} : {status.get(k, 'missing')}\n    {messages.get(k, '')}\n" for k in remaining))

    if args.update and not only:
        passing = [k for r in pion for k, s in r.tests.items()
                   if s in PASS and not flaky.reason(k)]
        must_path.write_text(
            "# Tests pion passes and must keep passing: `make test-conformance` fails when one\n"
            "# does not. Generated by `tests/conformance/run_conformance.py --update`; do not\n"
            "# edit by hand (flaky.txt takes out what flips). tests/conformance/README.md.\n"
            f"# redis-py: {pyver}\n" + "".join(k + "\n" for k in passing))
        (HERE / "remaining.txt").write_text(
            "# Tests that pass on Redis 7.0.15 and not (yet) on pion, less out_of_scope.txt:\n"
            "# the work list. Generated by `run_conformance.py --update` or `--baseline`.\n"
            f"# redis-py: {pyver}\n" + "".join(f"{k} : {status.get(k, 'missing')}\n"
                                                for k in remaining))
        print(f"conformance: wrote {must_path} ({len(passing)} tests) and remaining.txt "
              f"({len(remaining)})")
    elif args.baseline and not only:
        (HERE / "remaining.txt").write_text(
            "# Tests that pass on Redis 7.0.15 and not (yet) on pion, less out_of_scope.txt:\n"
            "# the work list. Generated by `run_conformance.py --update` or `--baseline`.\n"
            f"# redis-py: {pyver}\n" + "".join(f"{k} : {status.get(k, 'missing')}\n"
                                                for k in remaining))

    print()
    if not enforce_py:
        print(f"conformance: WARNING: must_pass.txt's redis-py lines were made with "
              f"{meta.get('redis-py')}, this run has {pyver}: they are reported, not enforced; "
              f"run --update")
    for f in flips:
        print(f"conformance: flaky (not enforced): {f}")
    for r in pion:
        for k in r.hangs:
            print(f"conformance: hang (the server still answered and stopped): {k}")
    for p in problems:
        print(f"conformance: PROBLEM {p}")
    shown = violations[:60]
    for v in shown:
        print(f"conformance: REGRESSION {v}")
    if len(violations) > len(shown):
        print(f"conformance: ... and {len(violations) - len(shown)} more regressions "
              f"(build/conformance/results-pion.txt)")
    print(f"conformance: {len(remaining)} tests pass on Redis and not on pion outside "
          f"out_of_scope.txt (build/conformance/remaining.txt)")
    print(f"conformance: results in {BUILD / 'results-pion.txt'}, logs in {logdir}; "
          f"{elapsed:.0f} s")
    shutil.rmtree(work, ignore_errors=True)
    failed = bool(problems) or (bool(violations) and not args.update)
    ran = {r.name for r in pion}
    checked = [k for k in must if file_of(k) in ran and (enforce_py or not k.startswith("py "))]
    print(f"conformance: {'FAILED' if failed else 'OK'}: {len(checked) - len(violations)} of "
          f"{len(checked)} must-pass tests pass; {len(problems)} server problems (crash, "
          f"server hang, wall time)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
