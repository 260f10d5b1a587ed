# Two set-up commands for a fresh Debian/Ubuntu machine: `make demo` and `make test`.
# Both install what they need: Debian packages (when root), a virtualenv, the package (editable).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SYSTEM_PACKAGES := openmpi-bin libopenmpi-dev openfoam openfoam-examples iproute2 iptables libnetfilter-queue-dev gcc make \
  procps binutils \
  chromium chromium-driver
PYTEST_ARGS ?=
# Real flux-core (the `flux` flavour's broker), built once from the peers tarball into a cache outside the checkout.
FLUX_CORE_VERSION := 0.88.0
FLUX_CORE_CACHE ?= /var/cache/miniclusters
# Not FLUX_CORE_PREFIX: that names an install to use (see flux_view.py), never one to build over.
FLUX_CORE_BUILD := $(FLUX_CORE_CACHE)/flux-core-$(FLUX_CORE_VERSION)
FLUX_CORE_TARBALL ?= $(abspath $(CURDIR)/../shared/peers/flux-core-$(FLUX_CORE_VERSION).tar.gz)
FLUX_CORE_STAMP := $(FLUX_CORE_BUILD)/.miniclusters-installed
FLUX_CORE_PACKAGES := autoconf automake libtool make pkg-config gcc g++ libc6-dev libzmq3-dev uuid-dev \
  libjansson-dev liblz4-dev libarchive-dev libhwloc-dev libsqlite3-dev lua5.1 liblua5.1-0-dev lua-posix python3-dev \
  python3-cffi python3-ply python3-setuptools python3-yaml jq libncurses-dev libsodium-dev

# Our images (images/build.sh): built with podman (runc; our images/containers.conf) from registry packages only,
# FROM a debian:12 made with debootstrap when no image registry answers. Each is rebuilt only when its content
# changed (a hash label, also in $(IMAGES_CACHE)/NAME.hash); podman's store and layer cache keep the rest.
IMAGES_CACHE ?= $(FLUX_CORE_CACHE)/images
# mypy's incremental cache, kept between clones (a fresh clone otherwise re-checks every module and every stub:
# minutes of CI); mypy re-checks whatever changed, by content hash.
MYPY_CACHE ?= $(FLUX_CORE_CACHE)/mypy
IMAGES_PACKAGES := podman buildah runc catatonit debootstrap

.PHONY: all setup system-deps venv pmpi demo test lint format docs crds clean flux-core flux-core-deps images images-deps \
  kube kube-deps kube-up kube-down

all: test

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "system packages: present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing system packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else echo "warning: missing system packages:$$missing (not root: install them with apt-get)"; fi

flux-core-deps:
	@$(MAKE) --no-print-directory system-deps SYSTEM_PACKAGES="$(FLUX_CORE_PACKAGES)"

# The stamp is written only after `make install` succeeds, so an interrupted build is redone from scratch.
# flock: two checkouts sharing the cache build it once.
flux-core:
	@if [ -f "$(FLUX_CORE_STAMP)" ]; then echo "flux-core $(FLUX_CORE_VERSION): present in $(FLUX_CORE_BUILD)"; \
	else $(MAKE) --no-print-directory flux-core-deps && mkdir -p "$(FLUX_CORE_CACHE)" && \
	  flock "$(FLUX_CORE_CACHE)/.flux-core.lock" $(MAKE) --no-print-directory "$(FLUX_CORE_STAMP)"; fi

