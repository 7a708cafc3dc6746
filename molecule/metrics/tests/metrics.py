"""Reading node_exporter's scrape and the host's own figures inside the instance."""

from __future__ import annotations

import re

COLLECTOR = "/usr/local/libexec/ramdisk-provision/metrics/_metrics.py"
SCRAPE = ("import sys, urllib.request; "
          "sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:9100/metrics', timeout=20).read().decode())")
_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(host):
    """The whole text node_exporter serves on 127.0.0.1:9100/metrics."""
    return host.check_output("python3 -c %s", SCRAPE)


def collect(host):
    """Run the collector as its timer does (the service, with its sandbox), then scrape."""
    host.check_output("systemctl start ramdisk-metrics.service")
    return scrape(host)


def samples(text, prefix="ramdisk_"):
    """[(name, {labels}, value)] of the metrics whose names start with PREFIX."""
    out = []
    for line in text.splitlines():
        match = _SAMPLE_RE.match(line)
        if match and match.group(1).startswith(prefix):
            out.append((match.group(1), dict(_LABEL_RE.findall(match.group(2) or "")), float(match.group(3))))
    return out


def families(text, prefix="ramdisk_"):
    """The lines of TEXT (HELP, TYPE and samples) of the families whose names start with PREFIX."""
    keep = []
    for line in text.splitlines():
        name = line.split()[2] if line.startswith("# ") and len(line.split()) > 2 else line.split("{")[0].split(" ")[0]
        if name.startswith(prefix):
            keep.append(line)
    return "\n".join(keep) + "\n"


def value(found, name, **labels):
    """The one sample NAME whose labels include LABELS."""
    matches = [v for n, lab, v in found if n == name and all(lab.get(k) == w for k, w in labels.items())]
    assert len(matches) == 1, "%s%s: %d samples in %r" % (name, labels, len(matches), [s for s in found if s[0] == name])
    return matches[0]


def labels_of(found, name, **labels):
    (match,) = [lab for n, lab, _v in found if n == name and all(lab.get(k) == w for k, w in labels.items())]
    return match


def shell_vars(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
