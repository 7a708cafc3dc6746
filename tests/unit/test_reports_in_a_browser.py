# SPDX-License-Identifier: GPL-3.0-or-later
"""report.html, as a reader sees it: opened alone (no file beside it) in headless Chromium, then looked at.

The benchmark's and the survey's reports are written for real from the fixtures, moved into an empty
directory (so a chart that is not inlined cannot load), and screenshotted. The screenshot must show the
charts: their series are drawn in matplotlib's tab10 colours (less its grey), which nothing else on the page uses, so a
page whose images did not decode has none of those pixels. The same page with its images broken is the
control that shows the check can fail. Chromium comes with `make test`'s setup (scripts/bootstrap.sh --test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy
import pytest
from matplotlib import image as mpimage

from ansible_collections.ramdisk.provision.plugins.modules import bench_report
from ansible_collections.ramdisk.provision.plugins.modules import survey_report
from ansible_collections.ramdisk.provision.plugins.module_utils._survey import GIB, MIB

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
WIDTH, HEIGHT = 1280, 6000
# matplotlib's tab10 as 8-bit RGB, the colours of the charts' series, less its grey (text and borders are grey too).
TAB10 = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
         (227, 119, 194), (188, 189, 34), (23, 190, 207)]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def run_module(module, tmp_path, **args):
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", module.__name__, str(args_file)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    result = json.loads(proc.stdout)
    assert result.get("failed") is not True, result
    return result


def alone(html_path, tmp_path, name):
    """report.html copied into an empty directory of its own."""
    where = tmp_path / name
    where.mkdir()
    shutil.copy(html_path, where / "report.html")
    return where / "report.html"


def screenshot(html, tmp_path):
    """A headless Chromium screenshot of the page, as an RGB array of 8-bit values."""
    assert CHROMIUM, "chromium is not installed: make setup (scripts/bootstrap.sh --test) installs it"
    shot = tmp_path / (html.parent.name + ".png")
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--user-data-dir=%s" % (tmp_path / "chromium-profile"), "--window-size=%d,%d" % (WIDTH, HEIGHT),
                    "--screenshot=%s" % shot, html.as_uri()],
                   capture_output=True, text=True, timeout=120, check=True)
    pixels = mpimage.imread(str(shot))
    return numpy.rint(pixels[:, :, :3] * 255).astype(int)


def chart_pixels(pixels):
    """How many pixels are (within a little anti-aliasing) one of the charts' series colours."""
    found = numpy.zeros(pixels.shape[:2], dtype=bool)
    for colour in TAB10:
        found |= (numpy.abs(pixels - numpy.array(colour)).max(axis=2) <= 6)
    return int(found.sum())


def broken(html, tmp_path, name):
    """The same page with every inlined image's data spoiled: the control."""
    page = html.read_text()
    spoiled, count = re.subn(r'src="data:image/png;base64,[^"]+"', 'src="data:image/png;base64,AAAA"', page)
    assert count > 0, "the report has no inlined image to spoil"
    where = tmp_path / name
    where.mkdir()
    (where / "report.html").write_text(spoiled)
    return where / "report.html"


def look(html, tmp_path):
    pixels = screenshot(html, tmp_path)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    # Not a blank or an error page: text and table lines on a light background.
    assert (pixels.max(axis=2) < 100).sum() > 2000, "the page shows almost no text"
    return pixels


def benchmark_report(tmp_path, name):
    """The benchmark's report.html written for real from the run-rounds fixture, alone in a directory NAME."""
    run_dir = tmp_path / "run"
    shutil.copytree(os.path.join(FIXTURES, "run-rounds"), run_dir)
    run_module(bench_report, tmp_path, path=str(run_dir), groups={"lab-debian12": ["lab", "all"]})
    return alone(run_dir / "report.html", tmp_path, name)


@pytest.mark.skipif(sys.platform != "linux", reason="headless Chromium from Debian")
def test_the_benchmark_report_shows_its_charts_in_a_browser(tmp_path):
    html = benchmark_report(tmp_path, "bench")
    seen = chart_pixels(look(html, tmp_path))
    control = chart_pixels(look(broken(html, tmp_path, "bench-broken"), tmp_path))
    # The charts' series cover tens of thousands of pixels; the page without them shows none of their colours.
    assert seen > 20000, seen
    assert control < seen / 20, (seen, control)


