# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The reports the controller-side modules write (bench_report, survey_report): a list of sections,
rendered to Markdown and to one self-contained HTML page with the charts inline."""

from __future__ import annotations

import base64
import os
import traceback

__all__ = ["HAS_MATPLOTLIB", "MATPLOTLIB_IMPORT_ERROR", "plt", "ticker", "render_html", "render_markdown"]

# The charts' library, where the controller has it: both report modules draw with it, and fail with
# missing_required_lib when it is absent and charts are asked for.
MATPLOTLIB_IMPORT_ERROR = None
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker
except ImportError:
    HAS_MATPLOTLIB = False
    MATPLOTLIB_IMPORT_ERROR = traceback.format_exc()
    plt = ticker = None
else:
    HAS_MATPLOTLIB = True


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _h in headers) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |")
    return lines


def render_markdown(sections):
    lines = []
    for kind, payload in sections:
        if kind == "h1":
            lines += ["# " + payload, ""]
        elif kind == "h2":
            lines += ["## " + payload, ""]
        elif kind == "h3":
            lines += ["### " + payload, ""]
        elif kind == "list":
            lines += ["- " + item for item in payload] + [""]
        elif kind == "p":
            lines += [payload, ""]
        elif kind == "pre":
            # Text as a tool printed it (lsblk's tree): kept line for line, in a fence longer than any in it.
            fence = "```"
            while fence in payload:
                fence += "`"
            lines += [fence, payload, fence, ""]
        elif kind == "table":
            lines += _table(*payload) + [""]
        elif kind == "img":
            lines += ["![%s](%s)" % (payload[1], payload[0]), ""]
    return "\n".join(lines)


def _escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _inline_image(path, name):
    """The chart as a data: URI, so report.html is one self-contained file that can be mailed or
    attached; the file name when the chart cannot be read."""
    try:
        with open(os.path.join(path, name), "rb") as handle:
            return "data:image/png;base64," + base64.b64encode(handle.read()).decode("ascii")
    except (IOError, OSError):
        return name


def render_html(sections, title, path=None):
    body = []
    for kind, payload in sections:
        if kind in ("h1", "h2", "h3"):
            body.append("<%s>%s</%s>" % (kind, _escape(payload), kind))
        elif kind == "list":
            body.append("<ul>%s</ul>" % "".join("<li>%s</li>" % _escape(item) for item in payload))
        elif kind == "p":
            body.append("<p>%s</p>" % _escape(payload))
        elif kind == "pre":
            body.append("<pre>%s</pre>" % _escape(payload))
        elif kind == "table":
            headers, rows = payload
            body.append("<table><thead><tr>%s</tr></thead><tbody>" % "".join("<th>%s</th>" % _escape(h) for h in headers))
            for row in rows:
                body.append("<tr>%s</tr>" % "".join("<td>%s</td>" % _escape(cell) for cell in row))
            body.append("</tbody></table>")
        elif kind == "img":
            source = _inline_image(path, payload[0]) if path else payload[0]
            body.append('<figure><img src="%s" alt="%s" title="%s"><figcaption>%s</figcaption></figure>'
                        % (_escape(source), _escape(payload[1]), _escape(payload[0]), _escape(payload[1])))
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0;font-size:90%}"
             "td,th{border:1px solid #bbb;padding:3px 6px;text-align:left}th{background:#eee}"
             "img{max-width:100%}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head>"
            "<body>\n%s\n</body></html>\n" % (_escape(title), style, "\n".join(body)))
