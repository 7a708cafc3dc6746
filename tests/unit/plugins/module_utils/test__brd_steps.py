# SPDX-License-Identifier: GPL-3.0-or-later
"""brd as journaled transactions, on a fake kernel: modprobe, blkid, mkfs and mount are recorded and act on
dicts and on /sys/module/brd under the scratch directory; the files (fstab, records, the boot files) are written
for real under tmp_path. The VM scenario (molecule/vm) loads brd for real.
"""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.ramdisk.provision.plugins.module_utils import _brd_steps as bs
from ansible_collections.ramdisk.provision.plugins.module_utils import _executor as ex_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _steps as steps_mod
from ansible_collections.ramdisk.provision.plugins.module_utils import _host_paths as paths
from ansible_collections.ramdisk.provision.plugins.module_utils import _zram_steps as zs
from ansible_collections.ramdisk.provision.plugins.module_utils._dry_run import mark_todo
from ansible_collections.ramdisk.provision.plugins.module_utils._journal import Journal
from test__zram_steps import FSTAB, Executor as ZramExecutor
from test__zram_steps import host  # noqa: F401 # pylint: disable=unused-import

OPTIONS = ["discard", "nosuid", "nodev", "nofail", "x-systemd.before=local-fs.target",
           "x-systemd.requires=systemd-modules-load.service", "x-systemd.makefs"]


class FakeKernel(zs.Kernel):
    """The mount table and swaps in lists; files (brd's parameters, fstab) read from the scratch directory."""

    def __init__(self):
        self.mounted = []
        self.filesystems = {}

    def mounts(self):
        return [{"source": src, "mount_point": path, "fstype": fstype, "mount_id": index + 1}
                for index, (src, path, fstype) in enumerate(self.mounted)]

    def swaps(self):
        return []


class Executor(ZramExecutor):
    """The zram tests' executor (calls recorded, tools refused, systemctl faked); modprobe, blkid, mkfs and mount
    act on the fake kernel."""

    def __init__(self, kernel, refuse=(), check=False):
        super().__init__(kernel, refuse=refuse)
        self.check = check

    def _run(self, argv):
        found = super()._run(argv)
        if argv[0] in self.refuse:
            return found
        kernel = self.kernel
        if argv[:2] == ["modprobe", "brd"]:
            load(dict(arg.split("=") for arg in argv[2:]))
        elif argv[:3] == ["modprobe", "-r", "brd"]:
            if kernel.mounted:
                return 1, "", "modprobe: FATAL: Module brd is in use."
            shutil.rmtree(paths.BRD_MODULE)
            kernel.filesystems.clear()
        elif argv[0] == "blkid":
            known = kernel.filesystems.get(argv[-1])
            return (0, known + "\n", "") if known else (2, "", "")
        elif argv[0].startswith("mkfs"):
            kernel.filesystems[argv[-1]] = argv[0].split(".", 1)[1]
        elif argv[:2] == ["mount", "-t"]:
            kernel.mounted.append((argv[-2], argv[-1], argv[2]))
        return found


def load(params):
    os.makedirs(paths.BRD_PARAMETERS, exist_ok=True)
    for name, value in params.items():
        with open(os.path.join(paths.BRD_PARAMETERS, name), "w") as handle:
            handle.write("%s\n" % value)


@pytest.fixture
def brd_host(host, monkeypatch):
    """The zram tests' scratch host (fstab, records, units, staging) with brd's files and /sys/module/brd too."""
    etc = host / "etc"
    for name, value in (("TMPFILES_DIR", etc / "tmpfiles.d"),
                        ("SEED_WANTS", etc / "systemd" / "system" / "local-fs.target.wants"),
                        ("BRD_MODULES_LOAD", etc / "modules-load.d" / "brd.conf"),
                        ("BRD_MODPROBE", etc / "modprobe.d" / "brd.conf"),
                        ("BRD_MODULE", host / "sys" / "module" / "brd"),
                        ("BRD_PARAMETERS", host / "sys" / "module" / "brd" / "parameters")):
        monkeypatch.setattr(paths, name, str(value))
    return host


def plan(brd_host, action="load", rd_nr=2, rd_size_kib=65536, state="present", mount_action="mount", mounts=True):
    path = str(brd_host / "srv" / "brd")
    mount = {"label": "brd_mounts[0]", "path": path, "path_given": path,
             "state": "absent" if state == "absent" else "mounted", "fstype": "ext4", "src": "/dev/ram0",
             "mode": "0750", "owner": None, "group": None, "migrate": False, "persist": None, "mkfs_options": [],
             "options": list(OPTIONS), "remount_options": [], "action": mount_action, "disk": 0}
    return {"module": {"state": state, "action": action, "rd_nr": rd_nr, "rd_size_kib": rd_size_kib,
                       "reason": None, "reboot_required": False},
            "mounts": [mount] if mounts else []}


