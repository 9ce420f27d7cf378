# The two set-up commands of the README:
#   make demo   builds metasched and runs the main job on the built-in defaults:
#               the daemon's demo (DEMO_FLAGS=--exit-after-demo to exit after
#               its summary instead of serving until Ctrl-C; every run starts
#               from a fresh data directory unless DEMO_FLAGS=--keep-data)
#   make test   runs every test, printing each package as it ends
# make check is the fast tier to run while working: gofmt, vet and the tests
# in -short mode (no QEMU, libvirtd, etcd, Chromium or lab of real binaries;
# the skipped tests are listed with their reason). make docs regenerates the
# generated references (the CLI's pages, the HTTP API's page), which the
# tests hold to the code.
# make soak runs the adversary (TestAdversary) with SOAK_CYCLES (default 25)
# SIGKILLs of the daemon under concurrent submissions instead of make test's 4,
# then the failover of three daemons on etcd (TestFailover) with FAILOVER_KILLS
# (default 20) SIGKILLs of the leader instead of 3, then the cloud images at
# length (TestCloudImageSoak: 5 timed boots of the Debian and the bundled
# image, a Debian image whose user-data fails, three migrations without
# shared storage), the MPI job on 6 VMs instead of 4 and 90 rounds instead
# of 30 (TestMPIGrid), the guest grid with an elastic task farm of 150
# tasks instead of 60 (TestGuestGrid), and a second build of the Debian
# image, whose bytes must be the first's (TestBuildDebianReproducible).
# make build builds bin/metasched and the static bin/taskfarm; make install
# copies them into $(PREFIX)/bin (default /usr/local/bin), where the
# README's metasched commands find them, with the man pages and the shell
# completions.
# make demo-vms runs the real demo: three sites of QEMU hosts under private
# libvirtds joined by shaped links, a stream of task-farm jobs in booted VMs,
# predicted against measured per job (DEMO_VMS_FLAGS, e.g. --jobs 10); make
# realgrid runs the real test of Bertogna et al. section 4 on them into
# REALGRID_OUT (default results/realgrid). Both need root.
# make scale measures the daemon at grid scale on simulated hosts (1,000,
# 5,000 and 10,000 hosts; SCALE_FLAGS, e.g. --hosts 1000 --backlog 20000
# --rate 500, and --store etcd or --agents 10) into SCALE_OUT (default
# results/scale); no root, no libvirt; --store etcd runs Debian's
# etcd-server's etcd (make test-deps installs it).
# make papers runs the research tools on the bundled examples; make screenshot
# retakes the README's picture of the dashboard (from its browser test); make
# image builds the bundled guest image (IMAGE_KIND=disk: its disk form) into IMAGE_DIR (default bin/image) from
# Debian packages (cached by its inputs under the user's cache directory);
# make image-debian builds the Debian image (cloud-init, OpenMPI) into
# DEBIAN_IMAGE_DIR (default bin/image-debian) with mmdebstrap;
# make fuzz runs every fuzz target (scripts/fuzz.sh finds them), one at a
# time, for FUZZTIME each (default 10s: make fuzz FUZZTIME=60s).
# Go fetches the modules it needs from the module proxy on the first build;
# both commands first install the Debian packages they need when missing
# (libvirt for the agent, which links libvirt through cgo; libvirtd and QEMU
# for the tests that run real guests; iproute2 for the network tests);
# make test also installs chromium, for the dashboard's browser tests, and
# etcd-server, whose etcd the store's tests on etcd start (make test runs
# the store's tests twice: on bbolt, then on etcd).

GO  ?= go
BIN := bin/metasched
# The task farm, the program jobs run in their VMs: static (no cgo), put
# into the bundled guest image by metasched image build, which finds it
# beside bin/metasched.
TASKFARM := bin/taskfarm

# qemu-utils: libvirt's storage driver makes the VMs' qcow2 overlays of a
# disk image with its qemu-img.
DEB_PACKAGES := pkg-config libvirt0 libvirt-dev libvirt-daemon libvirt-daemon-driver-qemu \
	libvirt-clients qemu-system-x86 qemu-utils iproute2
