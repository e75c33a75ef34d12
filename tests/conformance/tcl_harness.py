"""Prepares a working copy of Redis's Tcl test harness for an external server.

The copy is taken at run time from the extracted Debian source
(build/conformance/src/redis-7.0.15) into build/conformance/tcl, and these changes are
applied to it (the same for pion and for Redis, so their results compare):

- a results file: every test started, passed (ok), failed on an assertion (fail) or on
  an exception (err) is appended to $PION_CONFORMANCE_RESULTS as one tab-separated line
  (status, file, name, the failure's message), so nothing is scraped from the console;
- FUNCTION FLUSH before a block may fail (pion has no FUNCTION), not abort the file;
- a block whose set-up fails (FLUSHALL, or CONFIG SET of one of its overrides) counts
  as one error, its tests do not run, and the file goes on; the overrides are restored
  even when the block's body stopped on an exception;
- after a failed test the block's client reconnects, so a test that stopped inside
  MULTI or left replies unread does not fail the tests after it;
- relaxed mode (the default): tests tagged external:skip run too.

Each change is a textual replacement that must match exactly once; a harness that does
not look as expected stops the run with a clear message instead of running unpatched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

RECORD_PROCS = r'''

# --- pion conformance run: result records and recovery (tests/conformance) ---
set ::pion_block 0
proc pion_record {status name {msg ""}} {
    if {![info exists ::env(PION_CONFORMANCE_RESULTS)]} return
    set name [string map {"\n" " " "\t" " " "\r" " "} $name]
    set msg [string range [string map {"\n" " " "\t" " " "\r" " "} $msg] 0 300]
    set fd [open $::env(PION_CONFORMANCE_RESULTS) a]
    puts $fd "$status\t$::curfile\t$name\t$msg"
    close $fd
}
proc pion_block_failed {what error} {
    set name "(block $::pion_block: $what)"
    pion_record err $name $error
    lappend ::tests_failed [list $name $error]
    incr ::num_failed
    send_data_packet $::test_server_fd err "$name in $::curfile\n$error"
}
proc pion_reconnect {} {
    if {[llength $::servers] == 0} return
    catch {reconnect}
}
'''


class PatchError(RuntimeError):
    pass


def _replace_once(text: str, old: str, new: str, where: str) -> str:
    n = text.count(old)
    if n != 1:
        raise PatchError(f"{where}: expected one occurrence of {old.strip()[:60]!r}, found {n}")
    return text.replace(old, new)


SETUP_OLD = '''    r flushall
    r function flush

    # store overrides
    set saved_config {}
    foreach {param val} $overrides {
        dict set saved_config $param [lindex [r config get $param] 1]
        r config set $param $val

        # If we enable appendonly, wait for for rewrite to complete. This is
        # required for tests that begin with a bg* command which will fail if
        # the rewriteaof operation is not completed at this point.
        if {$param == "appendonly" && $val == "yes"} {
            waitForBgrewriteaof r
        }
    }
'''

SETUP_NEW = '''    incr ::pion_block
    set saved_config {}
    if {[catch {
        r flushall
        catch {r function flush}
        foreach {param val} $overrides {
            dict set saved_config $param [lindex [r config get $param] 1]
            r config set $param $val
            if {$param == "appendonly" && $val == "yes"} {
                waitForBgrewriteaof r
            }
        }
    } setup_error]} {
        pion_block_failed "set-up" $setup_error
        dict for {param val} $saved_config {
            catch {r config set $param $val}
        }
        set srv [lpop ::servers]
        if {[dict exists $srv "client"]} {
            catch {[dict get $srv "client"] close}
        }
        return
    }
'''

BODY_ERR_OLD = '''            set msg [string range $error 10 end]
            lappend details $msg
            lappend details $::errorInfo
            lappend ::tests_failed $details

            incr ::num_failed
            send_data_packet $::test_server_fd err [join $details "\\n"]
'''

BODY_ERR_NEW = '''            pion_record err "(block $::pion_block: stopped by an exception)" $error
            pion_reconnect
''' + BODY_ERR_OLD

RESTORE_OLD = '''    dict for {param val} $saved_config {
        r config set $param $val
    }
'''

RESTORE_NEW = '''    dict for {param val} $saved_config {
        if {[catch {r config set $param $val}]} {
            pion_reconnect
            catch {r config set $param $val}
        }
    }
'''

EXTERNAL_SKIP_OLD = '''    if {$::external && [lsearch $tags "external:skip"] >= 0} {'''
EXTERNAL_SKIP_NEW = '''    if {0 && $::external && [lsearch $tags "external:skip"] >= 0} {'''

TEST_START_OLD = '''    send_data_packet $::test_server_fd testing $name
'''
TEST_START_NEW = '''    pion_record start $name
    set pion_failed 0
''' + TEST_START_OLD

TEST_ERR_OLD = '''            incr ::num_failed
            send_data_packet $::test_server_fd err [join $details "\\n"]

            if {$::stop_on_failure} {'''
TEST_ERR_NEW = '''            pion_record [expr {$assertion ? "fail" : "err"}] $name $error
            set pion_failed 1
''' + TEST_ERR_OLD

TEST_OK_OLD = '''            send_data_packet $::test_server_fd ok $name $elapsed
'''
TEST_OK_NEW = '''            pion_record ok $name
''' + TEST_OK_OLD

TEST_MISMATCH_OLD = '''            set msg "Expected '$okpattern' to equal or match '$retval'"
'''
TEST_MISMATCH_NEW = TEST_MISMATCH_OLD + '''            pion_record fail $name $msg
            set pion_failed 1
'''

TEST_END_OLD = '''    if {$::traceleaks} {'''
TEST_END_NEW = '''    if {$::external && $pion_failed} {
        pion_reconnect
    }
''' + TEST_END_OLD


def prepare(redis_src: Path, dest: Path, relaxed: bool = True) -> Path:
    """Copies redis_src/tests into dest/tests (fresh) and patches it. Returns dest."""
    if not (redis_src / "tests" / "test_helper.tcl").is_file():
        raise PatchError(f"no Redis test suite in {redis_src}")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copytree(redis_src / "tests", dest / "tests", symlinks=True)
    (dest / "tests" / "tmp").mkdir(exist_ok=True)

    server = dest / "tests" / "support" / "server.tcl"
    text = server.read_text()
    text = _replace_once(text, SETUP_OLD, SETUP_NEW, "server.tcl set-up")
    text = _replace_once(text, BODY_ERR_OLD, BODY_ERR_NEW, "server.tcl block body")
    text = _replace_once(text, RESTORE_OLD, RESTORE_NEW, "server.tcl restore")
    if relaxed:
        text = _replace_once(text, EXTERNAL_SKIP_OLD, EXTERNAL_SKIP_NEW, "server.tcl external:skip")
    server.write_text(text)

    test = dest / "tests" / "support" / "test.tcl"
    text = test.read_text()
    text = _replace_once(text, TEST_START_OLD, TEST_START_NEW, "test.tcl start")
    text = _replace_once(text, TEST_ERR_OLD, TEST_ERR_NEW, "test.tcl error")
    text = _replace_once(text, TEST_OK_OLD, TEST_OK_NEW, "test.tcl ok")
    text = _replace_once(text, TEST_MISMATCH_OLD, TEST_MISMATCH_NEW, "test.tcl mismatch")
    text = _replace_once(text, TEST_END_OLD, TEST_END_NEW, "test.tcl end")
    test.write_text(text + RECORD_PROCS)
    return dest
