# The front door: `make demo` runs the main job on the built-in lab, `make test` runs every test.
# Both install what they need on a fresh Debian 12 machine (as root) and can be run again.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/.cache/collections
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_CONFIG := $(CURDIR)/scripts/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)
SCENARIOS ?= $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))

.PHONY: demo demo-test test test-vm test-powercut setup lab lab-down vm-image vm-down lint unit sanity molecule build tarball-lab apt-lock bench bench-fleet bench-converge bench-stability bench-survey bench-metrics bench-persist bench-persist-database bench-lab bench-seeds clean

# Everything the tests use (with qemu, promtool and chromium); `make lab` installs only what the lab needs.
setup:
	bash scripts/bootstrap.sh --test
	bash scripts/lab/link_collection.sh

lab:
	bash scripts/lab/up.sh

lab-down:
	ansible-playbook -i inventories/lab scripts/lab/lab.yml -e lab_state=absent

# The VM for what containers cannot show (brd, module loading, real reboots): molecule/vm.
vm-image: setup
	bash scripts/lab/vm_image.sh

vm-down:
	bash scripts/lab/vm.sh down

# Power cuts in the lab VM (tests/powercut/powercut.py): a directory with known data migrated into a persisted tmpfs
# by a run the power cuts short, then a persisted tmpfs with numbered markers, one clean reboot,
# then CUTS power cuts (10; make test runs 3) during syncs, between them, during the restore at boot and early in a
# boot: after each boot one complete earlier copy, never a mix, never older than one interval plus one sync; the
# journal's files verify. About 8 minutes.
test-powercut: setup
	CUTS=$(or $(CUTS),10) bash scripts/test/powercut.sh

# The demo's benchmark measures one host, lab-build: its build directory (tmpfs) against its disk, every test 5 times
# after a warm-up and at most twice more where its figures scatter, the compile test included (about 5 minutes).
# `make bench-lab` measures every RAM mount of every lab host, with the stopping rule's whole range (up to 15 runs).
DEMO_BENCHMARK := --limit lab-build \
  -e '{"benchmark_targets": [{"path": "/var/cache/lab-build", "label": "build"}], "benchmark_max_runs": 7}'

# The survey, site.yml, the facts, the benchmark (scripts/lab/demo.sh), each also in build/demo/<playbook>.log, then a
# recap of at most 25 lines: per host its RAM mounts and whether site.yml changed it, the benchmark's headline, the
# reports' paths (scripts/lab/recap.py).
demo: export DEMO_BENCHMARK_ARGS = $(DEMO_BENCHMARK)
demo: lab
	bash scripts/lab/demo.sh

# The benchmark on every RAM mount of every lab host, one host at a time, with the opt-in tests each group turns on
# (pgbench on the database host, compile on the builder; about 8 minutes).
bench-lab: lab
	ansible-playbook -i inventories/lab playbooks/site.yml
	ansible-playbook -i inventories/lab playbooks/benchmark.yml

# The seeds' experiments, each the way its write-up ran it, on the lab's database host (the one with every tool:
# PostgreSQL for pg_test_fsync), its /tmp (tmpfs) against its disk; each write-up's table beside ours.
bench-seeds: lab
	ansible-playbook -i inventories/lab playbooks/site.yml
	ansible-playbook -i inventories/lab playbooks/benchmark.yml --limit lab-db \
	  -e '{"benchmark_profile": "seeds", "benchmark_targets": [{"path": "/tmp", "label": "tmp"}]}'

lint: setup
	bash scripts/test/lint.sh

unit: setup
	$(BIN)/python -m pytest tests/unit -q

# Every invalid and hostile request (tests/policies/invalid.yml, hostile.yml) through the entry role on this
# machine's own kernel, as root, in a private mount namespace: each must be refused before any change.
.PHONY: hostile
hostile: setup
	bash scripts/test/hostile.sh

# ramdisk_apply's transactions on this machine's own kernel, as root, each case in a private mount namespace
# (tests/transaction/transaction.py): a run killed before each of its journal writes and during its copy, then run
# again; the same kill points then a power cut and a boot without systemd, then run again; 2 and 5 runs at once; a
# full /etc; zram devices killed at every journal write, and device 3 of 4 refused.
# Nothing hidden, the end state of one whole run, refusals that say why; every zram device a case made removed.
.PHONY: transaction
transaction: setup
	bash scripts/test/transaction.sh

# The kill points of a persisted mount's adoption and removal (tests/transaction/persist.py): persist needs systemd,
# so each case runs in a fresh systemd container of the lab's Debian 12 image (txpersist-*). A run killed before each
# of its journal writes, then run again: no data hidden or lost, the disk copy untouched, the end state of one run.
.PHONY: transaction-persist
transaction-persist: setup
	bash scripts/test/transaction_persist.sh

