# SPDX-License-Identifier: GPL-3.0-or-later
"""Which code each deprecation warning of a playbook run comes from; fails when any comes from our own collection.

ansible-core prints a deprecation as one line, "[DEPRECATION WARNING]: ...", that does not name the plugin whose
code raised it. With ANSIBLE_DISPLAY_TRACEBACK=deprecated (ansible-core 2.19 and later) a traceback follows it,
module side too (the frames inside AnsiballZ's payload carry ansible_collections/<namespace>/<name>/...): the
innermost frame under a collection names the collection responsible. Without a traceback (older cores), a warning
counts as ours when its text names our collection.

Usage: python scripts/test/deprecations.py [--own ramdisk.provision] LOG [LOG ...]
Prints one line per distinct warning with where it comes from and how often; exit 1 when any is our own.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys

HEADER = '[DEPRECATION WARNING]: '
FRAME = re.compile(r'^\s*File "([^"]+)", line \d+')
COLLECTION = re.compile(r'ansible_collections/([a-z0-9_]+)/([a-z0-9_]+)/')


def parse(lines):
    """Yields (message, source) for each deprecation warning in a log's lines; source is 'namespace.name',
    'ansible-core' (a traceback with no collection frame) or None (no traceback)."""
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith(HEADER):
            continue
        message = line[len(HEADER):].strip()
        # The traceback, when there is one: after blank lines, up to its "Message:" line.
        look = index
        while look < len(lines) and not lines[look].strip():
            look += 1
        source = None
        if look < len(lines) and lines[look].startswith('Traceback (most recent call last):'):
            source = 'ansible-core'
            index = look + 1
            while index < len(lines) and not lines[index].startswith(('Message:', HEADER)):
                frame = FRAME.match(lines[index])
                found = COLLECTION.search(frame.group(1)) if frame else None
                if found:
                    source = '%s.%s' % found.groups()
                index += 1
        yield message, source


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--own', default='ramdisk.provision', help='the collection whose warnings fail the run')
    parser.add_argument('logs', nargs='+')
    args = parser.parse_args(argv)
    seen = collections.Counter()
    for path in args.logs:
        with open(path, encoding='utf-8', errors='replace') as handle:
            for message, source in parse(handle.read().splitlines()):
                if source is None and args.own in message:
                    source = args.own
                seen[(source or 'unknown (no traceback)', message)] += 1
    own = sum(count for key, count in seen.items() if key[0] == args.own)
    for (source, message), count in sorted(seen.items()):
        print('deprecations: %s, %d time(s): %s' % (source, count, message))
    print('deprecations: %d warning(s), %d of them from %s' % (sum(seen.values()), own, args.own))
    return 1 if own else 0


if __name__ == '__main__':
    sys.exit(main())