$(FLUX_CORE_STAMP):
	@test -f "$(FLUX_CORE_TARBALL)" || { echo "flux-core tarball not found: $(FLUX_CORE_TARBALL)" \
	  "(set FLUX_CORE_TARBALL)" >&2; exit 1; }
	@echo "building flux-core $(FLUX_CORE_VERSION) into $(FLUX_CORE_BUILD) (about 5 minutes on 2 cores)"
	@# configure.ac takes the version from $$FLUX_VERSION (else `git describe`, and a tarball has no .git)
	@start=$$(date +%s); build="$(FLUX_CORE_CACHE)/build-flux-core-$(FLUX_CORE_VERSION)"; \
	rm -rf "$$build" "$(FLUX_CORE_BUILD)" && mkdir -p "$$build" && \
	tar -xzf "$(FLUX_CORE_TARBALL)" -C "$$build" --strip-components=1 && cd "$$build" && \
	export FLUX_VERSION=$(FLUX_CORE_VERSION) && ./autogen.sh >autogen.log 2>&1 && \
	PYTHON=/usr/bin/python3 ./configure --prefix="$(FLUX_CORE_BUILD)" \
	  --disable-docs >configure.log 2>&1 && \
	make -j$$(nproc) >make.log 2>&1 && make install >install.log 2>&1 || \
	{ echo "flux-core build failed: see the logs in $$build" >&2; exit 1; }; \
	cd / && rm -rf "$$build" && touch "$(FLUX_CORE_STAMP)" && \
	echo "flux-core $(FLUX_CORE_VERSION): built in $$(( $$(date +%s) - start ))s"

images-deps:
	@$(MAKE) --no-print-directory system-deps SYSTEM_PACKAGES="$(IMAGES_PACKAGES)"

# flock: two checkouts sharing podman's store build one at a time. Cold on 2 cores: see docs/images.md.
images: images-deps
	@mkdir -p "$(IMAGES_CACHE)" && start=$$(date +%s) && \
	MINICLUSTERS_IMAGES_CACHE="$(IMAGES_CACHE)" FLUX_CORE_TARBALL="$(FLUX_CORE_TARBALL)" \
	  flock "$(IMAGES_CACHE)/.lock" sh images/build.sh && \
	echo "images: ready in $$(( $$(date +%s) - start ))s"

# Real Kubernetes (docs/kubernetes.md): built once from its Go modules into a cache outside the checkout, by
# kube/build.sh through a go.mod of ours (kube/gomod.py generates its replaces from the release's own go.mod).
# KUBE_VERSION: the newest release whose kubelet runs here (cgroup v1, Debian's containerd 1.6); the Python side
# names the same (miniclusters/localkube/layout.py, held equal by a test).
KUBE_VERSION := v1.37.2
KUBE_CACHE ?= $(FLUX_CORE_CACHE)/kube
KUBE_STAMP := $(KUBE_CACHE)/$(KUBE_VERSION)/.miniclusters-installed
KUBE_PACKAGES := containerd runc containernetworking-plugins etcd-server iptables conntrack

kube-deps:
	@$(MAKE) --no-print-directory system-deps SYSTEM_PACKAGES="$(KUBE_PACKAGES)"
	@command -v go >/dev/null || { echo "make kube: Go (1.26 or newer) is not installed" >&2; exit 1; }

# The stamp is written only after every binary built; flock: two checkouts sharing the cache build it once.
kube: kube-deps
	@if [ -f "$(KUBE_STAMP)" ]; then echo "kubernetes $(KUBE_VERSION): present in $(KUBE_CACHE)/$(KUBE_VERSION)"; \
	else mkdir -p "$(KUBE_CACHE)" && flock "$(KUBE_CACHE)/.lock" sh -c '\
	  if [ -f "$(KUBE_STAMP)" ]; then exit 0; fi; start=$$(date +%s); \
	  KUBE_VERSION=$(KUBE_VERSION) KUBE_CACHE="$(KUBE_CACHE)" sh kube/build.sh && touch "$(KUBE_STAMP)" && \
	  echo "kubernetes $(KUBE_VERSION): built in $$(( $$(date +%s) - start ))s"'; fi

kube-up: setup kube images
	$(BIN)/minicluster kube up

