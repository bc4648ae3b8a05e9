#!/usr/bin/env python3
"""Checks that a regrouping of docs/RESULTS.md moved sections and lost nothing.

    scripts/check-results-moves.py [--before REV] [--after FILE]

Compares docs/RESULTS.md at git revision REV (default HEAD) with FILE
(default docs/RESULTS.md in the working tree) and fails (exit 1) unless:

 1. the sorted multiset of non-heading lines is the same before and after
    (blank lines and the table of contents between `<!-- toc -->` and
    `<!-- /toc -->` are left out; a line inside a ``` block is never a
    heading), so text was moved, never edited, added or dropped;
 2. every heading before is still a heading after, at any level, either
    unchanged or with a prefix added in front of it;
 3. every quoted "title" in docs/*.md and README.md that named a RESULTS
    heading before (a heading containing it) still names one after;
 4. every `(#anchor)` link in FILE names a heading of FILE (GitHub's
    anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2
    for repeats);
 5. no heading is more than one level below the heading before it.

Run it from the repository's top directory, once per move.
"""

import argparse
import collections
import glob
import re
import subprocess
import sys

TOC_BEGIN = '<!-- toc -->'
TOC_END = '<!-- /toc -->'
HEADING = re.compile(r'(#{1,6}) (.*)$')


def parse(text):
    """Returns (headings as (level, title, line number), body lines, toc lines)."""
    headings, body, toc = [], [], []
    fence = in_toc = False
    for number, line in enumerate(text.split('\n'), 1):
        if line.strip() == TOC_BEGIN:
            in_toc = True
            continue
        if line.strip() == TOC_END:
            in_toc = False
            continue
        if in_toc:
            toc.append(line)
            continue
        if line.startswith('```'):
            fence = not fence
        match = None if fence else HEADING.match(line)
        if match:
            headings.append((len(match.group(1)), match.group(2).strip(), number))
        elif line.strip():
            body.append(line)
    if fence or in_toc:
        raise SystemExit('unbalanced ``` block or table of contents')
    return headings, body, toc


def normalise(title):
    return ' '.join(title.replace('`', '').split())


def anchor(title):
    slug = re.sub(r'[^\w\- ]', '', title.strip().lower())
    return slug.replace(' ', '-')


def anchors(headings):
    seen = collections.Counter()
    result = set()
    for _, title, _ in headings:
        base = anchor(title)
        result.add(base if seen[base] == 0 else f'{base}-{seen[base]}')
        seen[base] += 1
    return result


def quoted_titles(path):
    """Quoted strings of each paragraph of a Markdown file (lines joined)."""
    with open(path, encoding='utf-8') as f:
        for paragraph in re.split(r'\n\s*\n', f.read()):
            for text in re.findall(r'"([^"\n]{4,300}?)"', ' '.join(paragraph.split('\n'))):
                yield normalise(text).rstrip('.,;:')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--before', default='HEAD', help='git revision of the old file')
    parser.add_argument('--after', default='docs/RESULTS.md', help='the regrouped file')
    args = parser.parse_args()

    old_text = subprocess.run(['git', 'show', f'{args.before}:docs/RESULTS.md'],
                              check=True, capture_output=True, text=True).stdout
    with open(args.after, encoding='utf-8') as f:
        new_text = f.read()
    old_heads, old_body, _ = parse(old_text)
    new_heads, new_body, new_toc = parse(new_text)
    errors = []

    lost = collections.Counter(old_body) - collections.Counter(new_body)
    added = collections.Counter(new_body) - collections.Counter(old_body)
    for line, count in sorted(lost.items()):
        errors.append(f'line lost ({count}x): {line[:120]}')
    for line, count in sorted(added.items()):
        errors.append(f'line added or edited ({count}x): {line[:120]}')

    new_titles = [normalise(t) for _, t, _ in new_heads]
    unmatched = list(new_titles)
    for _, title, number in old_heads:
        title = normalise(title)
        match = next((t for t in unmatched if t == title or t.endswith(' ' + title)
                      or t.endswith(': ' + title)), None)
        if match is None:
            errors.append(f'heading gone (line {number} before): {title[:120]}')
        else:
            unmatched.remove(match)

    old_titles = [normalise(t) for _, t, _ in old_heads]
    for path in sorted(glob.glob('docs/*.md')) + ['README.md']:
        text = set(quoted_titles(path))
        for quote in sorted(text):
            if any(quote in t for t in old_titles) and not any(quote in t for t in new_titles):
                errors.append(f'{path}: "{quote[:80]}" named a RESULTS heading, names none now')

    known = anchors(new_heads)
    for line in new_toc + new_body:
        for target in re.findall(r'\]\(#([^)\s]+)\)', line):
            if target not in known:
                errors.append(f'link to #{target}: no such heading')

    previous = 1
    for level, title, number in new_heads:
        if level > previous + 1:
            errors.append(f'line {number}: heading skips a level: {title[:80]}')
        previous = level

    for error in errors:
        print(error)
    print(f'{len(old_body)} lines moved, {len(old_heads)} headings kept, '
          f'{len(new_heads) - len(old_heads)} headings added, {len(new_toc)} lines of contents: '
          + ('FAILED' if errors else 'ok'))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