# The power-cut matrix (tests/transaction/powercut_matrix.py): every transaction kind (mount, migrate, zram file
# system; migrate with persist, persist adopting a backing, a live mount gaining persist, removal with return, /var/log
# on the log purpose) cut after each journaled step, booted and run again: no file lost, none hidden, none only in
# RAM. Namespaces (zram one point at a time), and systemd containers (pcmatrix-*) for persist and log; prints the
# number of points and a table per kind. Every point of every kind (about 256 without the log kind's 66, 35 minutes
# here without it); `make test` takes every other point of the container kinds, all but log (README)
# (tests/transaction/powercut_matrix.py says why that keeps every state a host can be left in).
.PHONY: transaction-powercut
transaction-powercut: setup
	bash scripts/test/powercut_matrix.sh

# The log purpose for real (scripts/test/log_purpose.sh): /var/log of a systemd container (logpurpose-*) on tmpfs with
# persist; journald writing numbered lines while syncs run, each copy checked with journalctl --verify and for every
# line logged before it; logrotate -f on the mount; a clean reboot and a power cut bring the lines back.
.PHONY: test-log
test-log: setup
	bash scripts/test/log_purpose.sh

# The log mount's adoption killed just before journal writes around journald's steps (out of /var/log/journal, the
# mount, the drop-in between its restarts, the first copy, back in), each then run again; about 5 minutes.
.PHONY: test-log-kill
test-log-kill: setup
	bash scripts/test/log_purpose.sh --kill 3,5,11,20,42,44,46,48,60

# A local user against a persisted RAM mount (scripts/test/local_user.sh, tests/adversary/local_user.py): mallory, an
# unprivileged user, against a 1777 tmpfs kept on disk while syncs run back to back, 30 s an attack, each in a fresh
# systemd container (advuser-*): write the backing, its parents and the state; backings she owns or whose parent
# she owns (the plan must refuse them); the helper's names planted in the mount root; directories swapped for links
# to root-only places; the mount filled; a million inodes. After each, and after a power cut and the boot's restore:
# syncs went on, nothing lost, nothing outside the mount and the backing changed, nothing root-only copied. A
# verdict per attack; ONLY=plant,swap runs those; NR_INODES=1010000 gives the inodes attack the whole million (20,000
# by default, for the suite's time).
.PHONY: test-local-user
test-local-user: setup
	bash scripts/test/local_user.sh $(if $(ONLY),--only $(ONLY)) $(if $(NR_INODES),--nr-inodes $(NR_INODES))

# persist.stop_services under a real systemd (tests/transaction/persist_services.py): an interval sync copies with the
# service stopped and starts it again; one stopped (TERM) or killed (KILL) mid-copy starts it again; a service an
# admin stopped stays stopped; a poweroff mid-copy starts nothing, and the stop-time sync writes the last copy.
# One container of the lab's Debian 12 image, about 10 s.
.PHONY: transaction-persist-services
transaction-persist-services: setup
	bash scripts/lab/dockerd.sh
	bash scripts/lab/images.sh bookworm >/dev/null
	bash scripts/lab/link_collection.sh
	$(BIN)/python tests/transaction/persist_services.py

# ansible-test sanity on each supported ansible-core (requirements/sanity-core-*.txt), one venv each; 2.20 and
# later on Debian 13's Python 3.13, in the controller container (scripts/test/controller.sh).
sanity: setup
	bash scripts/lab/dockerd.sh
	bash scripts/lab/images.sh trixie-controller
	bash scripts/test/sanity.sh --all

# Every scenario of molecule/ (or SCENARIOS="a b"), one after the other, with the time each took.
molecule: setup vm-image
	bash scripts/lab/dockerd.sh
	bash scripts/lab/images.sh
	bash scripts/test/molecule.sh $(SCENARIOS)

# The VM scenario (brd, zram, tmpfs through a real reboot under qemu TCG; about 10 minutes): part of
# `make test`; this runs it alone.
test-vm: setup vm-image
	bash scripts/test/molecule.sh vm

build: setup
	bash scripts/test/build.sh

# The built tarball, installed into an empty collections path, runs the lab playbooks by their collection
# names with each supported ansible-core (requirements/sanity-core-*.txt; 2.20 and later from the
# controller container), all at once, each on lab containers of its own (pkg217-lab-*, ...); a `make demo`
# lab is left alone.
tarball-lab: build
	bash scripts/lab/dockerd.sh
	bash scripts/lab/images.sh
	bash scripts/test/tarball_lab.sh --all

# The execution environment: `ansible-builder create` of execution-environment.yml, checked; no image is built.
.PHONY: ee bench-backends
ee: setup
	bash scripts/test/ee.sh

# The package step of the setup with dpkg's lock held by another process for 20 s, in a lab container: it waits,
# says who holds the lock, and succeeds; with APT_LOCK_WAIT=4 it gives up and says to run it again (30 s).
apt-lock: setup
	bash scripts/lab/dockerd.sh
	bash scripts/lab/images.sh
	bash scripts/test/apt_lock.sh

