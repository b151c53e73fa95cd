#!/usr/bin/env python3
"""Check that every relative link and #anchor in the docs resolves (`make docs` runs it after `mdbook build`).

Usage: python3 scripts/check_links.py   (from anywhere; no dependencies beyond Python 3.8)

Checks README.md, BENCHMARKS.md, EVALUATION.md and docs/src/**/*.md:
  - inline links and images `[text](target)`, reference definitions `[ref]: target`, and that every full or
    collapsed reference `[text][ref]` / `[ref][]` is defined;
  - a relative target names a file or directory that exists; `path.md#anchor` and `#anchor` name a heading of
    that page (or an `id="…"`/`name="…"` in its HTML), slugged as both GitHub and mdBook slug headings;
  - in a book page, `{{#include path[:anchor]}}` is expanded first, as mdBook does (the anchor's
    `ANCHOR: name` … `ANCHOR_END: name` lines), so links in included text resolve from the including page;
    a link from a book page may not leave docs/src (it would break in the built book);
  - every page under docs/src is listed in SUMMARY.md.
Absolute URLs (`https:`, `mailto:`) are not fetched. Text in fenced code blocks and code spans is not read.
Exits 1 naming each file, line and link that does not resolve.
"""

import os
import re
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = os.path.join(ROOT, "docs", "src")
TOP = ["README.md", "BENCHMARKS.md", "EVALUATION.md"]

INCLUDE = re.compile(r"\{\{#include\s+([^}:\s]+)(?::([A-Za-z0-9_-]+))?\s*\}\}")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\[([^\[\]]*)\]")
DEFINITION = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HTML_ID = re.compile(r"""\b(?:id|name)\s*=\s*["']([^"']+)["']""")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def rel(path):
    return os.path.relpath(path, ROOT)


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def anchored(lines, anchor, path):
    """The lines between `ANCHOR: anchor` and `ANCHOR_END: anchor`, other anchor lines dropped (mdBook's rule)."""
    start = re.compile(r"ANCHOR:\s*" + re.escape(anchor) + r"\b")
    end = re.compile(r"ANCHOR_END:\s*" + re.escape(anchor) + r"\b")
    out, inside, found = [], False, False
    for number, line in lines:
        if not inside and start.search(line):
            inside = found = True
        elif inside and end.search(line):
            return out
        elif inside and "ANCHOR" not in line:
            out.append((number, line))
    if not found:
        raise LookupError(f"{rel(path)} has no `ANCHOR: {anchor}`")
    raise LookupError(f"{rel(path)}: `ANCHOR: {anchor}` has no `ANCHOR_END: {anchor}`")


def expand(path, errors, depth=0):
    """The page's lines as (origin file, line number, text), with mdBook's includes expanded."""
    out = []
    for number, line in enumerate(read_lines(path), 1):
        match = INCLUDE.search(line)
        if not match:
            out.append((path, number, line))
            continue
        target = os.path.normpath(os.path.join(os.path.dirname(path), match.group(1)))
        if not os.path.isfile(target):
            errors.append(f"{rel(path)}:{number}: include {match.group(1)}: no such file")
            continue
        if depth > 8:
            errors.append(f"{rel(path)}:{number}: include {match.group(1)}: includes nested too deep")
            continue
        included = expand(target, errors, depth + 1)
        if match.group(2):
            try:
                kept = anchored([(i, t) for i, (_, _, t) in enumerate(included)], match.group(2), target)
            except LookupError as e:
                errors.append(f"{rel(path)}:{number}: include: {e}")
                continue
            included = [included[i] for i, _ in kept]
        before, after = line[: match.start()], line[match.end():]
        if included and (before or after):
            first, last = included[0], included[-1]
            included[0] = (first[0], first[1], before + first[2])
            included[-1] = (last[0], last[1], last[2] + after)
        out.extend(included)
    return out


def prose(lines):
    """The lines outside fenced code blocks, code spans blanked."""
    out, fence = [], None
    for origin, number, text in lines:
        match = FENCE.match(text)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        out.append((origin, number, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)))
    return out


