# SPDX-License-Identifier: GPL-2.0
#
# User-facing commands of rust-plx-dma.  Kbuild (next to this file) is what
# the kernel's build system reads for `make -C $KDIR M=$PWD`; this Makefile is
# only for people and CI.
#
#   make run                 build what is missing, boot a guest, run the demo
#   make check [SUITE=name]  every test suite, or one (SUITE=list lists them)
#   make soak [SUITE=name]   the long runs (not in CI): emu, fault-matrix,
#                            driver, uapi and rdma suites with soak counts
#                            (SOAK_FUZZ_SECONDS, SOAK_LOAD_COPIES,
#                            SOAK_CYCLES, SOAK_COPIES, SOAK_BIG_COPIES,
#                            SOAK_CHURN, SOAK_BAD_CALLS, SOAK_FUZZ_OPS)
#   make bench               Rust vs C plx_dma and engine vs CPU, side by side
#   make shell               an interactive guest with everything loaded
#   make modules [KDIR=dir]  build the modules (default: the cached test kernel)
#   make kernel [FLAVOUR=test|bench]
#   make env                 create the pinned trixie root only

SHELL := /bin/bash
FLAVOUR ?= test
SUITE ?=

.PHONY: all modules run check soak shell env kernel clean

all: modules

modules:
	@scripts/modules-build.sh $(if $(KDIR),$(KDIR),$(FLAVOUR))

run:
	@scripts/run.sh

check:
	@scripts/check.sh $(SUITE)

soak:
	@PLX_SOAK=1 scripts/check.sh $(if $(SUITE),$(SUITE),emu fault-matrix driver uapi rdma)

shell:
	@scripts/guest-run.sh -i -k $(FLAVOUR) -n shell

env:
	@scripts/env-setup.sh

kernel:
	@scripts/kernel-build.sh $(FLAVOUR)

clean:
	rm -rf build

.PHONY: fmt
# Format the kernel Rust with the toolchain that checks it.
fmt:
	@bash -c '. scripts/lib.sh && in_root sh -c "cd $$REPO && rustfmt --config-path .rustfmt.toml $$(git ls-files -co --exclude-standard "*.rs" | grep -v ^tools/plx-dma-emu/ | tr "\n" " ")"'

.PHONY: bench
bench:
	@scripts/bench.sh