@pytest.mark.skipif(sys.platform != "linux", reason="headless Chromium from Debian")
def test_the_survey_report_shows_its_charts_in_a_browser(tmp_path):
    def plan(tmp, total):
        return {
            "errors": [], "plan_warnings": [],
            "policy": {"entries": [{"path": "/tmp", "backend": "tmpfs"}],
                       "budget": {"limit": "80%", "limit_bytes": int(total * 0.8), "total_bytes": total // 2}},
            "tmpfs": [{"path": "/tmp", "action": "mount", "state": "mounted", "fstype": "tmpfs",
                       "options": ["size=50%"], "ram_bytes": total // 2}],
            "ramfs": [], "zram": [], "zram_swap": [], "brd": {},
            "ansible_facts": {"ramdisk": {
                "memory": {"total_bytes": total, "available_bytes": total // 2, "free_bytes": total // 4,
                           "shmem_bytes": 4096, "used_bytes": total // 2, "buff_cache_bytes": total // 4},
                "swap": {"total_bytes": GIB, "free_bytes": GIB, "devices": []},
                "paths": {"/tmp": {"usage_bytes": tmp, "inodes": 12, "complete": True}},
                "tmp_gate": {"usage_bytes": tmp, "complete": True, "tmp_is_ram_backed": False},
                "support": {"tmpfs": True, "ramfs": True, "zram": True, "brd": False},
                "mounts": [],
            }},
        }
    hosts = {"web%02d" % n: plan((n + 1) * 7 * MIB, (2 + n % 4) * GIB) for n in range(24)}
    hosts["big-tmp"] = plan(6 * GIB, 8 * GIB)
    out = tmp_path / "survey-run"
    result = run_module(survey_report, tmp_path, path=str(out), hosts=sorted(hosts), plans=json.dumps(hosts),
                        groups={name: ["all", "web" if name.startswith("web") else "batch"] for name in hosts})
    html = alone(result["report"], tmp_path, "survey")
    seen = chart_pixels(look(html, tmp_path))
    control = chart_pixels(look(broken(html, tmp_path, "survey-broken"), tmp_path))
    assert seen > 5000, seen
    assert control < seen / 20, (seen, control)


# The first screen: what a 1280x900 window shows before any scrolling.
FIRST_SCREEN = (1280, 900)
# Run in the page once it is laid out: for each sentence, the bottom edge (in CSS pixels from the page's top) of the
# smallest element that holds it, or null when none does; written into the page for --dump-dom to show.
WHERE_SCRIPT = """<script>
window.addEventListener("load", function () {
  var found = {};
  NEEDLES.forEach(function (needle) {
    var best = null;
    document.querySelectorAll("body *").forEach(function (el) {
      if (el.tagName !== "SCRIPT" && el.textContent.indexOf(needle) >= 0) { best = el; }
    });
    found[needle] = best ? best.getBoundingClientRect().bottom + window.scrollY : null;
  });
  var out = document.createElement("pre");
  out.id = "where-found";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""


def bottoms(html, tmp_path, needles):
    """{sentence: bottom edge in CSS pixels} of each of NEEDLES in the page as headless Chromium lays it out at
    FIRST_SCREEN (the deepest element that holds the sentence: querySelectorAll lists parents before children)."""
    assert CHROMIUM, "chromium is not installed: make setup (scripts/bootstrap.sh --test) installs it"
    page = html.read_text().replace("</body>", WHERE_SCRIPT.replace("NEEDLES", json.dumps(needles)) + "</body>")
    probe = html.parent / "probe.html"
    probe.write_text(page)
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--user-data-dir=%s" % (tmp_path / "chromium-profile"),
                           "--window-size=%d,%d" % FIRST_SCREEN, "--virtual-time-budget=5000", "--dump-dom",
                           probe.as_uri()], capture_output=True, text=True, timeout=120, check=True)
    found = re.search(r'<pre id="where-found">(.*?)</pre>', proc.stdout, re.S)
    assert found, "the page's script did not run: %s" % proc.stdout[-500:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.skipif(sys.platform != "linux", reason="headless Chromium from Debian")
def test_the_benchmark_reports_first_screen_says_what_ram_bought_on_each_host(tmp_path):
    html = benchmark_report(tmp_path, "bench-first")
    hosts = sorted(name for name in os.listdir(os.path.join(FIXTURES, "run-rounds")))
    needles = ["What RAM bought"] + ["Host %s: RAM" % host for host in hosts]
    found = bottoms(html, tmp_path, needles + ["RAM versus disk, per host"])
    for needle in needles:
        assert found[needle] is not None, "the page does not say %r: %s" % (needle, found)
        assert 0 < found[needle] <= FIRST_SCREEN[1], "%r ends %s px down, below the first screen" % (needle, found[needle])
    # The control, so that the check can fail: the table per host comes after the chart, below the first screen.
    assert found["RAM versus disk, per host"] > FIRST_SCREEN[1], found


@pytest.mark.skipif(sys.platform != "linux", reason="headless Chromium from Debian")
def test_the_survey_reports_first_screen_holds_both_verdicts(tmp_path):
    hosts = {}
    for n in range(12):
        total = (2 + n % 4) * GIB
        hosts["web%02d" % n] = {
            "errors": [], "plan_warnings": [], "policy": {"entries": [], "budget": {}},
            "tmpfs": [], "ramfs": [], "zram": [], "zram_swap": [], "brd": {},
            "ansible_facts": {"ramdisk": {
                "memory": {"total_bytes": total, "available_bytes": total // 2, "free_bytes": total // 4,
                           "shmem_bytes": 4096, "used_bytes": total // 2, "buff_cache_bytes": total // 4},
                "swap": {"total_bytes": 0, "free_bytes": 0, "devices": []},
                "paths": {"/tmp": {"usage_bytes": (n + 1) * 90 * MIB, "inodes": 12, "complete": True}},
                "tmp_gate": {"usage_bytes": (n + 1) * 90 * MIB, "complete": True, "tmp_is_ram_backed": False},
                "support": {"tmpfs": True, "ramfs": True, "zram": True, "brd": False}, "mounts": []}}}
    out = tmp_path / "survey-run"
    result = run_module(survey_report, tmp_path, path=str(out), hosts=sorted(hosts), plans=json.dumps(hosts),
                        groups={name: ["all"] for name in hosts})
    html = alone(result["report"], tmp_path, "survey-first")
    needles = ["fits in half of RAM on", "in available memory plus free swap on"]
    found = bottoms(html, tmp_path, needles)
    for needle in needles:
        assert found[needle] is not None, "the page does not say %r: %s" % (needle, found)
        assert 0 < found[needle] <= FIRST_SCREEN[1], "%r ends %s px down, below the first screen" % (needle, found[needle])