def heading_text(raw):
    text = CODE_SPAN.sub(lambda m: m.group(2).strip(), raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("*", "").strip()


def github_slug(text):
    kept = "".join(c for c in text.lower() if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def mdbook_slug(text):
    out = []
    for c in text:
        if c.isalnum() or c in "_-":
            out.append(c.lower() if c.isascii() else c)
        elif c.isspace():
            out.append("-")
    return "".join(out)


def anchors(lines):
    """The ids a page's headings get, as both GitHub and mdBook number repeated ones (`x`, `x-1`, …)."""
    github, mdbook, counts_g, counts_m = set(), set(), {}, {}
    fence = None
    for _, _, text in lines:
        match = FENCE.match(text)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        for found in HTML_ID.findall(text):
            github.add(found)
            mdbook.add(found)
        heading = HEADING.match(text)
        if not heading:
            continue
        title = heading_text(heading.group(2))
        for slug, ids, counts in ((github_slug(title), github, counts_g), (mdbook_slug(title), mdbook, counts_m)):
            n = counts.get(slug, 0)
            ids.add(slug if n == 0 else f"{slug}-{n}")
            counts[slug] = n + 1
    return github & mdbook


class Pages:
    def __init__(self, errors):
        self.errors = errors
        self.cache = {}

    def lines(self, path):
        if path not in self.cache:
            in_book = path.startswith(BOOK + os.sep)
            self.cache[path] = expand(path, self.errors) if in_book else [
                (path, i, t) for i, t in enumerate(read_lines(path), 1)]
        return self.cache[path]

    def anchors(self, path):
        return anchors(self.lines(path))


def check_page(path, pages, errors):
    lines = pages.lines(path)
    text_lines = prose(lines)
    in_book = path.startswith(BOOK + os.sep)
    definitions = {}
    for origin, number, text in text_lines:
        match = DEFINITION.match(text)
        if match:
            definitions[match.group(1).lower()] = (origin, number, match.group(2))

    def where(origin, number):
        return f"{rel(path)}:{number}" if origin == path else f"{rel(path)} (included {rel(origin)}:{number})"

    def check(origin, number, target):
        if EXTERNAL.match(target):
            return
        file_part, _, anchor = target.partition("#")
        if file_part:
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(resolved):
                errors.append(f"{where(origin, number)}: link {target}: no such file {rel(resolved)}")
                return
            if in_book and not resolved.startswith(BOOK + os.sep):
                errors.append(f"{where(origin, number)}: link {target}: leaves docs/src, so it breaks in the built book")
                return
        else:
            resolved = path
        if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
            if anchor not in pages.anchors(resolved):
                errors.append(f"{where(origin, number)}: link {target}: {rel(resolved)} has no heading #{anchor}")

    for origin, number, text in text_lines:
        definition = DEFINITION.match(text)
        if definition:
            check(origin, number, definition.group(2))
            continue
        for match in INLINE.finditer(text):
            check(origin, number, match.group(2))
        for match in REFERENCE.finditer(text):
            label = (match.group(2) or match.group(1)).lower()
            if label not in definitions:
                errors.append(f"{where(origin, number)}: reference [{label}] is not defined on the page")


def book_pages():
    pages = []
    for directory, _, files in os.walk(BOOK):
        pages += [os.path.join(directory, f) for f in files if f.endswith(".md")]
    return sorted(pages)


def check_summary(pages, errors):
    summary = os.path.join(BOOK, "SUMMARY.md")
    if not os.path.isfile(summary):
        errors.append("docs/src/SUMMARY.md is missing")
        return
    listed = {os.path.normpath(os.path.join(BOOK, m.group(2))) for m in INLINE.finditer("\n".join(read_lines(summary)))}
    for page in pages:
        if page != summary and page not in listed:
            errors.append(f"{rel(page)}: not in docs/src/SUMMARY.md, so the book does not render it")


def main():
    errors = []
    pages = book_pages()
    check_summary(pages, errors)
    cache = Pages(errors)
    files = [os.path.join(ROOT, f) for f in TOP] + pages
    for path in files:
        if os.path.isfile(path):
            check_page(path, cache, errors)
        else:
            errors.append(f"{rel(path)}: missing")
    for error in dict.fromkeys(errors):
        print(error, file=sys.stderr)
    if errors:
        print(f"check_links: {len(dict.fromkeys(errors))} broken in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check_links: {len(files)} files, every relative link and anchor resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
