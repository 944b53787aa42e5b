#!/usr/bin/env python3
"""Fails when a document's link, or a source comment's mention of a document, leads nowhere.

Checks, under ROOT:
  - every relative Markdown link `[text](path)` or `[text](path#anchor)` in the project's .md files:
    the path exists (relative to the linking file), and the anchor, where given, is a heading of
    the target (GitHub's rule: lower case, punctuation other than '-' and '_' dropped, spaces to
    '-', a repeated heading gets -1, -2, ...);
  - every mention of a `docs/....md` file in sources, scripts and documents: the file exists.
Links to other sites (scheme://, mailto:) are not followed.

Usage: tools/check_doc_links.py [ROOT]   (exit 1 and one line per broken link)
       tools/check_doc_links.py --self-test   (plants broken links in a scratch tree; must catch them)
"""
import functools
import os
import re
import sys
import tempfile

SKIP_DIRS = {".git", "third_party", "__pycache__", "node_modules"}
SOURCE_EXTS = (".md", ".cc", ".h", ".cu", ".cuh", ".py", ".sh", ".txt", ".cmake", ".toml", ".c")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOC_MENTION = re.compile(r"(?<![\w/.-])(docs/[\w./-]+?\.md)\b")
FENCE = re.compile(r"^\s*(```|~~~)")


def project_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames
                       if d not in SKIP_DIRS and not (rel == "." and (d.startswith("build") or d.startswith(".")))]
        for name in filenames:
            if name.endswith(SOURCE_EXTS) or name in ("CMakeLists.txt", "run"):
                yield os.path.join(dirpath, name)


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    """The anchors of the headings of a Markdown file (outside fenced blocks)."""
    found, seen, in_fence = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else "%s-%d" % (base, n))
    return found


def check(root):
    problems = []
    for path in project_files(root):
        rel = os.path.relpath(path, root)
        if rel == os.path.join("tools", "check_doc_links.py"):
            continue  # its own examples name documents that do not exist
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        in_fence = False
        for number, line in enumerate(lines, 1):
            for mention in DOC_MENTION.findall(line):
                if not os.path.isfile(os.path.join(root, mention)):
                    problems.append("%s:%d: names %s, which does not exist" % (rel, number, mention))
            if not path.endswith(".md"):
                continue
            if FENCE.match(line):
                in_fence = not in_fence
            if in_fence:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # another site
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(dest):
                    problems.append("%s:%d: link to %s: no such file" % (rel, number, target))
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    problems.append("%s:%d: link to %s: no such heading" % (rel, number, target))
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs", "part"))
        files = {
            "docs/a.md": "# A\n\n## Two words, and `code`\n\n## Two words, and `code`\n",
            "docs/part/b.md": "# B\n\n[ok](../a.md#two-words-and-code) [ok](../a.md#two-words-and-code-1)\n"
                              "[ok](#b) [ok](https://example.com/x.md)\n"
                              "[bad file](../nowhere.md) [bad heading](../a.md#three-words)\n"
                              "```\n[in a fence](../fenced.md)\n```\n",
            "src.cc": "// see docs/a.md and docs/part/b.md, not docs/gone.md\n",
        }
        for name, text in files.items():
            with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                f.write(text)
        got = check(root)
        want = ["docs/part/b.md:5: link to ../nowhere.md: no such file",
                "docs/part/b.md:5: link to ../a.md#three-words: no such heading",
                "src.cc:1: names docs/gone.md, which does not exist"]
        if sorted(got) != sorted(want):
            print("self-test: expected\n  %s\ngot\n  %s" % ("\n  ".join(want), "\n  ".join(got)))
            return 1
    print("self-test: the planted broken links were caught, the good ones passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
