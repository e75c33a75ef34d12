#!/usr/bin/python3
"""Fails on a dangling documentation reference (the `docs_links` CTest entry).

The repository stands alone: every `*.md` file named in src/, python/, bench/,
tests/, tools/, examples/, docs/ and the top-level Markdown files must exist in
it, and every section cited next to such a name must be one of its headings:

* ``wal_format.md §6`` (also ``§2.1``, ``§5a``, ranges ``§1-§3`` and lists
  ``§4-§6, §8``): a heading numbered ``6.`` or labelled ``(§6 ...)``;
* ``ARCHITECTURE.md "Store", "Locks"``: a heading or a bold paragraph lead
  (``**Locks.**``) that starts with the quoted words;
* ``[text](protocol.md#v-store)``: a heading whose GitHub anchor is ``v-store``.

A bare ``§N`` inside a Markdown file refers to that file. A name is resolved
relative to the citing file, to the repository root and to docs/ (a bare name
may be any Markdown file of the repository with that name). Generated benchmark
records (bench/results) and URLs are not checked.

Usage: docs_links.py [REPO_ROOT]   (prints one line per dangling reference)
"""
from __future__ import annotations

import os
import re
import sys

SCAN_DIRS = ("src", "python", "bench", "tests", "tools", "examples", "docs", "scripts", "cmake")
SCAN_TOP = ("README.md", "CONTRIBUTING.md", "CMakeLists.txt", "Makefile", "pion.conf")
SKIP_DIRS = {"results", "__pycache__", "corpus", "testdata", ".git", "build"}
TEXT_EXT = {".h", ".cc", ".c", ".py", ".md", ".txt", ".cmake", ".sh", ".conf", ".ini",
            ".toml", ".json", ".cfg"}

MD_NAME = re.compile(r"(?<![\w./*<>%-])((?:\.{1,2}/|[\w-]+/)*\w[\w.-]*\.md)(#[\w-]+)?\b")
URL = re.compile(r"\w+://\S+")
SECTION = r"§\s?\d+[a-z]?(?:\.\d+)*"
# After a name: optional ", " then a § chain or a quoted chain.
SECT_CHAIN = re.compile(r"^\)?,?\s*((?:" + SECTION + r")(?:\s*(?:[-–,/]|and)\s*§?\s?\d+[a-z]?(?:\.\d+)*)*)")
QUOTE_CHAIN = re.compile(r'^\)?,?\s*("[^"\n]{2,80}"(?:\s*[,/]\s*"[^"\n]{2,80}")*)')
CONTINUATION = re.compile(r"^\s*(?://+|#+|\*|--)?\s*")
BARE_SECT = re.compile(r"(?<![\w.])§\s?(\d+[a-z]?(?:\.\d+)*)")


def repo_files(root: str) -> list[str]:
    out = [os.path.join(root, t) for t in SCAN_TOP if os.path.exists(os.path.join(root, t))]
    for d in SCAN_DIRS:
        for base, dirs, files in os.walk(os.path.join(root, d)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
            for f in sorted(files):
                if os.path.splitext(f)[1] in TEXT_EXT or f == "CMakeLists.txt":
                    out.append(os.path.join(base, f))
    return out


def all_markdown(root: str) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = {}
    for base, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in ("build", "__pycache__") and not x.startswith(".")]
        for f in files:
            if f.endswith(".md"):
                by_name.setdefault(f, []).append(os.path.join(base, f))
    return by_name


