"""tools/docs_links.py (the docs_links CTest) on a small made-up tree: it accepts what
resolves and names every dangling citation."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "docs_links.py"


def run(tree: Path) -> tuple[int, list[str]]:
    p = subprocess.run([sys.executable, str(TOOL), str(tree)], capture_output=True, text=True)
    return p.returncode, p.stdout.splitlines()


def make(tmp_path: Path, code: str) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "docs" / "fmt.md").write_text(
        "# Format\n\n## 1. Files\n\n## 5a. Warm slots\n\n### int8 (§2.3)\n\n"
        "**Locks.** Four levels.\n\nSee §1 and §5a.\n")
    (tmp_path / "src" / "x.h").write_text(code)
    return tmp_path


def test_good_citations_pass(tmp_path):
    rc, out = run(make(tmp_path, '// docs/fmt.md §1, §5a and §2.3; fmt.md "Files", "Locks"\n'
                                 '// [f](../docs/fmt.md#1-files), and docs/fmt.md\n// §1 again\n'))
    assert rc == 0, out


def test_dangling_citations_fail(tmp_path):
    rc, out = run(make(tmp_path, '// absent.md §3\n// docs/fmt.md §9\n'
                                 '// docs/fmt.md "Errors"\n// docs/fmt.md#nope\n// see §4\n'
                                 '// docs/fmt.md,\n// "Not here"\n'))
    assert rc == 1
    text = "\n".join(out)
    for want in ("x.h:1: absent.md: no such file", "x.h:2: docs/fmt.md §9: no such section",
                 'x.h:3: docs/fmt.md "Errors": no such section', "x.h:4: docs/fmt.md#nope",
                 "x.h:5: § without a document name", 'x.h:6: docs/fmt.md "Not here"'):
        assert want in text, (want, out)
