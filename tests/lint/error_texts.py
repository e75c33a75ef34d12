#!/usr/bin/python3
"""Fails when an error reply text is spelled outside the error tables.

Every client-facing error text lives in one of two tables:
  src/kvproto/errors.h / errors.cc  (the command layer's table, in the protocol
                                     library pion-server and the Redis module link)
  src/net/resp_errors.h             (the transport's own lines; net must not
                                     include the command layer's headers)
This check scans every .cc/.h file under src/ (test files and testing/ helpers
excepted) for a string literal that starts with "ERR " or "-ERR " and names
each one found, with where the text must go. Comments are skipped.

Below the command layer a failure is a code plus a reason (base/status.h): in
src/store, src/attend and src/quant every Status that can reach a client must
carry a reason enum value, so that the table words it and its message stays a
log line. There the check refuses the message-only forms: the factories
Status::NotFound / InvalidArgument / NotSupported / Busy / IOError / Loading,
OutOfBudget with a message (OutOfBudget("") is the plain -OOM line), and
Status(Code::kX, <message>) without a Reason. Allowed: OK(), WrongType(),
OutOfBudget(""), Corruption(...) (replay and checks: logs, never a reply).

Usage: error_texts.py <repository root>   (CTest: error_texts_test, label unit)
"""
import os
import re
import sys

TABLES = {
    "src/kvproto/errors.h",
    "src/kvproto/errors.cc",
    "src/net/resp_errors.h",
}
# A string literal (with escapes); a raw string R"(...)" is read as one too.
LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')
BAD = re.compile(r'^"-?ERR ')


def code_only(text):
    """`text` with comments blanked (newlines kept), string literals intact."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Directories whose failures must carry a reason (see the docstring).
REASONED = ("src/store/", "src/attend/", "src/quant/")
MESSAGE_ONLY = [
    re.compile(r"\bStatus::(?:NotFound|InvalidArgument|NotSupported|Busy|IOError|Loading)\s*\("),
    re.compile(r'\bStatus::OutOfBudget\s*\((?!\s*""\s*\))'),
    re.compile(r"\bStatus(?:\s+\w+)?\s*[({]\s*Code::k\w+\s*,\s*(?!\s*Reason::|\s*\w+::Reason::)"),
]


def message_only(code):
    """(line, text) of each message-only Status construction in `code`."""
    out = []
    for pat in MESSAGE_ONLY:
        for m in pat.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            out.append((line, m.group(0).strip()))
    return sorted(out)


def skipped(rel):
    name = os.path.basename(rel)
    return (rel in TABLES or name.endswith("_test.cc") or "/testing/" in rel)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    found = []
    unreasoned = []
    for d, _, files in os.walk(os.path.join(root, "src")):
        for f in sorted(files):
            if not f.endswith((".cc", ".h")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if skipped(rel):
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                code = code_only(fh.read())
            for lineno, line in enumerate(code.split("\n"), 1):
                for m in LITERAL.finditer(line):
                    if BAD.match(m.group(0)):
                        found.append("%s:%d: %s" % (rel, lineno, m.group(0)))
            if rel.startswith(REASONED):
                for lineno, text in message_only(code):
                    unreasoned.append("%s:%d: %s" % (rel, lineno, text))
    if unreasoned:
        print("Status without a reason in store/attend/quant (its message would reach a reply):")
        for f in unreasoned:
            print("  " + f)
        print("Give the failure a value of the directory's Reason enum (store/reason.h, "
              "attend/reason.h, quant/reason.h) and its fields: Status(Code::kX, Reason::kY, "
              "{fields}, \"log message\"), and word it in src/kvproto/errors.cc "
              "(StatusToError). CONTRIBUTING.md, \"Add an error\".")
    if found:
        print("Error reply texts outside the error tables:")
        for f in found:
            print("  " + f)
        print("Move each text into src/kvproto/errors.h (a constant kErr...) or "
              "errors.cc (a function when the text quotes the request), and use it from "
              "there; the transport's own lines (src/net) go into src/net/resp_errors.h. "
              "CONTRIBUTING.md, \"Add a command\".")
        return 1
    if unreasoned:
        return 1
    print("ok: no \"ERR ...\" literal outside the error tables; store/attend/quant failures "
          "carry reasons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