kube-down: venv
	$(BIN)/minicluster kube down

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# hatchling's editable install is a plain .pth entry: no import hook on `flux run`'s start-up, no warning
	$(PY) -m pip install -q -e '.[dev]'
	@# byte-compile once: CLI start-up matters (`flux run` latency) and PYTHONDONTWRITEBYTECODE may be set
	@$(PY) -m compileall -q common broker miniclusters elasticity bursting >/dev/null
	@touch $(STAMP)

venv: $(STAMP)

pmpi: venv
	@$(BIN)/minicluster pmpi build >/dev/null && echo "PMPI profiler: built"

setup: system-deps venv pmpi

# mypy checks the packages and tests/ (pyproject's [tool.mypy]: the tests' bodies with check_untyped_defs).
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@mkdir -p "$(MYPY_CACHE)" 2>/dev/null || true
	$(BIN)/mypy --cache-dir "$(MYPY_CACHE)"
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The documentation site (mkdocs.yml, docs/), strict: a broken link or anchor or a stale generated page fails it.
# Into out/site, which git ignores; about 10 s. NO_MKDOCS_2_WARNING: Material's banner about its successor.
DOCS_SITE ?= out/site
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(DOCS_SITE)

# Every test's duration also goes to a JUnit report outside the checkout (kept between runs: where CI time goes).
TEST_REPORT ?= $(FLUX_CORE_CACHE)/last-test-run.xml
PYTEST_WORKERS ?= 2
SERIAL_REPORT ?= $(basename $(TEST_REPORT))-serial.xml
# Three parts: on PYTEST_WORKERS workers, everything but the tests marked `serial` (tests that make named local
# clusters or containers stay on one worker each, one at a time: tests/conftest.py MACHINE_GROUPS); then the
# `serial` ones (duty cycles, heartbeats, CPU shares) alone on the machine; then tests/e2e on the real Kubernetes of
# `make kube`, brought up for them (`minicluster kube up`, KUBECONFIG set) and down afterwards, whatever happened.
# Each part writes its own JUnit report.
E2E_REPORT ?= $(basename $(TEST_REPORT))-e2e.xml
test: setup lint docs flux-core images kube
	@mkdir -p "$(dir $(TEST_REPORT))"
	@$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not serial and not real_kube" --ignore=tests/e2e \
	  --durations=25 --junitxml="$(TEST_REPORT)" $(PYTEST_ARGS); rc=$$?; \
	$(PY) -m pytest -m "serial and not real_kube" --ignore=tests/e2e --durations=5 --junitxml="$(SERIAL_REPORT)" \
	  $(PYTEST_ARGS); rc2=$$?; \
	$(BIN)/minicluster kube status >/dev/null 2>&1 && was_up=1 || was_up=0; \
	if kubeconfig=$$($(BIN)/minicluster kube up); then \
	  KUBECONFIG="$$kubeconfig" $(PY) -m pytest tests/e2e tests/kubernetes -m real_kube --durations=10 \
	    --junitxml="$(E2E_REPORT)" $(PYTEST_ARGS); \
	  rc3=$$?; else rc3=1; fi; \
	if [ $$was_up -eq 0 ]; then $(BIN)/minicluster kube down || rc3=1; \
	else echo "kube: left up (it was up before make test)"; fi; \
	if [ $$rc -eq 5 ] && [ $$rc2 -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; \
	[ $$rc -eq 5 ] && rc=0; [ $$rc2 -eq 5 ] && rc2=0; [ $$rc3 -eq 5 ] && rc3=0; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; if [ $$rc2 -ne 0 ]; then exit $$rc2; fi; exit $$rc3

crds: venv
	$(BIN)/minicluster crd --output crds/miniclusters.dev_miniclusters.yaml

# `make demo FLAVOUR=flux`: the same demo on real flux-core (built first, once).
FLAVOUR ?= builtin
demo: setup $(if $(filter flux,$(FLAVOUR)),flux-core)
	FLAVOUR=$(FLAVOUR) bash examples/demo.sh

clean:
	rm -rf $(VENV) build *.egg-info