# The bundled guest image: busybox-static and qemu-guest-agent go into it;
# the kernel package is fetched by the build itself; its disk form is made
# with e2fsprogs' mke2fs and debugfs and qemu-utils' qemu-img.
IMAGE_PACKAGES := busybox-static qemu-guest-agent e2fsprogs qemu-utils
# The Debian image (cloud-init, OpenMPI): made by mmdebstrap from Debian's
# packages, its disk with e2fsprogs and qemu-utils.
DEBIAN_IMAGE_PACKAGES := mmdebstrap e2fsprogs qemu-utils
# Slurm: the tests of Slurm sites start a real cluster (munged, slurmctld,
# a slurmd per node) with its client commands.
SLURM_PACKAGES := slurmctld slurmd slurm-client munge
TEST_PACKAGES := $(DEB_PACKAGES) $(IMAGE_PACKAGES) $(DEBIAN_IMAGE_PACKAGES) $(SLURM_PACKAGES) cpio chromium etcd-server
IMAGE_DIR ?= bin/image
DEBIAN_IMAGE_DIR ?= bin/image-debian
IMAGE_KIND ?= kernel

DEMO_FLAGS ?=
DEMO_VMS_FLAGS ?=
REALGRID_OUT ?= results/realgrid
SCALE_OUT ?= results/scale
SCALE_FLAGS ?=
FUZZTIME   ?= 10s

PREFIX ?= /usr/local

.PHONY: install deps test-deps install-debs build check docs demo demo-vms realgrid scale results papers test bench screenshot soak fuzz image image-debian

deps:
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(DEB_PACKAGES)"

test-deps:
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(TEST_PACKAGES)"

install-debs:
	@missing=$$(for p in $(PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	fi

# The commit metasched --version prints, for builds without Go's own
# version control stamp (GOFLAGS=-buildvcs=false): "+dirty" when the work
# tree has changes.
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)$(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo +dirty)
LDFLAGS := -X main.commit=$(COMMIT)

build: deps
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/metasched
	CGO_ENABLED=0 $(GO) build -o $(TASKFARM) ./cmd/taskfarm

# make install: the binaries into PREFIX/bin, a man page per command into
# PREFIX/share/man/man1 (man metasched-serve), and the shell completions
# where bash-completion, zsh and fish look for them (bash's needs Debian's
# bash-completion package; source <(metasched completion bash) works
# without it).
MANDIR ?= $(PREFIX)/share/man/man1
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/vendor-completions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d

install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(BIN) $(TASKFARM) $(DESTDIR)$(PREFIX)/bin/
	$(BIN) docs man --out $(DESTDIR)$(MANDIR) >/dev/null
	$(BIN) completion bash >$(DESTDIR)$(BASHCOMPDIR)/metasched
	$(BIN) completion zsh >$(DESTDIR)$(ZSHCOMPDIR)/_metasched
	$(BIN) completion fish >$(DESTDIR)$(FISHCOMPDIR)/metasched.fish
	-command -v mandb >/dev/null && mandb -q $(DESTDIR)$(PREFIX)/share/man 2>/dev/null

# The generated references: the CLI's pages from the command tree, the
# HTTP API's from the OpenAPI document. The tests fail when they are stale.
docs: deps
	$(GO) run ./cmd/metasched docs markdown --out docs/reference/cli
	$(GO) test -count=1 ./metasched/httpapi/apidoc -run TestAPIReference -update

# The fast tier, to run while working: gofmt, vet and the tests in -short
# mode, which skip those that need QEMU or libvirtd, etcd, Chromium or a lab
# of real binaries, and list them with their reason.
check: deps
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) run ./scripts/testprogress -skips -- $(GO) test -short -json ./...

demo: build
	$(BIN) serve $(DEMO_FLAGS)

demo-vms: build
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(IMAGE_PACKAGES)"
	$(BIN) experiment demo-vms $(DEMO_VMS_FLAGS)

realgrid: build
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(IMAGE_PACKAGES)"
	$(BIN) experiment realgrid --out $(REALGRID_OUT)

scale: build
	$(BIN) experiment scale --out $(SCALE_OUT) $(SCALE_FLAGS)

# make results regenerates the measured figures of docs/results.md: each
# section between <!-- results NAME --> and <!-- /results NAME --> gets the
# output of its commands (scripts/results holds them), with the date, the
# CPUs and the commit. By default the sections that need no QEMU, libvirtd,
# etcd or root (a few minutes); RESULTS=all every section (hours, root);
# RESULTS=solver,planner some (go run ./scripts/results -list names them).
RESULTS ?=

results: build
	$(GO) run ./scripts/results -page docs/results.md $(if $(RESULTS),-only $(RESULTS))

image: build
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(IMAGE_PACKAGES)"
	$(BIN) image build --out $(IMAGE_DIR) --kind $(IMAGE_KIND)

