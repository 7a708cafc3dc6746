# SPDX-License-Identifier: GPL-3.0-or-later
"""_mount_steps: what the mount role still has to do for each planned mount, from what the host shows."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _mount_steps as ms
from ansible_collections.ramdisk.provision.plugins.module_utils._plan_core import mount_token

HEADER = "#\n# Ansible managed\n#\n"


def entry(**over):
    out = {"path": "/srv/cache", "state": "mounted", "fstype": "tmpfs", "src": "tmpfs", "action": "ok",
           "options": ["size=16M", "mode=0755", "nosuid", "nodev"], "mode": "0755", "owner": "root",
           "group": "root", "migrate": True, "persist": None,
           "record": {"path": "/srv/cache", "fstype": "tmpfs", "created_dir": True, "root_kept": {},
                      "size_bytes": 16777216}}
    out.update(over)
    return out


def settled(item):
    """What the host shows once the role has carried ITEM out: a second run has nothing to do."""
    files = {}
    if item["texts"]["seed"]:
        files[item["files"]["seed"]] = HEADER + item["texts"]["seed"]
    if item["texts"]["tmpfiles"]:
        files[item["files"]["tmpfiles"]] = HEADER + item["texts"]["tmpfiles"]
    if item["texts"]["dropin"]:
        files[ms.DROPIN] = HEADER + item["texts"]["dropin"]
    return {
        "fstab": "# comment\nUUID=x / ext4 defaults 0 1\n%s %s %s %s 0 0\n" % (
            item["src"], item["path"], item["fstype"], ",".join(item["options"])),
        "root": {"exists": True, "mode": "0755", "uid": 0, "gid": 0},
        "uid": 0, "gid": 0,
        "record": dict(item["record"]),
        "files": files,
        "links": [item["files"]["seed_link"]],
        "systemd": True,
    }


def test_token_is_the_planners_rule():
    for path in ("/srv/cache", "/srv/a-b", "/srv/a/b", "/var/lib/pg data"):
        assert ms.token(path) == mount_token(path)


def test_a_settled_mount_needs_nothing():
    item = ms.item(entry(), vendor_tmp=False, systemd=True)
    steps = ms.steps(item, settled(item))
    assert not any(steps.values()), steps


def test_a_new_mount_needs_every_step_that_applies():
    item = ms.item(entry(action="mount"), vendor_tmp=False, systemd=True)
    host = {"fstab": "", "root": None, "uid": 0, "gid": 0, "record": None, "files": {}, "links": [],
            "systemd": True}
    steps = ms.steps(item, host)
    assert steps == {"mkdir": True, "fstab": True, "dropin": False, "seed": True, "enable": True,
                     "unseed": False, "root": True, "record": True, "tmpfiles": False}


def test_each_difference_turns_on_its_own_step():
    item = ms.item(entry(), vendor_tmp=False, systemd=True)
    cases = {
        "fstab": lambda h: h.update(fstab=h["fstab"].replace("size=16M", "size=32M")),
        "root": lambda h: h["root"].update(mode="0700"),
        "record": lambda h: h.update(record=None),
        "seed": lambda h: h["files"].update({item["files"]["seed"]: HEADER + "[Unit]\n"}),
        "enable": lambda h: h.update(links=[]),
    }
    for name, change in cases.items():
        host = settled(item)
        change(host)
        on = set(key for key, value in ms.steps(item, host).items() if value)
        expected = {"seed", "enable"} if name == "seed" else {name}
        assert on == expected, (name, on)


def test_a_second_fstab_line_for_the_path_is_rewritten():
    item = ms.item(entry(), vendor_tmp=False, systemd=True)
    host = settled(item)
    host["fstab"] += "tmpfs /srv/cache tmpfs size=1M 0 0\n"
    assert ms.steps(item, host)["fstab"]


def test_owner_by_number_and_by_name_compare_as_numbers():
    item = ms.item(entry(owner="postgres", group="postgres"), vendor_tmp=False, systemd=True)
    host = settled(item)
    host.update(uid=111, gid=115)
    host["root"].update(uid=111, gid=115)
    assert not ms.steps(item, host)["root"]
    host["root"].update(gid=0)
    assert ms.steps(item, host)["root"]


def test_a_unit_left_from_an_earlier_migrate_goes():
    item = ms.item(entry(migrate=False), vendor_tmp=False, systemd=True)
    host = settled(item)
    assert not ms.steps(item, host)["unseed"]
    host["files"][item["files"]["seed"]] = HEADER + "old"
    assert ms.steps(item, host)["unseed"]


def test_written_needs_only_comments_above_the_text():
    assert ms.written(HEADER + "a\nb\n", "a\nb\n")
    assert ms.written("a\nb", "a\nb\n")
    assert not ms.written("x\na\nb\n", "a\nb\n")
    assert not ms.written(None, "a\n")


def test_tmp_under_the_vendor_unit_uses_the_dropin_not_fstab():
    item = ms.item(entry(path="/tmp", migrate=False, options=["size=1G", "mode=1777"]), vendor_tmp=True,
                   systemd=True)
    assert item["use_dropin"] and item["texts"]["dropin"].endswith("Options=size=1G,mode=1777\n")
    host = settled(item)
    host["fstab"] = ""
    steps = ms.steps(item, host)
    assert not steps["fstab"] and not steps["dropin"]
    host["files"][ms.DROPIN] = HEADER + "[Mount]\nOptions=size=2G\n"
    assert ms.steps(item, host)["dropin"]


def test_ramfs_gets_a_tmpfiles_line():
    item = ms.item(entry(fstype="ramfs", src="ramfs", options=["nosuid", "nodev"], mode="750", owner=None),
                   vendor_tmp=False, systemd=True)
    assert item["texts"]["tmpfiles"].endswith("z /srv/cache 0750 - root -\n")
    host = settled(item)
    assert not ms.steps(item, host)["tmpfiles"]
    del host["files"][item["files"]["tmpfiles"]]
    assert ms.steps(item, host)["tmpfiles"]


def test_absent_steps_follow_what_is_left():
    item = ms.item(entry(state="absent", action="unmount"), vendor_tmp=False, systemd=True)
    host = settled(item)
    assert ms.steps(item, host) == {"dropin": False, "fstab": True, "unseed": True, "tmpfiles": False,
                                    "record": True}
    gone = {"fstab": "UUID=x / ext4 defaults 0 1\n", "root": None, "record": None, "files": {}, "links": [],
            "systemd": True}
    assert not any(ms.steps(item, gone).values())


def test_an_entry_nobody_looked_at_gets_every_step_that_applies():
    zram = entry(path="/srv/z", fstype="ext4", src="/dev/zram1", migrate=False, record=None, steps=None)
    item = ms.item(zram, vendor_tmp=False, systemd=True, paths={"/srv/z": {"exists": True}})
    assert item["steps"] == {"mkdir": False, "fstab": True, "dropin": False, "seed": False, "enable": False,
                             "unseed": True, "root": True, "record": True, "tmpfiles": True}
    assert item["record"]["path"] == "/srv/z" and item["todo"]


def test_a_persisted_mount_is_always_handed_to_ramdisk_apply():
    # Its units and timer are checked there, which the plan does not read; a settled mount without persist is not.
    settled_steps = dict.fromkeys(ms.default_steps(ms.item(entry(), False, True), True, True), False)
    assert ms.item(entry(persist={"backing": "/var/lib/x"}, steps=settled_steps), False, True)["todo"]
    assert not ms.item(entry(steps=settled_steps), False, True)["todo"]


def test_a_zram_mount_that_goes_looks_for_its_boot_time_copy_unit():
    gone = entry(path="/srv/z", fstype="ext4", src="/dev/zram1", state="absent", action="unmount", record=None,
                 steps=None)
    assert ms.item(gone, vendor_tmp=False, systemd=True)["steps"]["unseed"]


ODD = "/srv/it's a \"b\" 100% $HOME\\x #c \u00e9"


@pytest.mark.parametrize("path, escaped", [
    # What systemd-escape --path prints (systemd 252).
    ("/", "-"), ("/srv/a b", "srv-a\\x20b"), ("/srv/.x/.y", "srv-.x-.y"), ("/.hidden", "\\x2ehidden"),
    ("/srv/a-b", "srv-a\\x2db"), ("/srv/caf\u00e9", "srv-caf\\xc3\\xa9"), ("/srv/a\\b", "srv-a\\x5cb"),
    ("/srv/p%q", "srv-p\\x25q"), ("/srv/x:y_z.1", "srv-x:y_z.1"), ("/srv//a/", "srv-a"),
])
def test_mount_unit_names_follow_systemd_escape(path, escaped):
    assert ms.escape_path(path) == escaped and ms.mount_unit(path) == escaped + ".mount"


@pytest.mark.parametrize("text, command, word", [
    ("/srv/cache", False, "/srv/cache"),
    ("/srv/a b", False, '"/srv/a b"'),
    ("/srv/100%", False, '"/srv/100%%"'),
    ("/srv/$x", False, '"/srv/$x"'),
    ("/srv/$x", True, '"/srv/$$x"'),
    ('/srv/a\\"b', True, '"/srv/a\\\\\\"b"'),
])
def test_unit_words_are_quoted_only_when_they_need_it(text, command, word):
    assert ms.unit_word(text, command) == word


def test_a_plain_path_keeps_the_seed_unit_it_had():
    text = ms.seed_unit(entry(), "/run/ramdisk-provision/lower/t")
    assert "RequiresMountsFor=/srv/cache\n" in text and '"' not in text
    assert "ExecStart=/usr/bin/cp -a --no-target-directory /run/ramdisk-provision/lower/t/cache/. /srv/cache\n" in text


def test_an_odd_path_is_quoted_in_the_seed_unit_and_the_tmpfiles_line():
    text = ms.seed_unit(entry(path=ODD, owner="www$"), "/run/ramdisk-provision/lower/t")
    assert 'RequiresMountsFor="/srv/it\'s a \\"b\\" 100%% $HOME\\\\x #c \u00e9"\n' in text
    assert "ConditionPathIsMountPoint=/srv/it's a \"b\" 100%% $HOME\\x #c \u00e9\n" in text
    assert 'ExecStart=/usr/bin/chown "www$$:root" "/srv/it\'s a \\"b\\" 100%% $$HOME\\\\x #c \u00e9"\n' in text
    line = ms.tmpfiles_line(entry(path=ODD, fstype="ramfs")).splitlines()[1]
    assert line == 'z "/srv/it\'s a \\"b\\" 100%% $HOME\\\\\\\\x #c \u00e9" 0755 root root -'


def test_fstab_lines_are_read_unescaped():
    item = ms.item(entry(path="/srv/my cache"), vendor_tmp=False, systemd=True)
    host = settled(item)
    host["fstab"] = "tmpfs /srv/my\\040cache tmpfs %s 0 0\n" % ",".join(item["options"])
    assert not ms.steps(item, host)["fstab"]
    assert ms.fstab_lines(host["fstab"], "/srv/my cache")[0][1] == "/srv/my cache"


@pytest.mark.skipif(not shutil.which("systemd-tmpfiles"), reason="needs systemd-tmpfiles")
@pytest.mark.parametrize("path", [ODD, "/srv/g*l?o[b]", "/srv/ends\\", "/srv/plain"])
def test_systemd_tmpfiles_reads_the_line_back_as_the_path(tmp_path, path):
    root = str(tmp_path / "root")
    os.makedirs(root + path)
    os.chmod(root + path, 0o700)
    conf = tmp_path / "line.conf"
    conf.write_text(ms.tmpfiles_line(entry(path=path, fstype="ramfs", owner=None, group=None, mode="750")),
                    encoding="utf-8")
    subprocess.run(["systemd-tmpfiles", "--root=" + root, "--create", str(conf)], check=True, capture_output=True)
    assert stat.S_IMODE(os.stat(root + path).st_mode) == 0o750


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_systemd_reads_the_seed_unit_of_an_odd_path_without_a_complaint(tmp_path):
    unit = tmp_path / "ramdisk-seed-test.service"
    unit.write_text(ms.seed_unit(entry(path=ODD), "/run/ramdisk-provision/lower/t"), encoding="utf-8")
    result = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
    condition = subprocess.run(["systemd-analyze", "condition", "ConditionPathIsMountPoint=%s" % ms.specifiers(ODD)],
                               capture_output=True, text=True, timeout=60, check=False)
    assert "ConditionPathIsMountPoint=%s failed" % ODD in condition.stdout + condition.stderr


def test_a_run_warns_only_where_a_warning_applies(tmp_path):
    seeded, fresh = tmp_path / "seeded", tmp_path / "fresh"
    seeded.mkdir()
    (seeded / "data").write_text("kept on disk\n")
    (fresh / "lost+found").mkdir(parents=True)
    carried = [
        {"path": str(seeded), "action": "migrate", "seeded": True},
        {"path": str(fresh), "action": "migrate", "seeded": True},
        {"path": "/srv/cache", "action": "mount", "seeded": False},
        {"path": "/srv/gone", "action": "unmount", "use_dropin": False},
        {"path": "/srv/kept", "action": "unmount", "use_dropin": False, "persist": {"backing": "/var/lib/x"}},
        {"path": "/tmp", "action": "unmount", "use_dropin": True},
        {"path": "/srv/old", "action": "unmount", "use_dropin": False},
    ]
    done = [{"path": entry["path"], "changed": entry["path"] != "/srv/old"} for entry in carried]
    recovered = [{"path": "/srv/data", "action": "migrate", "way": "back"}]
    without = ms.notes("web1", carried, done, recovered, systemd=False)
    assert without == [
        "Host web1: a run that died had left /srv/data (migrate) half done; it was undone.",
        "Host web1 does not run systemd, so after a reboot the RAM mount at %s starts empty over the disk "
        "copy. Run this role again after each boot, or set migrate to false and manage the contents yourself." % seeded,
        "Host web1: /srv/gone was unmounted without persist, so what was written there since it was mounted went "
        "with it; the directory on disk is as it was before the mount.",
    ]
    # With systemd the seed unit fills the mount at boot; a migrate that copied nothing (a new cache), a plain
    # mount, a persisted removal, the drop-in of /tmp and a mount this run did not touch say nothing.
    assert ms.notes("web1", carried, done, [], systemd=True) == [without[2]]
