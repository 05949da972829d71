# Two commands set everything up on a fresh Debian 12 machine (as root):
#   make setup   # Debian packages, .venv, the package with its test extras
#   make test    # the whole test suite (FUSE tests included)
PYTHON ?= python3
VENV := .venv
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEBS := fuse3 libfuse3-dev linux-perf pkg-config gcc make python3-venv python3-dev \
        trace-cmd libtracefs-dev libtraceevent-dev strace systemd shellcheck

.PHONY: setup share test fuzz bench oracle-test container-test clean

setup:
	$(SUDO) apt-get update
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $(DEBS)
	$(PYTHON) -m venv $(VENV)
	# setuptools 77+: pyproject's SPDX license (setup.py runs with the venv's own).
	$(VENV)/bin/pip install --upgrade pip 'setuptools>=77'
	$(VENV)/bin/pip install -e '.[test,bench]'

# The man page and shell completions, from the command line's own definition.
share:
	$(VENV)/bin/python share/generate.py

test:
	$(VENV)/bin/pytest

# The adversarial suite with a long fuzzing budget (make test runs a few
# seconds of every fuzzer); prints the figures docs/reliability.md publishes.
FUZZ_SCALE ?= 40
fuzz:
	rm -f fuzz-report.jsonl
	TFUSE_FUZZ_SCALE=$(FUZZ_SCALE) TFUSE_FUZZ_REPORT=$(CURDIR)/fuzz-report.jsonl \
		$(VENV)/bin/pytest -p no:cacheprovider -o timeout=7200 tests/adversarial; \
		status=$$?; $(VENV)/bin/python -m tests.adversarial.report fuzz-report.jsonl; exit $$status

bench:
	$(VENV)/bin/python -m bench

# Differential tests against real 6.12 and 6.1 kernels booted in QEMU, and the
# kernels' own user_events selftests on both sides (tests/oracle, docs/oracle.md).
# The first run installs the build tools and builds both kernels (4-8 min each,
# cached in ~/.cache/tracefs-fuse-oracle).
ORACLE := $(VENV)/bin/python -m tests.oracle.kernel
oracle-test:
	@missing="$$($(ORACLE) missing-packages)"; if [ -n "$$missing" ]; then \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $$missing; fi
	$(ORACLE) build 6.12
	$(ORACLE) build 6.1
	$(VENV)/bin/pytest -m oracle tests/oracle

# Real podman containers, rootful and rootless, from a Debian 12 root filesystem built with
# mmdebstrap (cached in ~/.cache/tracefs-fuse-containers; docs/containers.md). As root.
CONTAINER_DEBS := podman runc mmdebstrap uidmap slirp4netns
container-test:
	@dpkg -s $(CONTAINER_DEBS) >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive \
	    $(SUDO) apt-get install -y --no-install-recommends $(CONTAINER_DEBS)
	$(VENV)/bin/pytest -m containers tests/containers

clean:
	rm -rf build *.egg-info tracefs_fuse/fuse/_bridge*.so