class Doc:
    """The headings (and bold paragraph leads) of one Markdown file."""

    def __init__(self, path: str):
        self.headings: list[str] = []
        self.leads: list[str] = []
        in_code = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("```"):
                    in_code = not in_code
                    continue
                if in_code:
                    continue
                m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    self.headings.append(m.group(1))
                for b in re.finditer(r"\*\*([^*]+)\*\*", line):
                    self.leads.append(b.group(1))

    def has_number(self, num: str) -> bool:
        for h in self.headings:
            if re.match(re.escape(num) + r"[.\s]", h + " ") or re.search(
                    "§" + re.escape(num) + r"(?![\d.]*\d)", h):
                return True
        return False

    def has_title(self, title: str) -> bool:
        t = title.lower().rstrip(".")
        for h in self.headings + self.leads:
            h = h.lower().replace("`", "")
            if h.startswith(t.replace("`", "")) or re.sub(r"^\d+[a-z]?\.\s*", "", h).startswith(t):
                return True
        return False

    def has_anchor(self, anchor: str) -> bool:
        for h in self.headings:
            slug = re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
            if slug == anchor:
                return True
        return False


def main() -> int:
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    markdown = all_markdown(root)
    docs: dict[str, Doc] = {}
    errors: list[str] = []

    def resolve(src: str, name: str) -> str | None:
        cands = [os.path.join(os.path.dirname(src), name), os.path.join(root, name),
                 os.path.join(root, "docs", name)]
        for c in cands:
            if os.path.isfile(c):
                return os.path.normpath(c)
        if "/" not in name and name in markdown:
            return markdown[name][0]
        return None

    def doc(path: str) -> Doc:
        if path not in docs:
            docs[path] = Doc(path)
        return docs[path]

    for path in repo_files(root):
        rel = os.path.relpath(path, root)
        if os.path.basename(rel) in ("docs_links.py", "test_docs_links.py"):
            continue  # the tool and its self-test: made-up examples
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        lines = text.splitlines()
        continued = False  # the previous line ended with a name whose § starts this line
        for lineno, line in enumerate(lines, 1):
            where = f"{rel}:{lineno}"
            clean = URL.sub(" ", line)
            # A citation may go on on the next line (after its comment marker).
            nxt = lines[lineno] if lineno < len(lines) else ""
            nxt = CONTINUATION.sub("", URL.sub(" ", nxt), count=1)
            named_spans = []
            if continued:
                lead = CONTINUATION.match(clean)
                cm = SECT_CHAIN.match(clean[lead.end():])
                if cm:
                    named_spans.append((lead.end(), lead.end() + cm.end()))
            continued = False
            for m in MD_NAME.finditer(clean):
                name, anchor = m.group(1), m.group(2)
                target = resolve(path, name)
                if target is None:
                    errors.append(f"{where}: {name}: no such file in the repository")
                    continue
                rest = clean[m.end():]
                if not re.search(r'[^\s,(]', rest) or re.match(r'^\)?(?:,\s*|\s+)"[^"]*$', rest):
                    continued = not rest.strip(" ,(")
                    rest = rest.rstrip() + " " + nxt
                if anchor and not doc(target).has_anchor(anchor[1:]):
                    errors.append(f"{where}: {name}{anchor}: no such heading")
                sm = SECT_CHAIN.match(rest)
                if sm:
                    named_spans.append((m.end(), m.end() + sm.end()))
                    for num in re.findall(r"\d+[a-z]?(?:\.\d+)*", sm.group(1)):
                        if not doc(target).has_number(num):
                            errors.append(f"{where}: {name} §{num}: no such section")
                qm = QUOTE_CHAIN.match(rest)
                if qm:
                    for title in re.findall(r'"([^"]+)"', qm.group(1)):
                        if not doc(target).has_title(title):
                            errors.append(f'{where}: {name} "{title}": no such section')
            if path.endswith(".md"):
                for b in BARE_SECT.finditer(clean):
                    if any(s <= b.start() < e for s, e in named_spans):
                        continue
                    if not doc(path).has_number(b.group(1)):
                        errors.append(f"{where}: §{b.group(1)}: no such section in this file")
            elif "§" in clean and not named_spans and "ARCHITECTURE" not in clean:
                # A § in code must name its document on the same line.
                errors.append(f"{where}: § without a document name")
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} dangling documentation reference(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
