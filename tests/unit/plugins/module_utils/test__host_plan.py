# SPDX-License-Identifier: GPL-3.0-or-later
"""plan_host() and its checks, against a host described by a fake HostView and facts."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.ramdisk.provision.plugins.module_utils import _host_plan as hp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
GIB = 1024 ** 3


class FakeView(object):
    """A host: links, accounts, records, and what the kernel and mkfs refuse."""

    def __init__(self, links=None, users=None, groups=None, records=None, refuse_options=(), mkfs=("ext4",),
                 mkfs_refuse=None, systemd=True, trial_unavailable=None, vendor_tmp=False, files=None,
                 users_of=None, not_dirs=None, journal=(), rsync=True, python3=True, copies=()):
        self.links = links or {}
        self.users = users or {"root": 0, "postgres": 111}
        self.groups = groups or {"root": 0, "postgres": 115}
        self._records = records or {}
        self.refuse_options = refuse_options
        self.mkfs = mkfs
        self.mkfs_refuse = mkfs_refuse or {}
        self._systemd = systemd
        self.programs = {"rsync": rsync, "python3": python3}
        self.trial_unavailable = trial_unavailable
        self.vendor_tmp = vendor_tmp
        self.trials = []
        self.files = files or {}
        self.busy = users_of or {}
        self.not_dirs = not_dirs or {}
        self.journal = list(journal)
        self.copies = set(copies)
        self.backings_read = []

    def backing_has_copy(self, backing):
        self.backings_read.append(backing)
        return backing in self.copies

    def first_link(self, path):
        for link, target in sorted(self.links.items()):
            if path == link or path.startswith(link + "/"):
                return link, target
        return None

    def not_a_directory(self, path):
        for component, what in sorted(self.not_dirs.items()):
            if path.startswith(component + "/"):
                return component, what
        return None

    def journal_paths(self):
        return self.journal

    def realpath(self, path):
        link = self.first_link(path)
        return path if link is None else link[1] + path[len(link[0]):]

    def records(self):
        return self._records

    def read(self, path):
        return self.files.get(path)

    def exists(self, path):
        return path in self.files

    def users_of(self, path):
        return self.busy.get(path, [])

    def zram_records(self):
        return {}

    @staticmethod
    def _lookup(value, table):
        if isinstance(value, int):
            return value if value in table.values() else None
        return table.get(value)

    def user(self, value):
        return self._lookup(value, self.users)

    def group(self, value):
        return self._lookup(value, self.groups)

    def user_name(self, uid):
        return dict((v, k) for k, v in self.users.items()).get(uid, uid)

    def group_name(self, gid):
        return dict((v, k) for k, v in self.groups.items()).get(gid, gid)

    def systemd(self):
        return self._systemd

    def service_manager(self):
        return "systemd" if self._systemd else "sysvinit"

    def vendor_tmp_mount(self):
        return self.vendor_tmp

    def persist_state(self, token, backing, live_path):
        return {"unit": False, "active": False, "conf_backing": None, "backing_exists": False,
                "backing_is_dir": False, "current": "missing", "names": [], "mount_empty": None}

    def trial_mount(self, fstype, options):
        self.trials.append((fstype, tuple(options)))
        if self.trial_unavailable:
            return {"unavailable": self.trial_unavailable}
        bad = [option for option in options if option in self.refuse_options]
        return {"message": "bad option"} if bad else None

    def has_mkfs(self, fstype):
        return fstype in self.mkfs

    def has_program(self, name):
        return self.programs[name]

    def mkfs_dry_run(self, fstype, size_bytes, options):
        if size_bytes < 1024 * 1024:
            return "Not enough space"
        for option in options:
            if option in self.mkfs_refuse:
                return self.mkfs_refuse[option]
        return None


def facts(mounts=(), paths=None, all_mounts=None):
    ram = [{"path": path, "fstype": fstype, "source": fstype, "kind": fstype, "options": ["rw"],
            "size_bytes": GIB, "used_bytes": 0, "inodes_total": 1000, "inodes_used": 1}
           for path, fstype in mounts]
    return {
        "memory": {"total_bytes": 16 * GIB, "available_bytes": 12 * GIB},
        "swap": {"total_bytes": 0, "free_bytes": 0, "devices": []},
        "paths": paths or {},
        "mounts": ram,
        "all_mounts": all_mounts if all_mounts is not None else
        [{"path": "/", "fstype": "ext4", "source": "/dev/vda"}] + [
            {"path": path, "fstype": fstype, "source": fstype} for path, fstype in mounts],
        "support": {"tmpfs": True, "ramfs": True, "zram": True, "zram_algorithms": ["lz4"]},
        "zram": [],
        "brd": {"loaded": False, "devices": []},
    }


def request(entries, **extra):
    out = {"sources": [{"name": "ramdisk_mounts", "value": entries}], "purposes": {}, "defaults": {
        "backend": "tmpfs", "purpose": "custom", "state": "mounted", "mode": "0755", "owner": "root",
        "group": "root", "nosuid": True, "nodev": True, "migrate": True}, "scan_timeout": 10}
    out.update(extra)
    return out


def looked_at(host_facts, *lists):
    """FACTS with every path of LISTS looked at, as the module does: a path not given does not exist."""
    for entries in lists:
        for entry in entries or ():
            if "path" in entry:
                host_facts["paths"].setdefault(entry["path"], {"exists": False, "is_dir": None})
    return host_facts


def plan(entries, view=None, host_facts=None, **extra):
    return hp.plan_host(request(entries, **extra), looked_at(host_facts or facts(), entries, extra.get("swap_devices")),
                        view or FakeView(), host="h1")


def test_a_plain_mount_is_planned_with_a_record():
    result = plan([{"path": "/srv/a", "size": "16M"}])
    assert result["errors"] == []
    (entry,) = result["tmpfs"]
    assert entry["action"] == "mount"
    assert entry["options"] == ["size=16777216", "mode=755", "nosuid", "nodev"]
    assert entry["record"] == {"path": "/srv/a", "fstype": "tmpfs", "created_dir": True, "root_kept": {},
                               "size_bytes": 16 * 1024 * 1024}


@pytest.mark.parametrize("links, path, phrase", [
    ({"/srv/etc": "/etc"}, "/srv/etc", "ramdisk_mounts[0].path is '/srv/etc': a symlink on this host (/srv/etc leads "
                                       "to '/etc')"),
    ({"/srv/link": "/var/data"}, "/srv/link/cache", "Use the real path '/var/data/cache'"),
])
def test_a_path_through_a_link_is_refused(links, path, phrase):
    result = plan([{"path": path, "size": "16M"}], view=FakeView(links=links))
    assert any(phrase in error for error in result["errors"]), result["errors"]
    # Refused once, not again by every later check.
    assert len([error for error in result["errors"] if "ramdisk_mounts[0]" in error]) == 1


@pytest.mark.parametrize("path, phrase", [
    ("/srv/a\nb", "a control character"),
    ("/srv/a\tb", "a control character"),
    ("/srv/a\u00a0b", "a character that does not show as itself (U+00A0)"),
    ("/srv/a /b", "a name that begins or ends with a space"),
    ("/srv/" + "x" * 256, "a path component longer than 255 bytes"),
    ("/srv" + "/x" * 2100, "longer than 4095 bytes"),
])
def test_paths_fstab_or_linux_cannot_hold_are_refused(path, phrase):
    result = plan([{"path": path, "size": "16M"}])
    assert any("ramdisk_mounts[0].path is" in error and phrase in error for error in result["errors"]), result["errors"]


def test_a_path_with_a_space_is_planned_with_its_fstab_line_escaped():
    result = plan([{"path": "/srv/my cache", "size": "16M"}])
    assert result["errors"] == []
    (entry,) = result["tmpfs"]
    assert entry["action"] == "mount" and entry["token"].startswith("srv-my-cache-")
    settled = FakeView(records={"/srv/my cache": dict(entry["record"])}, files={
        "/etc/fstab": "tmpfs /srv/my\\040cache tmpfs %s 0 0\n" % ",".join(entry["options"])})
    live = facts(mounts=[("/srv/my cache", "tmpfs")],
                 paths={"/srv/my cache": {"exists": True, "is_dir": True, "mode": "0755", "uid": 0, "gid": 0}})
    for mount in live["mounts"]:
        mount.update(options=["rw", "nosuid", "nodev", "size=16384k", "mode=755"], size_bytes=16 * 1024 * 1024)
    again = plan([{"path": "/srv/my cache", "size": "16M"}], view=settled, host_facts=live)
    # The line with \040 is the entry's own: ramdisk_apply's dry run finds nothing to do (test__executor.py).
    assert again["errors"] == [] and again["tmpfs"][0]["action"] == "ok"


@pytest.mark.parametrize("key, entry", [
    ("path", {"path": "/srv/notes.txt/sub", "size": "16M"}),
    ("persist.backing", {"path": "/srv/data", "size": "16M", "persist": {"backing": "/srv/notes.txt/copy"}}),
])
def test_a_path_under_a_file_is_refused_before_the_mkdir(key, entry):
    view = FakeView(not_dirs={"/srv/notes.txt": "a regular file"})
    result = plan([entry], view=view)
    assert result["errors"] == [
        "Host h1: ramdisk_mounts[0].%s is '%s': '/srv/notes.txt' on this host is a regular file, not a directory, so "
        "nothing can be made or mounted under it. Choose a path whose parents are all directories, or move "
        "'/srv/notes.txt' away." % (key, entry["path"] if key == "path" else entry["persist"]["backing"])]


def test_a_path_under_a_link_to_a_file_names_the_link():
    view = FakeView(not_dirs={"/srv/conf": "a symlink to a regular file"}, links={"/srv/conf": "/etc/hostname"})
    (error,) = plan([{"path": "/srv/conf/sub", "size": "16M"}], view=view)["errors"]
    assert "'/srv/conf' on this host is a symlink to a regular file, not a directory" in error


def _live_tmpfs(path):
    host = facts(mounts=[(path, "tmpfs")], paths={path: {"exists": True, "is_dir": True, "mode": "0755", "uid": 0,
                                                         "gid": 0}})
    for mount in host["mounts"]:
        mount.update(options=["rw", "nosuid", "nodev", "size=16384k", "mode=755"], size_bytes=16 * 1024 * 1024)
    return host


def test_a_live_tmpfs_nothing_accounts_for_is_not_taken_over():
    result = plan([{"path": "/srv/left", "size": "16M"}], host_facts=_live_tmpfs("/srv/left"))
    assert result["errors"] == [
        "Host h1: ramdisk_mounts[0].path is '/srv/left': a tmpfs is mounted there that nothing accounts for, so this "
        "collection will not take it over. It has no record in /etc/ramdisk-provision/mounts, no /etc/fstab line, no "
        "unit srv-left.mount and no open journal entry: a run that was killed may have left it, and it hides what the "
        "directory holds on disk. Look at it with findmnt /srv/left and at its files; if it is yours, add its "
        "/etc/fstab line and run again; if not, copy out what you need from it, unmount it (umount /srv/left) and run "
        "again."]
    spaced = plan([{"path": "/srv/left over", "size": "16M"}], host_facts=_live_tmpfs("/srv/left over"))["errors"]
    assert "findmnt '/srv/left over'" in spaced[0] and "unit srv-left\\x20over.mount" in spaced[0]


@pytest.mark.parametrize("view", [
    FakeView(records={"/srv/left": {"path": "/srv/left", "fstype": "tmpfs", "created_dir": False}}),
    FakeView(files={"/etc/fstab": "# the admin's\ntmpfs /srv/left tmpfs size=16m 0 0\n"}),
    FakeView(files={"/etc/systemd/system/srv-left.mount": "[Mount]\n"}),
    FakeView(journal=["/srv/left"]),
], ids=["record", "fstab line", "mount unit", "open journal"])
def test_a_live_tmpfs_something_accounts_for_is_taken_over(view):
    result = plan([{"path": "/srv/left", "size": "16M"}], view=view, host_facts=_live_tmpfs("/srv/left"))
    assert result["errors"] == [] and result["tmpfs"][0]["action"] in ("ok", "remount")


def test_an_fstab_line_of_another_type_does_not_account_for_a_tmpfs():
    view = FakeView(files={"/etc/fstab": "/dev/vdb /srv/left ext4 defaults 0 2\n"})
    (error,) = plan([{"path": "/srv/left", "size": "16M"}], view=view, host_facts=_live_tmpfs("/srv/left"))["errors"]
    assert "nothing accounts for" in error


def test_the_distributions_tmp_mount_accounts_for_tmp():
    entries = [{"path": "/tmp", "purpose": "tmp", "gate": "off", "size": "16M"}]
    assert plan(entries, view=FakeView(vendor_tmp=True), host_facts=_live_tmpfs("/tmp"))["errors"] == []
    assert "nothing accounts for" in plan(entries, host_facts=_live_tmpfs("/tmp"))["errors"][0]


def test_live_mounts_under_a_new_mount_are_never_hidden():
    host = facts(all_mounts=[{"path": "/", "fstype": "ext4", "source": "/dev/vda"},
                             {"path": "/srv/a/child", "fstype": "ext4", "source": "/dev/vdb"}])
    result = plan([{"path": "/srv/a", "size": "16M"}], host_facts=host)
    assert any("live mounts are under it (/srv/a/child (ext4))" in error for error in result["errors"])


def test_a_mount_inside_someone_elses_tmpfs_is_refused_but_not_under_run():
    host = facts(mounts=[("/srv/ram", "tmpfs"), ("/run", "tmpfs")])
    result = plan([{"path": "/srv/ram/inner", "size": "16M"}, {"path": "/run/build", "size": "16M"}], host_facts=host)
    assert [error for error in result["errors"] if "already in RAM" in error] == [
        error for error in result["errors"] if "/srv/ram/inner" in error]
    assert len(result["errors"]) == 1


def test_absent_removes_only_recorded_mounts():
    host = facts(mounts=[("/srv/theirs", "tmpfs"), ("/srv/ours", "tmpfs")])
    view = FakeView(records={"/srv/ours": {"path": "/srv/ours", "fstype": "tmpfs", "created_dir": True}})
    result = plan([{"path": "/srv/theirs", "state": "absent"}, {"path": "/srv/ours", "state": "absent"}],
                  view=view, host_facts=host)
    assert len(result["errors"]) == 1
    assert "ramdisk_mounts[0].state is 'absent': the tmpfs at '/srv/theirs' was not made by this collection" in \
        result["errors"][0]
    assert result["tmpfs"][1]["record"]["created_dir"] is True


def test_absent_of_a_busy_mount_is_refused_naming_its_users():
    host = facts(mounts=[("/srv/ours", "tmpfs")])
    records = {"/srv/ours": {"path": "/srv/ours", "fstype": "tmpfs", "created_dir": True}}
    busy = FakeView(records=records, users_of={"/srv/ours": [(4242, "sleep")]})
    result = plan([{"path": "/srv/ours", "state": "absent"}], view=busy, host_facts=host)
    assert result["errors"] == [
        "Host h1: ramdisk_mounts[0].state is 'absent', but '/srv/ours' is in use by pid 4242 (sleep), so it cannot be "
        "unmounted. Stop it first (fuser -vm /srv/ours lists them), then run again."]
    idle = FakeView(records=records)
    assert plan([{"path": "/srv/ours", "state": "absent"}], view=idle, host_facts=host)["errors"] == []


def test_a_settled_mount_is_planned_ok_and_a_new_one_mount():
    # Which steps each needs is ramdisk_apply's dry run (ramdisk_plan's todo; test__executor.py).
    entry = {"path": "/srv/new", "size": "16M", "migrate": False}
    result = plan([entry])
    assert result["errors"] == [] and result["tmpfs"][0]["action"] == "mount"
    item = result["tmpfs"][0]
    live = facts(mounts=[("/srv/new", "tmpfs")],
                 paths={"/srv/new": {"exists": True, "is_dir": True, "mode": "0755", "uid": 0, "gid": 0}})
    for mount in live["mounts"]:
        mount.update(options=["rw", "nosuid", "nodev", "size=16384k", "mode=755"], size_bytes=16 * 1024 * 1024)
    fstab = "tmpfs /srv/new tmpfs %s 0 0\n" % ",".join(item["options"])
    view = FakeView(records={"/srv/new": dict(item["record"])}, files={"/etc/fstab": fstab})
    again = plan([entry], view=view, host_facts=live)
    assert again["errors"] == [] and again["tmpfs"][0]["action"] == "ok", again
    assert "steps" not in again["tmpfs"][0]


def test_absent_of_the_distributions_tmp_only_drops_our_drop_in():
    host = facts(mounts=[("/tmp", "tmpfs")])
    entries = [{"path": "/tmp", "purpose": "tmp", "state": "absent"}]
    assert plan(entries, view=FakeView(vendor_tmp=True), host_facts=host)["errors"] == []
    assert "was not made by this collection" in plan(entries, host_facts=facts(mounts=[("/tmp", "tmpfs")]))["errors"][0]


@pytest.mark.parametrize("owner, phrase", [
    (4294967295, "ramdisk_mounts[0].owner is 4294967295: not a valid id"),
    ("-1", "ramdisk_mounts[0].owner is -1: not a valid id"),
    (4242, "ramdisk_mounts[0].owner is 4242: no such user on this host"),
    ("nobody-here", "ramdisk_mounts[0].owner is 'nobody-here': no such user on this host"),
    ("root\n", "ramdisk_mounts[0].owner is 'root\\n': not a valid user or group name"),
])
def test_owners_must_exist_and_fit_uid_t(owner, phrase):
    result = plan([{"path": "/srv/a", "size": "16M", "owner": owner}])
    assert any(phrase in error for error in result["errors"]), result["errors"]


def test_a_migrated_directory_keeps_its_own_root_unless_the_entry_sets_it():
    host = facts(paths={"/srv/data": {"exists": True, "is_dir": True, "empty": False, "usage_bytes": 10,
                                      "inodes": 2, "complete": True, "uid": 4242, "gid": 4343, "mode": "2750"},
                        "/srv/set": {"exists": True, "is_dir": True, "empty": False, "usage_bytes": 10,
                                     "inodes": 2, "complete": True, "uid": 4242, "gid": 4343, "mode": "2750"}})
    result = plan([{"path": "/srv/data", "size": "16M"}, {"path": "/srv/set", "size": "16M", "mode": "0700"}],
                  host_facts=host)
    assert result["errors"] == []
    data, given = result["tmpfs"]
    assert (data["action"], data["mode"], data["owner"], data["group"]) == ("migrate", "2750", 4242, 4343)
    assert "uid=4242" in data["options"] and "gid=4343" in data["options"]
    assert data["record"]["root_kept"] == {"mode": "2750", "owner": 4242, "group": 4343}
    # The entry's own mode wins; owner and group still come from the directory.
    assert (given["mode"], given["owner"]) == ("700", 4242)


def test_a_live_mount_keeps_what_its_record_kept():
    host = facts(mounts=[("/srv/data", "tmpfs")])
    view = FakeView(users={"root": 0, "svc": 4242}, records={"/srv/data": {
        "path": "/srv/data", "fstype": "tmpfs", "created_dir": False,
        "root_kept": {"mode": "2750", "owner": "svc", "group": "root"}}})
    (entry,) = plan([{"path": "/srv/data", "size": "1G"}], view=view, host_facts=host)["tmpfs"]
    assert (entry["mode"], entry["owner"]) == ("2750", "svc")


def test_the_kernel_refusal_names_the_option_and_its_key():
    view = FakeView(refuse_options=("mpol=bind:5",))
    result = plan([{"path": "/srv/a", "size": "16M", "mpol": "bind:5"}], view=view)
    assert result["errors"] == [
        "Host h1: ramdisk_mounts[0].mpol is 'bind:5': the kernel refused the mount option 'mpol=bind:5' in a trial "
        "mount (bad option). Fix or remove that setting."]


def test_no_trial_without_a_namespace_is_a_warning():
    result = plan([{"path": "/srv/a", "size": "16M"}], view=FakeView(trial_unavailable="no unshare"))
    assert result["errors"] == []
    assert any("could not be tried before the change (no unshare)" in warning for warning in result["warnings"])


def test_trials_run_only_for_a_request_without_other_errors():
    view = FakeView()
    plan([{"path": "/srv/a", "size": "16M"}, {"path": "/srv/b", "size": "16M", "owner": 4242}], view=view)
    assert view.trials == []


@pytest.mark.parametrize("entry, phrase", [
    ({"size": "4K"}, "ramdisk_mounts[0].size is '4K': mkfs.ext4 refused a device of 4096 bytes"),
    ({"size": "64M", "mkfs_options": ["-b", "999"]}, "ramdisk_mounts[0].mkfs_options is ['-b', '999']: mkfs.ext4 "
                                                     "refused them (bad block size)"),
    ({"size": "64M", "fstype": "xfs"}, "ramdisk_mounts[0].fstype is 'xfs': mkfs.xfs is not installed on this host"),
])
def test_zram_file_systems_are_tried_with_mkfs(entry, phrase):
    view = FakeView(mkfs_refuse={"999": "bad block size"})
    result = plan([dict(entry, path="/srv/z", backend="zram")], view=view)
    assert any(phrase in error for error in result["errors"]), result["errors"]


def test_zram_devices_and_the_policy_cannot_share_a_path():
    result = plan([{"path": "/srv/a", "size": "16M"}], swap_devices=[
        {"name": "fs", "use": "filesystem", "size": "64M", "path": "/srv/a"}])
    assert any("zram_devices[0].path is '/srv/a': the policy mounts that path too" in error
               for error in result["errors"]), result["errors"]


def test_settings_are_checked():
    result = plan([{"path": "/srv/a", "size": "16M"}], scan_timeout=-1,
                  purpose_overrides={"cache": {"noexce": True}, "cahce": {}})
    words = " ".join(result["errors"])
    assert "ramdisk_scan_timeout is -1: not a number of seconds" in words
    assert "ramdisk_purposes.cache.noexce is True: an unknown key (did you mean noexec?)" in words
    assert "ramdisk_purposes.cahce is {}: not a known purpose (did you mean cache?)" in words


@pytest.mark.parametrize("name, like", [
    ("ramdisk_mount__web", "ramdisk_mounts__<group>"),
    ("ramdisk_mounts_web", "ramdisk_mounts__<group>"),
    ("ramdiks_mounts", "ramdisk_mounts"),
    ("ramdisk_ram_budgett", "ramdisk_ram_budget"),
])
def test_lookalike_variables_are_named(name, like):
    (warning,) = hp.lookalike_warnings([name, "ramdisk_mounts__ok", "ramdisk_state", "unrelated"], "h1")
    assert "the variable %s looks like %s" % (name, like) in warning


def test_role_variables_match_the_role_defaults():
    with open(os.path.join(REPO, "roles", "ramdisk", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert sorted(hp.ROLE_VARIABLES) == sorted(defaults)


def test_the_same_path_in_two_sizes_of_one_value_is_one_entry():
    result = hp.plan_host({"sources": [{"name": "ramdisk_mounts__a", "value": [{"path": "/srv/a", "size": "16M"}]},
                                       {"name": "ramdisk_mounts__b", "value": [{"path": "/srv/a", "size": "16384K"}]}],
                           "defaults": request([])["defaults"]}, looked_at(facts(), [{"path": "/srv/a"}]),
                          FakeView(), host="h1")
    assert result["errors"] == [] and len(result["tmpfs"]) == 1


def test_a_backend_role_on_its_own_is_checked_on_the_host_the_same_way():
    host = looked_at(facts(paths={"/srv/data": {"exists": True, "is_dir": True, "empty": False, "usage_bytes": 1,
                                                "inodes": 1, "complete": True, "uid": 0, "gid": 0, "mode": "2750"}}),
                     [{"path": "/tmp"}, {"path": "/srv/data"}, {"path": "/srv/r"}])
    result = hp.plan_host({"backend_requests": {
        "tmpfs_mounts": [{"path": "/tmp", "label": "tmpfs_tmp", "size": "1G"},
                         {"path": "/srv/data", "size": "16M", "migrate": True}],
        "ramfs_mounts": [{"path": "/srv/r", "max_size": "16M"}]}}, host,
        FakeView(links={"/tmp": "/var/tmp"}), host="h1")
    assert len(result["errors"]) == 1
    assert "tmpfs_tmp.path is '/tmp': a symlink on this host" in result["errors"][0]
    assert [entry["path"] for entry in result["tmpfs"]] == ["/srv/data"]
    assert result["tmpfs"][0]["mode"] == "2750" and result["ramfs"][0]["record"]["size_bytes"] == 16 * 1024 * 1024


def test_a_purpose_says_more_than_the_directory_it_goes_over():
    host = facts(paths={"/var/lib/postgresql": {"exists": True, "is_dir": True, "empty": False, "usage_bytes": 1,
                                                "inodes": 1, "complete": True, "uid": 111, "gid": 115,
                                                "mode": "0755"}})
    result = plan([{"path": "/var/lib/postgresql", "size": "16M", "purpose": "build"}], host_facts=host,
                  purposes={"build": {"mode": "0700", "owner": "postgres"}})
    assert result["errors"] == []
    entry = result["tmpfs"][0]
    assert (entry["mode"], entry["owner"]) == ("700", "postgres")


@pytest.mark.parametrize("mode", ["0755\n", "4755", "7777"])
def test_modes_a_directory_cannot_mean_are_refused(mode):
    result = plan([{"path": "/srv/a", "size": "16M", "mode": mode}])
    assert any("ramdisk_mounts[0].mode is" in error for error in result["errors"]), result["errors"]


def test_zram_generator_persistence_is_checked_before_any_change():
    swap = [{"name": "swap", "use": "swap", "size": "1G", "priority": 100, "mem_limit": "512M"}]
    result = plan([], view=FakeView(systemd=False), swap_devices=swap, zram_persistence="generator")
    assert any("zram-generator is not installed" in error for error in result["errors"])
    assert any("the service manager is sysvinit; zram-generator needs systemd" in error for error in result["errors"])
    assert any("zram_devices[0].mem_limit is set, but zram_persistence is generator" in error
               for error in result["errors"])
    installed = FakeView(files={hp.ZRAM_GENERATORS[0]: ""})
    assert plan([], view=installed, swap_devices=[dict(swap[0], mem_limit=None)], zram_persistence="generator")[
        "errors"] == []


def test_zswap_in_front_of_zram_swap_is_a_warning():
    swap = [{"name": "swap", "use": "swap", "size": "1G", "priority": 100}]
    view = FakeView(files={"/sys/module/zswap/parameters/enabled": "Y\n"})
    assert any("zswap on as well as zram swap" in warning for warning in plan([], view=view, swap_devices=swap)[
        "warnings"])
    assert plan([], swap_devices=swap)["warnings"] == []


def test_zram_asked_where_zram_cannot_work_is_refused_before_any_change():
    host = facts()
    host["support"].update(zram=False, kernel="6.1.0-test", container="docker")
    swap = [{"name": "swap", "use": "swap", "size": "1G", "priority": 100}]
    errors = plan([], host_facts=host, swap_devices=swap)["errors"]
    assert any("zram_devices asks for zram, but zram cannot work here" in error and "6.1.0-test" in error
               and "in a docker container" in error for error in errors), errors
    assert plan([], host_facts=host)["errors"] == []


def test_a_policy_zram_entry_takes_zram_device_defaults():
    entry = {"path": "/srv/z", "backend": "zram", "size": "64M", "fstype": "ext4"}
    result = plan([entry], swap_defaults={"algorithm": "lz4", "discard": False})
    assert result["errors"] == [], result["errors"]
    assert result["zram"][0]["algorithm"] == "lz4"
    assert "discard" not in result["zram"][0]["mount"]["options"]


# --- zram: the kernel's limits and one set of defaults, decided before any change -------------------------


class XfsView(FakeView):
    """A host with mkfs.xfs, which (xfsprogs 5.19 and later) makes no file system under 300 MiB."""

    def __init__(self, **extra):
        super(XfsView, self).__init__(mkfs=("ext4", "xfs"), **extra)

    def mkfs_dry_run(self, fstype, size_bytes, options):
        if fstype == "xfs" and size_bytes < 300 * 1024 * 1024:
            return "Filesystem must be larger than 300MB"
        return super(XfsView, self).mkfs_dry_run(fstype, size_bytes, options)


def _zram_host(**support):
    host = facts()
    host["support"].update(support)
    return host


@pytest.mark.parametrize("entries, swap_devices, host, phrase", [
    # site.yml and the ramdisk role plan zram_devices the zram role's way: a swap entry without priority is fine.
    ([], [{"name": "swap", "use": "swap", "size": "1G"}], _zram_host(), None),
    # 40 swap devices on a kernel that takes 28 swap areas: refused before the first swapon.
    ([], [{"name": "s%d" % index, "use": "swap", "size": "16M"} for index in range(40)],
     _zram_host(swap_areas_max=28, swap_areas_basis="32 swap types less 4"),
     "Host h1: zram_devices[28].use is 'swap': it would be swap area 29 on this host, and this kernel takes at most 28 "
     "(MAX_SWAPFILES: 32 swap types less 4); 0 in /proc/swaps now, and zram_devices asks for 40 more."),
    # No zram device yet: what the kernel offers comes from its config, for the policy and zram_devices alike.
    ([{"path": "/srv/z", "backend": "zram", "size": "64M", "algorithm": "zstd"}], None,
     _zram_host(zram_algorithms=[], zram_algorithms_offered=["lzo-rle", "lzo", "lz4"], zram_algorithms_from="config"),
     "Host h1: ramdisk_mounts[0].algorithm is 'zstd': not offered by this host's kernel, which offers lzo-rle, lzo, "
     "lz4 (from config)."),
    ([], [{"name": "swap", "use": "swap", "size": "1G", "algorithm": "zstd"}],
     _zram_host(zram_algorithms=[], zram_algorithms_offered=["lz4"], zram_algorithms_from="config"),
     "Host h1: zram_devices[0].algorithm is 'zstd': not offered by this host's kernel, which offers lz4"),
    # A file system mkfs cannot make at that size: tried with mkfs's dry run on a sparse file, for both doors.
    ([{"path": "/srv/z", "backend": "zram", "size": "64M", "fstype": "xfs"}], None, _zram_host(),
     "Host h1: ramdisk_mounts[0].size is '64M': mkfs.xfs refused a device of 67108864 bytes (Filesystem must be "
     "larger than 300MB)."),
    ([], [{"name": "fs", "use": "filesystem", "size": "64M", "fstype": "xfs", "path": "/srv/z"}], _zram_host(),
     "Host h1: zram_devices[0].size is '64M': mkfs.xfs refused a device of 67108864 bytes"),
    ([], [{"name": "fs", "use": "filesystem", "size": "512M", "fstype": "xfs", "path": "/srv/z"}], _zram_host(), None),
])
def test_zram_limits_are_refused_in_the_plan(entries, swap_devices, host, phrase):
    result = plan(entries, view=XfsView(), host_facts=host, swap_devices=swap_devices)
    if phrase is None:
        assert result["errors"] == [], result["errors"]
        for device in result["zram_swap"]:
            assert device["priority"] == (100 if device["use"] == "swap" else None)
        return
    assert any(phrase in error for error in result["errors"]), result["errors"]


def test_a_system_directory_through_a_link_is_named_as_a_system_directory():
    """On merged-/usr hosts /lib is a link to /usr/lib: /lib/modules is refused for what it holds, not as a link."""
    (error,) = plan([{"path": "/lib/modules", "size": "16M"}], view=FakeView(links={"/lib": "/usr/lib"}))["errors"]
    assert "ramdisk_mounts[0].path is '/lib/modules': a system path that must not be hidden" in error


def _booted_empty(path="/srv/data", below_empty=False):
    """The tmpfs a boot mounted at PATH from its /etc/fstab line: empty, over what the directory holds on disk."""
    host = _live_tmpfs(path)
    host["paths"][path].update(empty=True, usage_bytes=0, inodes=1, complete=True, below={
        "exists": True, "is_dir": True, "empty": below_empty, "usage_bytes": 4096 if below_empty else 8192,
        "inodes": 1 if below_empty else 3, "xattr_bytes": 0, "complete": True})
    return host


OURS = {"/srv/data": {"path": "/srv/data", "fstype": "tmpfs", "created_dir": False, "root_kept": {}}}


def test_an_empty_mount_a_boot_made_over_migrated_data_is_filled_again():
    result = plan([{"path": "/srv/data", "size": "16M"}], view=FakeView(records=OURS), host_facts=_booted_empty())
    assert result["errors"] == []
    (entry,) = result["tmpfs"]
    assert entry["action"] == "migrate" and entry["refill"] is True and entry["todo"]


@pytest.mark.parametrize("entry, host", [
    ({"path": "/srv/data", "size": "16M"}, _booted_empty(below_empty=True)),
    ({"path": "/srv/data", "size": "16M", "migrate": False}, _booted_empty()),
    ({"path": "/srv/data", "size": "16M"}, _live_tmpfs("/srv/data")),
], ids=["nothing on disk", "not migrated", "not looked under"])
def test_a_mount_with_nothing_to_take_in_is_kept(entry, host):
    result = plan([entry], view=FakeView(records=OURS), host_facts=host)
    assert result["errors"] == [] and result["tmpfs"][0]["action"] in ("ok", "remount")
    assert not result["tmpfs"][0].get("refill")


def test_an_empty_mount_nothing_accounts_for_is_not_replaced():
    (error,) = plan([{"path": "/srv/data", "size": "16M"}], host_facts=_booted_empty())["errors"]
    assert "a tmpfs is mounted there that nothing accounts for" in error


def test_an_empty_mount_in_use_is_not_replaced():
    busy = FakeView(records=OURS, users_of={"/srv/data": [(4242, "sleep")]})
    assert plan([{"path": "/srv/data", "size": "16M"}], view=busy, host_facts=_booted_empty())["errors"] == [
        "Host h1: ramdisk_mounts[0].path is '/srv/data': the tmpfs mounted there is empty over what the directory "
        "holds on disk and is to be replaced by one filled from it, but it is in use by pid 4242 (sleep). Stop it "
        "first (fuser -vm /srv/data lists them), then run again."]


def test_the_data_under_an_empty_mount_must_fit_in_the_new_one():
    (error,) = plan([{"path": "/srv/data", "size": "4096"}], view=FakeView(records=OURS),
                    host_facts=_booted_empty())["errors"]
    assert "the 8.0 KiB already in '/srv/data' would not fit" in error


@pytest.mark.parametrize("keep, error", [
    (0, "Host h1: ramdisk_mounts[0].persist.keep is 0: fewer than one copy"),
    ("two", "Host h1: ramdisk_mounts[0].persist.keep is 'two': not a whole number of copies"),
    (3, None),
])
def test_persist_keep_through_the_host_plan(keep, error):
    entry = {"path": "/srv/cache", "size": "1G", "persist": {"backing": "/var/lib/ramdisk-backing/cache", "keep": keep}}
    result = plan([entry])
    if error:
        assert any(message.startswith(error) for message in result["errors"]), result["errors"]
    else:
        assert result["errors"] == [], result["errors"]
        assert [mount["persist"]["keep"] for mount in result["policy"]["entries"] if mount.get("persist")] == [keep]


@pytest.mark.parametrize("python3, systemd, refused", [(False, True, True), (True, True, False), (False, False, False)])
def test_a_host_without_python3_is_refused_persist(python3, systemd, refused):
    """The persist helper is a Python program (issue 41): without python3 its units could not run it."""
    entries = [{"path": "/srv/cache", "size": "1G", "persist": {"backing": "/var/lib/ramdisk-backing/cache"}},
               {"path": "/srv/plain", "size": "1G"}]
    result = plan(entries, view=FakeView(python3=python3, rsync=False, systemd=systemd))
    found = [error for error in result["errors"] if "has no python3" in error]
    if refused:
        assert found == ["Host h1: ramdisk_mounts[0].persist is set, but this host has no python3, which the "
                         "persist units run their helper with at boot and at shutdown. Install python3 (Debian "
                         "package python3), or set persist: null here."]
    else:
        assert found == []


@pytest.mark.parametrize("has_copy", [False, True], ids=["no copy in the backing", "the backing holds a copy"])
def test_an_empty_persisted_mount_over_data_is_filled_again_until_its_backing_holds_a_copy(has_copy):
    """Issue 41: a power cut before a persisted migrate's first copy left a boot's empty tmpfs over the data; taken as
    it was, the empty RAM became the backing's first copy. With no copy in the backing it is filled from the disk
    again; once the backing holds one, the persist unit restores from it. Whether it holds one is read on the host,
    through the view (the plan itself reads only facts: it also runs on the controller as the tmpfs_plan filter)."""
    backing = "/var/lib/ramdisk-backing/host-plan-test"
    entry = {"path": "/srv/data", "size": "16M", "persist": {"backing": backing + "/", "interval": "1h"}}
    view = FakeView(records=OURS, copies=[backing] if has_copy else [])
    result = plan([entry], view=view, host_facts=_booted_empty())
    assert view.backings_read == [backing]
    assert len(result["tmpfs"]) == 1, result["errors"]
    (planned,) = result["tmpfs"]
    assert bool(planned.get("refill")) is not has_copy, (planned.get("action"), result["errors"])
    if not has_copy:
        assert planned["action"] == "migrate"


def test_the_plan_alone_never_reads_a_backing_of_the_machine_it_runs_on(monkeypatch):
    """The tmpfs_plan filter runs the plan on the controller: whether a backing holds a copy is a fact of the host
    (facts' backings), never read from the controller's own disk; unknown, the mount is not taken for unfilled."""
    from ansible_collections.ramdisk.provision.plugins.module_utils._plan import plan_tmpfs
    read = []
    real_isdir = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda path: read.append(path) or real_isdir(path))
    backing = "/var/lib/ramdisk-backing/host-plan-test"
    entry = {"path": "/srv/data", "size": "16M", "migrate": True, "persist": {"backing": backing, "interval": "1h"}}
    result = plan_tmpfs([entry], _booted_empty(), host="h1", var_name="tmpfs_mounts")
    assert result["errors"] == []
    assert not result["mounts"][0].get("refill"), result["mounts"][0]["action"]
    assert [path for path in read if path.startswith(backing)] == []
    known = plan_tmpfs([entry], dict(_booted_empty(), backings={backing: {"current": False}}), host="h1",
                       var_name="tmpfs_mounts")
    assert known["mounts"][0]["refill"] is True and known["mounts"][0]["action"] == "migrate"


def door(backend_requests, view=None, host_facts=None, **extra):
    """A backend role used on its own (the zram or brd role), planned on the host."""
    brd = backend_requests.get("brd")
    lists = [backend_requests.get("zram_devices"), brd.get("mounts") if isinstance(brd, dict) else None]
    return hp.plan_host(dict({"backend_requests": backend_requests, "scan_timeout": 10}, **extra),
                        looked_at(host_facts or facts(), *[items for items in lists if isinstance(items, list)]),
                        view or FakeView(), host="h1")


def test_the_zram_role_on_its_own_is_planned_on_the_host():
    devices = [{"name": "swap", "use": "swap", "size": "1G"},
               {"name": "build", "use": "filesystem", "size": "64M", "path": "/srv/build", "owner": "postgres"}]
    result = door({"zram_devices": devices}, swap_defaults={"priority": 50})
    assert result["errors"] == []
    assert [(device["name"], device["label"]) for device in result["zram"]] == [
        ("swap", "zram_devices[0]"), ("build", "zram_devices[1]")]
    assert result["zram"][0]["priority"] == 50 and result["zram"][1]["mount"]["path"] == "/srv/build"
    assert result["zram_known"] == {} and result["tmpfs"] == [] and result["brd"] == {}


def test_zram_devices_of_every_group_are_merged_and_a_device_named_twice_differently_is_refused():
    """A host in two groups gets both groups' zram_devices__<group> (before, one list won, silently)."""
    swap = {"name": "swap", "use": "swap", "size": "1G"}
    build = {"name": "build", "use": "filesystem", "size": "64M", "path": "/srv/build"}
    sources = [{"name": "zram_devices", "value": []}, {"name": "zram_devices__builders", "value": [build]},
               {"name": "zram_devices__all", "value": [swap]}, {"name": "zram_devices__web", "value": [swap]}]
    merged, errors = hp.merge_zram_sources(sources, "h1")
    assert errors == []
    assert [(device["name"], device["label"]) for device in merged] == [
        ("build", "zram_devices__builders[0]"), ("swap", "zram_devices__all[0]")]
    result = door({"zram_devices": merged})
    assert result["errors"] == [] and [device["label"] for device in result["zram"]] == [
        "zram_devices__builders[0]", "zram_devices__all[0]"]
    # The policy's route (the ramdisk role) takes them as its swap devices, labels kept.
    swaps = plan([], swap_devices=[device for device in merged if device["use"] == "swap"])
    assert swaps["errors"] == [] and [device["label"] for device in swaps["zram_swap"]] == ["zram_devices__all[0]"]
    _merged, errors = hp.merge_zram_sources(sources + [{"name": "zram_devices__db", "value": [dict(swap, size="2G")]},
                                                       {"name": "zram_devices__x", "value": "swap"}], "h1")
    assert errors == [
        "Host h1: zram_devices__all[0] and zram_devices__db[0] both set zram device 'swap', differently (size: '2G' "
        "against '1G'). Set each device in one variable only, or give it the same settings in both.",
        "Host h1: zram_devices__x is 'swap': not a list. Give a list of zram devices, e.g. [{name: swap, use: swap, "
        "size: 25%}]."]
    refused = door({"zram_devices": []}, source_errors=errors)
    assert refused["errors"][:2] == errors


def test_the_zram_door_refuses_what_the_zram_preflight_refused_with_host_variable_value_and_fix():
    """Every refusal the zram role's YAML preflight gave, now given by the host's plan (the same sentences)."""
    host = facts()
    host["support"].update(zram=False, kernel="6.1.0-test", container=None)
    swap = {"name": "swap", "use": "swap", "size": "1G", "mem_limit": "512M"}
    errors = door({"zram_devices": [swap]}, host_facts=host, view=FakeView(systemd=False),
                  zram_persistence="generator")["errors"]
    assert errors == [
        "Host h1: zram_devices asks for zram, but zram cannot work here: no /sys/class/zram-control and no zram module "
        "for kernel 6.1.0-test. Load the zram module (modprobe zram), or leave zram_devices empty for this host.",
        "Host h1: zram_persistence is generator, but zram-generator is not installed (no %s). Install the Debian "
        "package systemd-zram-generator, or set zram_persistence: units (the default)." % " or ".join(
            hp.ZRAM_GENERATORS),
        "Host h1: zram_persistence is generator, but the service manager is sysvinit; zram-generator needs systemd. "
        "Set zram_persistence: units.",
        "Host h1: zram_devices[0].mem_limit is set, but zram_persistence is generator and zram-generator 1.1 "
        "(Debian 12) has no memory limit, so it would not come back at boot. Remove mem_limit from this entry, or set "
        "zram_persistence: units."]
    warned = door({"zram_devices": [dict(swap, mem_limit=None)]},
                  view=FakeView(files={"/sys/module/zswap/parameters/enabled": "Y\n"}))
    assert warned["errors"] == [] and any("zswap on as well as zram swap" in text for text in warned["warnings"])


def test_a_refused_zram_path_keeps_the_other_entries_labels():
    """A path through a link is refused on the host (the controller's filter never looked); the entry after it
    is still named by its own place in zram_devices."""
    devices = [{"name": "a", "use": "filesystem", "size": "64M", "path": "/srv/link/a"},
               {"name": "b", "use": "filesystem", "size": "64M", "path": "/srv/b", "owner": "nobody-here"}]
    errors = door({"zram_devices": devices}, view=FakeView(links={"/srv/link": "/etc"}))["errors"]
    assert any(error.startswith("Host h1: zram_devices[0].path is '/srv/link/a': a symlink on this host")
               for error in errors), errors
    assert any("zram_devices[1].owner" in error for error in errors), errors
    assert not any("zram_devices[0].owner" in error for error in errors), errors


@pytest.mark.parametrize("bad, phrase", [
    ("not a list", "zram_devices is 'not a list': not a list"),
    ([{"name": "x", "use": "swap", "size": "1G", "colour": "red"}], "zram_devices[0].colour is 'red': an unknown key"),
    ([{"name": "x", "use": "swap", "size": "1G", "algorithm": "nope"}], "zram_devices[0].algorithm"),
])
def test_the_zram_door_refuses_bad_entries(bad, phrase):
    errors = door({"zram_devices": bad})["errors"]
    assert any(phrase in error for error in errors), errors


def test_zram_device_defaults_that_are_not_a_mapping_are_refused():
    errors = door({"zram_devices": [{"name": "x", "use": "swap", "size": "1G"}]}, swap_defaults="zstd")["errors"]
    assert errors == ["Host h1: zram_device_defaults is 'zstd': not a mapping. Give the defaults as a mapping, e.g. "
                      "{algorithm: zstd}."]


def _brd_host():
    host = facts()
    host["support"].update(brd=True, kernel="6.1.0-test")
    return host


def test_the_brd_role_on_its_own_is_planned_on_the_host_with_its_count_as_a_number():
    """ansible-core 2.17 and 2.18 (and -e) hand brd_count on as the string "2": the host's plan reads it as 2."""
    result = door({"brd": {"state": "present", "count": "2", "size": "64M",
                           "mounts": [{"disk": 1, "path": "/srv/scratch"}]}}, host_facts=_brd_host())
    assert result["errors"] == []
    assert (result["brd"]["module"]["rd_nr"], result["brd"]["module"]["action"]) == (2, "load")
    assert [(mount["src"], mount["label"]) for mount in result["brd"]["mounts"]] == [("/dev/ram1", "brd_mounts[0]")]


def test_the_brd_door_refuses_what_the_brd_preflight_refused():
    result = door({"brd": {"state": "present", "count": "many", "size": "64M",
                           "mounts": [{"disk": 0, "path": "/srv/link/x"}]}},
                  host_facts=facts(), view=FakeView(links={"/srv/link": "/etc"}))
    errors = result["errors"]
    assert any("brd_count is 'many': not a number of disks" in error for error in errors), errors
    assert any("brd cannot load on this host" in error for error in errors), errors
    assert any(error.startswith("Host h1: brd_mounts[0].path is '/srv/link/x': a symlink") for error in errors), errors
    assert door({"brd": "yes"})["errors"] == [
        "Host h1: the brd request is 'yes': not a mapping of state, count, size and mounts."]