def run(the_plan, kernel, brd_host, **kwargs):
    ex = Executor(kernel, **kwargs)
    return ex, bs.apply_brd(the_plan, ex, Journal(str(brd_host / "journal.jsonl")), "run1")


def host_files(brd_host):
    out = {}
    for root in (brd_host / "etc", brd_host / "sys"):
        for here, _dirs, names in os.walk(str(root)):
            for name in names:
                with open(os.path.join(here, name), "rb") as handle:
                    out[os.path.join(here, name)] = handle.read()
    return out


def test_a_new_disk_is_loaded_made_and_mounted_with_the_boot_files(brd_host):
    kernel = FakeKernel()
    ex, out = run(plan(brd_host), kernel, brd_host)
    assert [item["steps"] for item in out] == [
        ["brd_load", "file", "file"],
        ["mkfs", "mkdir", "mount", "root", "fstab", "reload", "file", "file"]]
    assert ex.calls[0] == "modprobe brd rd_nr=2 rd_size=65536"
    assert "mkfs.ext4 -q -F /dev/ram0" in ex.calls
    assert kernel.mounted == [("/dev/ram0", str(brd_host / "srv" / "brd"), "ext4")]
    assert open(paths.BRD_MODULES_LOAD).read().endswith("\nbrd\n")
    assert open(paths.BRD_MODPROBE).read().endswith("\noptions brd rd_nr=2 rd_size=65536\n")
    assert "/dev/ram0 %s ext4" % (brd_host / "srv" / "brd") in open(paths.FSTAB).read()
    assert os.stat(str(brd_host / "srv" / "brd")).st_mode & 0o777 == 0o750
    assert not os.path.exists(str(brd_host / "journal.jsonl"))


def test_loaded_as_asked_and_mounted_there_is_nothing_to_do(brd_host):
    kernel = FakeKernel()
    run(plan(brd_host), kernel, brd_host)
    ex, out = run(plan(brd_host, action="ok", mount_action="ok"), kernel, brd_host)
    assert [item["steps"] for item in out] == [[], []] and not any(item["changed"] for item in out)
    assert ex.calls == []  # the mounted disk is in use: no blkid, no mkfs


def test_the_plan_skips_brd_loaded_and_mounted_as_asked_and_not_a_new_count(brd_host):
    kernel = FakeKernel()
    run(plan(brd_host), kernel, brd_host)
    before = host_files(brd_host)
    for the_plan, todo in ((plan(brd_host, action="ok", mount_action="ok"), False),
                           (plan(brd_host, action="reload", rd_nr=3, mount_action="ok"), True)):
        checking = Executor(kernel)
        checking.check = True
        whole = {"tmpfs": [], "ramfs": [], "zram": [], "brd": the_plan}
        assert mark_todo(whole, checking, {}, False) is todo and the_plan["todo"] is todo
    assert host_files(brd_host) == before


def test_files_of_earlier_versions_are_taken_over_without_a_change(brd_host):
    kernel = FakeKernel()
    load({"rd_nr": 2, "rd_size": 65536})
    for name, text in ((paths.BRD_MODULES_LOAD, "brd\n"), (paths.BRD_MODPROBE, "options brd rd_nr=2 rd_size=65536\n")):
        os.makedirs(os.path.dirname(name))
        with open(name, "w") as handle:
            handle.write(text)
    (what, steps, pivot), = bs.build_brd(plan(brd_host, action="ok", mounts=False), Executor(kernel))
    assert steps == [] and pivot is None


def test_a_new_count_reloads_brd_when_no_disk_is_in_use_and_makes_the_file_system_again(brd_host):
    kernel = FakeKernel()
    load({"rd_nr": 1, "rd_size": 65536})
    kernel.filesystems["/dev/ram0"] = "ext4"  # the old disk's: gone with the reload
    (module, steps, pivot), _disk = bs.build_brd(plan(brd_host, action="reload"), Executor(kernel))
    assert steps[pivot]["step"] == "brd_load" and steps[0]["args"] == {"rd_nr": 1, "rd_size_kib": 65536}
    ex, out = run(plan(brd_host, action="reload"), kernel, brd_host)
    assert out[0]["steps"][:2] == ["brd_unload", "brd_load"] and out[1]["steps"][0] == "mkfs"
    assert ex.calls[:2] == ["modprobe -r brd", "modprobe brd rd_nr=2 rd_size=65536"]
    assert open(os.path.join(paths.BRD_PARAMETERS, "rd_nr")).read() == "2\n"