image-debian: build
	@$(MAKE) --no-print-directory install-debs PACKAGES="$(DEBIAN_IMAGE_PACKAGES)"
	$(BIN) image build --out $(DEBIAN_IMAGE_DIR) --kind debian

papers: build
	$(BIN) plan --job examples/job-render.yaml --grid examples/grid-paper.yaml
	@echo
	$(BIN) plan --job examples/job-render.yaml --grid examples/grid-paper.yaml --master latam-a
	@echo
	$(BIN) policy solve --model examples/palmer-table2.yaml --criterion discounted
	@echo
	$(BIN) policy papers
	@echo
	$(BIN) simulate policies --model examples/fisher-fig4-load3.4.yaml --policy heuristic --K 5
	@echo
	$(BIN) simulate policies --model examples/fisher-fig4-load3.4.yaml --policy static

test: test-deps
	@test -z "$$(gofmt -l .)" || { echo "gofmt would change:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	# cmd/metasched, the longest package, takes 17 to 18 minutes on two
	# loaded cores: the limit only catches a hang. The Debian image's build
	# (mmdebstrap, once per set of inputs: mostly downloads and dpkg, no
	# guest) runs meanwhile, its output shown once it ends; the MPI job on
	# four of its guests runs alone after them: it takes both cores.
	@log=$$(mktemp); echo "$(GO) test -count=1 -timeout 15m -run '^TestBuildDebian$$' ./hypervisorproxy/image >$$log &"; \
	$(GO) test -count=1 -timeout 15m -run '^TestBuildDebian$$' ./hypervisorproxy/image >$$log 2>&1 & build=$$!; \
	echo "$(GO) test -count=1 -timeout 24m -skip '^(TestMPIGrid|TestBuildDebian)$$' ./... (a line per package as it ends)"; \
	$(GO) run ./scripts/testprogress -- $(GO) test -count=1 -json -timeout 24m -skip '^(TestMPIGrid|TestBuildDebian)$$' ./...; main=$$?; \
	wait $$build; debian=$$?; echo "--- the Debian image's build:"; cat $$log; rm -f $$log; \
	[ $$main -eq 0 ] && [ $$debian -eq 0 ]
	$(GO) test -count=1 -timeout 20m -run '^TestMPIGrid$$' ./cmd/metasched
	$(GO) test -count=1 -timeout 5m ./metasched/store -store etcd

# The README's picture of the dashboard, taken by its browser test.
screenshot: test-deps
	$(GO) test -count=1 -run TestDashboardInBrowser ./cmd/metasched -screenshots $(CURDIR)/docs

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./switching/... ./graph ./selection/... ./gramvm/... ./hypervisorproxy/... ./metasched/... ./cmd/metasched

SOAK_CYCLES ?= 25
FAILOVER_KILLS ?= 20

# The adversary run at length: the real daemon with the host-command executor,
# SIGKILLed SOAK_CYCLES times under concurrent submissions, then drained; then
# the leader of three daemons on etcd SIGKILLed FAILOVER_KILLS times.
soak: test-deps
	$(GO) test -count=1 -timeout 90m -run '^TestAdversary$$' -v ./cmd/metasched -adversary-cycles $(SOAK_CYCLES)
	$(GO) test -count=1 -timeout 60m -run '^TestFailover$$' -v ./cmd/metasched -failover-kills $(FAILOVER_KILLS)
	$(GO) test -count=1 -timeout 90m -run '^TestCloudImageSoak$$' -v ./hypervisorproxy -cloud-soak-boots 5
	$(GO) test -count=1 -timeout 60m -run '^TestMPIGrid$$' -v ./cmd/metasched -mpi-hosts 3 -mpi-rounds 90
	$(GO) test -count=1 -timeout 60m -run '^TestGuestGrid$$' -v ./cmd/metasched -elastic-tasks 150
	$(GO) test -count=1 -timeout 30m -run '^TestSlurmGrid$$' -v ./cmd/metasched -slurm-requeue
	$(GO) test -count=1 -timeout 60m -run '^TestDocsPolicySolveExamples$$' -v ./cmd/metasched -docs-solve-states 0
	$(GO) test -count=1 -timeout 60m -run '^TestBuildDebianReproducible$$' -v ./hypervisorproxy/image -debian-rebuild

# Every fuzz target for FUZZTIME each, one at a time, on two fuzzing
# processes; a failing input is written under its package's
# testdata/fuzz/FuzzX/ (see scripts/fuzz.sh).
fuzz: deps
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh
