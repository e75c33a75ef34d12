#!/usr/bin/python3
"""Fails when an error reply text is spelled outside the error tables.

Every client-facing error text lives in one of two tables:
  src/server/commands/errors.h / errors.cc  (the command layer; the Redis module
                                             compiles it too)
  src/net/resp_errors.h / resp_errors.cc    (the transport's own lines; net must
                                             not include server headers)
This check scans every .cc/.h file under src/ (test files and testing/ helpers
excepted) for a string literal that starts with "ERR " or "-ERR " and names
each one found, with where the text must go. Comments are skipped.

Usage: error_texts.py <repository root>   (CTest: error_texts_test, label unit)
"""
import os
import re
import sys

TABLES = {
    "src/server/commands/errors.h",
    "src/server/commands/errors.cc",
    "src/net/resp_errors.h",
    "src/net/resp_errors.cc",
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


def skipped(rel):
    name = os.path.basename(rel)
    return (rel in TABLES or name.endswith("_test.cc") or "/testing/" in rel)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    found = []
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
    if found:
        print("Error reply texts outside the error tables:")
        for f in found:
            print("  " + f)
        print("Move each text into src/server/commands/errors.h (a constant kErr...) or "
              "errors.cc (a function when the text quotes the request), and use it from "
              "there; the transport's own lines (src/net) go into src/net/resp_errors.h. "
              "CONTRIBUTING.md, \"Add a command\".")
        return 1
    print("ok: no \"ERR ...\" literal outside the error tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