def test_absent_unmounts_first_then_unloads_brd_and_removes_its_boot_files(brd_host, monkeypatch):
    kernel = FakeKernel()
    run(plan(brd_host), kernel, brd_host)
    path = str(brd_host / "srv" / "brd")
    monkeypatch.setattr(steps_mod, "mountinfo", lambda: [{"mount_point": path, "mount_id": 7, "fstype": "ext4",
                                                          "source": "/dev/ram0"}])
    real_tool = Executor._run

    def umount(self, argv):
        if argv[0] == "umount":
            kernel.mounted = [m for m in kernel.mounted if m[1] != argv[-1]]
            monkeypatch.setattr(steps_mod, "mountinfo", lambda: [])
        return real_tool(self, argv)
    monkeypatch.setattr(Executor, "_run", umount)
    ex, out = run(plan(brd_host, action="unload", state="absent", mount_action="unmount"), kernel, brd_host)
    assert [item["what"] for item in out] == ["%s (/dev/ram0)" % path, "brd module"]
    assert out[0]["steps"][0] == "unmount" and out[1]["steps"] == ["brd_unload", "file", "file"]
    assert [call for call in ex.calls if not call.startswith("systemctl")] == ["umount %s" % path, "modprobe -r brd"]
    assert not os.path.exists(paths.BRD_MODULE)
    assert not os.path.exists(paths.BRD_MODULES_LOAD) and not os.path.exists(paths.BRD_MODPROBE)
    assert open(paths.FSTAB).read() == FSTAB


def test_a_failed_mount_undoes_the_load_and_the_boot_files(brd_host):
    kernel = FakeKernel()
    os.makedirs(os.path.dirname(paths.BRD_MODPROBE))
    with open(paths.BRD_MODPROBE, "w") as handle:
        handle.write("# someone's\noptions brd rd_nr=1 rd_size=1024\n")
    before = host_files(brd_host)
    with pytest.raises(ex_mod.ApplyError) as failed:
        run(plan(brd_host), kernel, brd_host, refuse=("mount",))
    message = str(failed.value)
    assert message.startswith("Host web1: brd's %s (/dev/ram0) failed at its step 'mount'" % (brd_host / "srv" / "brd"))
    assert "brd not loaded" in message
    assert host_files(brd_host) == before
    assert not os.path.exists(paths.BRD_MODULE) and kernel.mounted == []
    assert not os.path.exists(str(brd_host / "srv" / "brd"))
    assert not os.path.exists(str(brd_host / "journal.jsonl"))


def test_undoing_a_load_leaves_brd_that_was_loaded_before(brd_host):
    kernel = FakeKernel()
    load({"rd_nr": 2, "rd_size": 65536})
    ex = Executor(kernel)
    ex.undo("brd_load", {"rd_nr": 2, "rd_size_kib": 65536, "loaded_before": True}, {}, True)
    assert os.path.isdir(paths.BRD_MODULE) and ex.calls == []


def test_undoing_an_unload_loads_brd_again_with_the_old_parameters(brd_host):
    ex = Executor(FakeKernel())
    ex.undo("brd_unload", {"rd_nr": 1, "rd_size_kib": 1024}, {}, True)
    assert ex.calls == ["modprobe brd rd_nr=1 rd_size=1024"]


def test_a_disk_in_use_keeps_brd_and_the_plan_says_why(brd_host):
    kernel = FakeKernel()
    load({"rd_nr": 1, "rd_size": 1024})
    kernel.mounted.append(("/dev/ram0", "/srv/other", "ext4"))
    the_plan = plan(brd_host, action="blocked", state="present", mounts=False)
    the_plan["module"]["reason"] = "brd is loaded with rd_nr=1 rd_size=1024; the new ... applies at the next boot"
    ex, out = run(the_plan, kernel, brd_host)
    assert out[0]["reason"] == the_plan["module"]["reason"] and out[0]["steps"] == ["file", "file"]
    assert not [call for call in ex.calls if call.startswith("modprobe")]
    assert open(paths.BRD_MODPROBE).read().endswith("options brd rd_nr=2 rd_size=65536\n")


def test_check_mode_builds_every_step_and_changes_nothing(brd_host):
    kernel = FakeKernel()
    before = host_files(brd_host)
    ex, out = run(plan(brd_host), kernel, brd_host, check=True)
    assert [item["steps"][0] for item in out] == ["brd_load", "mkfs"] and all(item["changed"] for item in out)
    assert host_files(brd_host) == before and kernel.mounted == [] and not os.path.exists(str(brd_host / "srv"))
    assert all(call.startswith("blkid") for call in ex.calls)
    assert not os.path.exists(str(brd_host / "journal.jsonl"))


def test_recovery_rolls_a_load_that_took_effect_forward(brd_host):
    kernel = FakeKernel()
    ex = Executor(kernel)
    step = {"step": "brd_load", "args": {"rd_nr": 2, "rd_size_kib": 65536, "loaded_before": False}}
    assert ex.took_effect(step, step["args"], True) is False
    load({"rd_nr": 2, "rd_size": 65536})
    assert ex.took_effect(step, step["args"], True) is True
    assert ex.took_effect({"step": "brd_unload", "args": {}}, {}, True) is False