# `make demo` as a new user runs it, with dpkg's lock held for its first 20 s and a one-job benchmark: its last 25
# lines must be the recap, and site.yml again must change nothing; the lab is taken down again if it was not up.
demo-test: setup
	bash scripts/test/demo.sh

# Every suite above, on two lanes at once that take the next suite from one queue, longest first
# (scripts/test/all.sh). One line per suite; each suite's whole output is in build/test/<suite>.log; at
# the end each suite's time, each lane's idle time and the total.
test: setup
	bash scripts/test/all.sh

bench: setup
	$(BIN)/python scripts/bench/facts_scan.py

# tmpfs, ramfs, zram (and brd where the kernel can load it) against the disk on this machine, as root;
# scratch mounts under /mnt, all removed again. Figures: build/bench-backends/<run>/summary.md.
bench-backends: setup
	@run=$$(date -u +%Y%m%dT%H%M%SZ); \
	  ansible-playbook -i localhost, -c local -e ansible_python_interpreter=$(CURDIR)/$(BIN)/python \
	    scripts/bench/backends.yml -e bench_backends_run_id=$$run $(BENCH_ARGS) && \
	  $(BIN)/python scripts/bench/backends_summary.py build/bench-backends/$$run

# site.yml on 1 and on 20 fresh lab containers, first run and idempotent re-run, beside a plain ansible.posix.mount
# playbook doing the same mounts: CPU per host (controller + host) beside the targets, wall. RUNS=N re-runs (3).
bench-fleet: setup
	bash scripts/lab/dockerd.sh
	bash scripts/lab/images.sh
	$(BIN)/python scripts/bench/fleet.py --runs $(or $(RUNS),3)

# site.yml against a plain ansible.posix.mount playbook on one fresh lab host, 1 and 10 tmpfs mounts, and site.yml
# alone for a persisted tmpfs and a zram file system; first run and no-op re-run: wall time, task results, task
# headers, module runs, beside the targets. RUNS=N repeats (3); CASES=tmpfs-01,persist,... runs only those.
bench-converge: setup
	bash scripts/lab/dockerd.sh
	bash scripts/lab/images.sh
	$(BIN)/python scripts/bench/converge.py --runs $(or $(RUNS),3) $(if $(CASES),--cases $(CASES))

# The benchmark twice back to back on the lab (its policy applied first, so every host has RAM mounts to
# measure): the share of RAM/disk ratios that agree within 1.25x.
# PROFILE=standard for the other profile (about 70 minutes with LIMIT=lab-build, one host; far longer on all).
bench-stability: lab
	ansible-playbook -i inventories/lab playbooks/site.yml
	$(BIN)/python scripts/bench/stability.py --profile $(or $(PROFILE),quick) -- $(if $(LIMIT),--limit $(LIMIT))

# One run of the metrics collector on 10 tmpfs mounts and 2 zram devices made on this machine's kernel (in a
# private mount namespace, all removed again): its time beside the target (0.2 s).
bench-metrics: setup
	$(BIN)/python scripts/bench/metrics_cost.py

# One persist sync of a 1.09 GiB, 50,000-file tree with 1% of it changed, on this machine as root (the tree on a tmpfs
# in a private mount namespace, the backing on an ext4 in a file under /var/tmp attached as a loop device; all removed
# again): bytes written to the disk and time, for the full copy (cp -a, as before), the incremental one (rsync
# --link-dest, the design before), rsync run by hand, and the helper as it is (its copy, persist-delta.py: the staged
# roll-forward sync of issue 35) with its next sync, beside the targets (at most 3% of the tree written; at most 1.2x
# rsync by hand's time); then how the bytes written scale with the number of files (the same bytes in 10,000); then
# the peak memory (ru_maxrss and VmHWM) and time of one sync of 100,000 and of 1,000,000 files with 1% changed,
# beside rsync -a by hand (target: under 256 MiB). `scripts/bench/persist.py --memory-only [N,N]` runs that part
# alone.
bench-persist: setup
	$(BIN)/python scripts/bench/persist.py

# The cost of a consistent interval sync of a database (persist.stop_services): PostgreSQL 15 on a persisted tmpfs in a
# systemd container of the lab image ramdisk-lab/debian:12-postgresql, pgbench running, a small (scale 1) and a ~1 GiB
# (scale 64) database: each sync's downtime (stop, copy, start) and pgbench's lost throughput, beside the live copy;
# then each copy, and live copies with a CHECKPOINT during them, started on their own. About 10 minutes here.
bench-persist-database: setup
	bash scripts/lab/dockerd.sh
	$(BIN)/python scripts/bench/persist_database.py $(if $(SCALES),--scales $(SCALES))

# survey_report on 10,000 synthetic hosts: the time to write the whole report, beside its target (10 s).
bench-survey: setup
	$(BIN)/python scripts/bench/survey_report.py

clean: lab-down vm-down
	rm -rf build .cache tests/output
