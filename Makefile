# vgpu — share NVIDIA GPUs between jobs on one machine.
#
#   make            build vgpu, libvgpu.so, the simulated GPU and the test programs (into build/)
#   make test       build and run the whole suite; ends with "N passed, N failed"
#   make asan       the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#   make tsan       the hook's concurrent tests under ThreadSanitizer (build-tsan/)
#   make soak       2 users x 4 jobs x 4 processes under chaos on the simulated GPU, SOAK_SECONDS=60
#   make demo       run the main job on the real GPU, or on the simulated one when there is none
#   make bench      benchmarks, printed as tables
#   make fuzz       the libFuzzer harnesses of tests/fuzz, FUZZ_SECONDS each (default 60; needs clang);
#                   FUZZ_ONLY=NAME for one (make test runs fuzz_arbiter 20 s where clang is installed)
#   make install    PREFIX=/usr/local DESTDIR=   (also PREFIX/lib/tmpfiles.d/vgpu.conf)
#   make deb        build/deb/vgpu_VERSION_ARCH.deb (dpkg-buildpackage + debhelper; see debian/)
#   make deps       install the Debian packages the build and the tests need (root), or print the line
#   make slurm      build/slurm/spank_vgpu.so, the Slurm SPANK plugin (needs libslurm-dev); make install-slurm
#   make test-slurm a real one-node Slurm on localhost with the simulated GPU (needs SLURM_PACKAGES)
#   make test-engines Debian's podman reads vgpu's CDI specs, Prometheus scrapes vgpu metrics (ENGINE_PACKAGES)
#
# No CUDA toolkit is needed: lib/include declares the subset of the driver and NVML ABI we use.
# Every directory's sources are picked up by wildcard, so adding a file needs no Makefile edit:
#   cmd/*.c              one file per subcommand, each defining `const struct vgpu_cmd vgpu_cmd_<file>`
#   cmd/<name>/*.c       helpers private to one command (e.g. cmd/top/)
#   lib/core/<concern>/*.c libvgpucore.a (linked into vgpu and libvgpu.so): base/ region/ sched/ place/ mig/ gpu/ top/
#                        acct/ (SQLite: only vgpu pulls it in, so libvgpu.so never links libsqlite3)
#   lib/hook/*.c         libvgpu.so (exports only what lib/hook/exports.map lists)
#   lib/compat/*.c       vgpu only: its start glue and old-glibc stand-ins (see lib/include/vgpu/glibc_compat.h)
#   tests/unit/test_*.c  cmocka unit tests, one binary each
#   tests/progs/*.c      programs the CLI tests run under `vgpu run` (plain C, -ldl)
#   tests/fakegpu/...    the simulated GPU (common/ + cuda/ -> libcuda.so.1, common/ + nvml/ -> libnvidia-ml.so.1,
#                        tools/*.c -> build/fakegpu/<name>)

VERSION   := 0.1.0
PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     ?= build
CC        ?= cc
SANITIZE  ?=

DEB_PACKAGES := build-essential pkg-config libjson-c-dev libreadline-dev libncurses-dev \
                libcmocka-dev tmux bash-completion zsh python3 jq python3-jsonschema \
                libsqlite3-dev sqlite3

WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-unused-parameter -Wvla -Wpointer-arith
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 $(WARN) -fPIC -D_GNU_SOURCE -DVGPU_VERSION='"$(VERSION)"' \
           -Ilib/include -I$(BUILD)/gen $(SANITIZE)
LDFLAGS += $(SANITIZE)

ifneq ($(SANITIZE),)
  # Sanitizer runtimes are shared objects: vgpu cannot be fully static then, and that is fine for tests.
  STATIC_BEGIN :=
  STATIC_END   :=
else
  STATIC_BEGIN := -Wl,-Bstatic
  STATIC_END   := -Wl,-Bdynamic
endif
VGPU_LIBS := $(STATIC_BEGIN) -ljson-c -lreadline -lncursesw -ltinfo $(STATIC_END) -lpthread -ldl -lm

CMD_SRC    := $(wildcard cmd/*.c)
CMD_NAMES  := $(filter-out vgpu common% util%,$(basename $(notdir $(CMD_SRC))))
CMDSUB_SRC := $(wildcard cmd/*/*.c)
CORE_SRC   := $(wildcard lib/core/*/*.c)
HOOK_SRC   := $(wildcard lib/hook/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
PROG_SRC   := $(wildcard tests/progs/*.c)
FAKE_COMMON:= $(wildcard tests/fakegpu/common/*.c)
FAKE_CUDA  := $(wildcard tests/fakegpu/cuda/*.c)
FAKE_NVML  := $(wildcard tests/fakegpu/nvml/*.c)
FAKE_TOOLS := $(wildcard tests/fakegpu/tools/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

CORE_LIB  := $(BUILD)/libvgpucore.a
HOOK_LIB  := $(BUILD)/libvgpu.so
VGPU_BIN  := $(BUILD)/vgpu
FAKE_LIBS := $(BUILD)/fakegpu/libcuda.so.1 $(BUILD)/fakegpu/libnvidia-ml.so.1
FAKE_BINS := $(patsubst tests/fakegpu/tools/%.c,$(BUILD)/fakegpu/%,$(FAKE_TOOLS))
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
PROG_BINS := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(PROG_SRC))

.PHONY: all test asan tsan soak demo bench install uninstall deps clean check-deps completions deb fuzz fuzz-build deps-fuzz fuzz-daemon-objs
# Keep every object: the test programs' and tools' objects are intermediates of pattern rules,
# and make would otherwise delete them after each build and recompile them the next time.
.SECONDARY:
all: $(VGPU_BIN) $(HOOK_LIB) $(FAKE_LIBS) $(FAKE_BINS) $(UNIT_BINS) $(PROG_BINS) $(BUILD)/links

# ---- objects ---------------------------------------------------------------------------------
$(BUILD)/obj/%.o: %.c | check-deps
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# The command table is generated from the files in cmd/, so a new command is one new file.
$(BUILD)/gen/cmdtable.c: $(CMD_SRC) Makefile
	@mkdir -p $(dir $@)
	@{ echo '/* generated by the Makefile from the files in cmd/; do not edit */'; \
	   echo '#include "cmd.h"'; \
	   for n in $(sort $(CMD_NAMES)); do echo "extern const struct vgpu_cmd vgpu_cmd_$$n;"; done; \
	   echo 'const struct vgpu_cmd *const vgpu_commands[] = {'; \
	   for n in $(sort $(CMD_NAMES)); do echo "    &vgpu_cmd_$$n,"; done; \
	   echo '    0 };'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/cmdtable.o: $(BUILD)/gen/cmdtable.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Icmd -c $< -o $@

$(BUILD)/obj/cmd/%.o: CFLAGS += -Icmd

# ---- glibc floor (issue 19) -----------------------------------------------------------------------
# libvgpu.so loads into processes whose glibc may be much older than the build host's, and vgpu
# runs on old hosts: every object that goes into them binds each libc symbol to an old version
# (lib/include/vgpu/glibc_compat.h, force-included), vgpu also gets lib/compat/ (its start file
# and the static libraries' stat/getrandom), and both name libpthread.so.0 and libdl.so.2, where
# old glibc keeps pthread_* and dl*. tests/cli/glibc.sh checks the floors below.
LIBVGPU_GLIBC_FLOOR := 2.17
VGPU_GLIBC_FLOOR    := 2.17
COMPAT_SRC        := $(wildcard lib/compat/*.c)
GLIBC_COMPAT_LIBS := -Wl,--push-state,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2 -Wl,--pop-state
$(call obj,$(CORE_SRC) $(HOOK_SRC) $(CMD_SRC) $(CMDSUB_SRC) $(COMPAT_SRC)) $(BUILD)/obj/gen/cmdtable.o: \
  CFLAGS += -include lib/include/vgpu/glibc_compat.h
# route.c defines dlsym (the override): it must not become a versioned alias of glibc's.
$(BUILD)/obj/lib/hook/route.o: CFLAGS += -DVGPU_GLIBC_OWN_DLSYM
# tests/progs/glibc_start is linked like vgpu, for tests/cli/glibc.sh.
$(BUILD)/obj/tests/progs/glibc_start.o: CFLAGS += -include lib/include/vgpu/glibc_compat.h
$(BUILD)/tests/progs/glibc_start: $(BUILD)/obj/tests/progs/glibc_start.o $(call obj,$(COMPAT_SRC))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(GLIBC_COMPAT_LIBS) -lm
# After each link, say which glibc the file needs, and warn with the symbols to bind when it is
# above its floor (the link still succeeds; tests/cli/glibc.sh fails).
glibc_floor = @bash packaging/glibc-needs.sh --max $(2) $(1)

# ---- libraries and the binary ------------------------------------------------------------------
$(CORE_LIB): $(call obj,$(CORE_SRC))
	@rm -f $@
	ar rcs $@ $^

# libvgpu.so: libc only (no json-c, no ncurses), hidden visibility, explicit export list.
$(call obj,$(HOOK_SRC)): CFLAGS += -fvisibility=hidden
$(HOOK_LIB): $(call obj,$(HOOK_SRC)) $(CORE_LIB) lib/hook/exports.map
	$(CC) -shared -o $@ $(call obj,$(HOOK_SRC)) $(CORE_LIB) -Wl,--version-script=lib/hook/exports.map \
	  -Wl,-soname,libvgpu.so -Wl,-z,defs -Wl,--no-undefined $(LDFLAGS) $(GLIBC_COMPAT_LIBS) -ldl -lpthread
	$(call glibc_floor,$@,$(LIBVGPU_GLIBC_FLOOR))

# vgpu carries a copy of libvgpu.so (DESIGN.md decision 2): it is linked in as a blob.
$(BUILD)/obj/gen/hookblob.o: $(HOOK_LIB)
	@mkdir -p $(dir $@)
	cd $(BUILD) && ld -r -b binary -z noexecstack -o obj/gen/hookblob.o libvgpu.so

# SQLite (accounting, lib/core/acct/) is Debian's libsqlite3.a, copied with its references to
# symbols newer than the glibc floor renamed to lib/compat/sqlite.c's stand-ins; always static
# (also in sanitizer builds), and only vgpu links it: libvgpu.so never pulls in lib/core/acct/.
SQLITE_A           ?= $(shell $(CC) -print-file-name=libsqlite3.a)
SQLITE_COMPAT_SYMS := fcntl64 stat64 fstat64 lstat64 exp log pow dlopen dlerror dlsym dlclose pthread_create \
                      pthread_join pthread_mutexattr_init pthread_mutexattr_settype pthread_mutexattr_destroy \
                      pthread_mutex_trylock
SQLITE_LIB         := $(BUILD)/libsqlite3-compat.a
$(SQLITE_LIB): Makefile | check-deps
	@mkdir -p $(dir $@)
	@test -f "$(SQLITE_A)" || { echo "libsqlite3.a not found: sudo apt-get install libsqlite3-dev (or sudo make deps)" >&2; exit 1; }
	objcopy $(foreach s,$(SQLITE_COMPAT_SYMS),--redefine-sym $(s)=vgpu_compat_$(s)) $(SQLITE_A) $@

$(VGPU_BIN): $(call obj,$(CMD_SRC) $(CMDSUB_SRC) $(COMPAT_SRC)) $(BUILD)/obj/gen/cmdtable.o $(BUILD)/obj/gen/hookblob.o $(CORE_LIB) $(SQLITE_LIB)
	$(CC) -o $@ $^ $(LDFLAGS) $(VGPU_LIBS) $(GLIBC_COMPAT_LIBS)
	$(call glibc_floor,$@,$(VGPU_GLIBC_FLOOR))

# vgpu-CMD symlinks, busybox style, for the tests and for `make install`.
$(BUILD)/links: $(VGPU_BIN)
	@mkdir -p $@
	@for n in $(CMD_NAMES); do ln -sf ../vgpu $@/vgpu-$$n; done
	@touch $@

# ---- the simulated GPU (test double; never installed) ------------------------------------------
$(BUILD)/fakegpu/libcuda.so.1: $(call obj,$(FAKE_COMMON) $(FAKE_CUDA))
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ -Wl,-soname,libcuda.so.1 $(LDFLAGS) -ljson-c -ldl -lpthread -lm

# -z nodelete: its host resolver thread (common/procs.c) runs on after a dlclose.
$(BUILD)/fakegpu/libnvidia-ml.so.1: $(call obj,$(FAKE_COMMON) $(FAKE_NVML))
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ -Wl,-soname,libnvidia-ml.so.1 -Wl,-z,nodelete $(LDFLAGS) -ljson-c -ldl -lpthread -lm

$(BUILD)/fakegpu/%: $(BUILD)/obj/tests/fakegpu/tools/%.o $(call obj,$(FAKE_COMMON))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -ljson-c -ldl -lpthread -lm

# ---- tests ----------------------------------------------------------------------------------------
$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter %.o,$^) $(CORE_LIB) $(LDFLAGS) -lcmocka -ljson-c -lsqlite3 -ldl -lpthread -lm

# A layer that knows nothing above it is tested alone: its object links into the unit test
# (before the core library, which it calls). The hook's memory counters (the test answers
# config.c's questions itself), and vgpu top's screen state (no curses).
$(BUILD)/tests/unit/test_hook_acct: $(call obj,lib/hook/acct.c)
$(BUILD)/tests/unit/test_top_ui_state: $(call obj,cmd/top/ui_state.c)
$(BUILD)/obj/tests/unit/test_top_ui_state.o: CFLAGS += -Icmd
# The daemon's request handler, called directly (no socket, no timing): every
# tests/unit/test_arb_*.c links all of cmd/daemon/ and sees its headers (cmd/daemon/server.h).
DAEMON_UNIT_BINS := $(filter $(BUILD)/tests/unit/test_arb_%,$(UNIT_BINS))
$(DAEMON_UNIT_BINS): $(call obj,$(wildcard cmd/daemon/*.c))
$(patsubst $(BUILD)/tests/unit/%,$(BUILD)/obj/tests/unit/%.o,$(DAEMON_UNIT_BINS)): CFLAGS += -Icmd

# Test programs reach the driver the ways real programs do: linked against libcuda.so.1
# (the fake at build time, whatever is installed at run time), or through dlopen.
# They may use the core library (e.g. sched_peek reads a GPU-time schedule as vgpu does).
$(BUILD)/tests/progs/%: $(BUILD)/obj/tests/progs/%.o $(BUILD)/fakegpu/libcuda.so.1 $(BUILD)/fakegpu/libnvidia-ml.so.1 $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(CORE_LIB) $(LDFLAGS) -L$(BUILD)/fakegpu -l:libcuda.so.1 -l:libnvidia-ml.so.1 -ldl -lpthread -lm

test:
	@$(MAKE) --no-print-directory deps-if-root
	@$(MAKE) --no-print-directory all
	@bash tests/run.sh $(BUILD)

asan:
	CFLAGS="-O1 -g" $(MAKE) BUILD=build-asan SANITIZE="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all
	@VGPU_ASAN=1 bash tests/run.sh build-asan

demo:
	@$(MAKE) --no-print-directory deps-if-root
	@$(MAKE) --no-print-directory all
	@bash tests/demo.sh $(BUILD)

bench: all
	@bash bench/run.sh $(BUILD)

# ---- fuzzing ------------------------------------------------------------------------------------
# libFuzzer harnesses (tests/fuzz/fuzz_*.c) against libvgpucore.a built by clang with coverage and
# the sanitizers into build-fuzz/ (clang's -Wformat=2 also wants format attributes on v*printf
# wrappers, which gcc does not: -Wno-format-nonliteral there). clang and its libFuzzer runtime are needed here only, not by
# `make test`: `make deps-fuzz` installs them, and `make fuzz` says so when they are missing.
FUZZ_SECONDS  ?= 60
FUZZ_CC       ?= clang
FUZZ_BUILD    := build-fuzz
FUZZ_PACKAGES := clang libclang-rt-14-dev
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_BINS     := $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
# FUZZ_ONLY=NAME builds only that harness (tests/cli/arbiter_fuzz.sh: the one make test runs).
ifneq ($(FUZZ_ONLY),)
  FUZZ_BINS   := $(FUZZ_BUILD)/fuzz/$(FUZZ_ONLY)
endif
# fuzz_arbiter calls the daemon's request handler: it links cmd/daemon's objects, built by clang
# with the sanitizers like the core library, and SQLite (the accounting half).
FUZZ_DAEMON_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(wildcard cmd/daemon/*.c))
$(FUZZ_BUILD)/fuzz/fuzz_arbiter: $(FUZZ_DAEMON_OBJS)
$(FUZZ_BUILD)/fuzz/fuzz_arbiter: FUZZ_OBJS = -Icmd $(FUZZ_DAEMON_OBJS)
$(FUZZ_BUILD)/fuzz/fuzz_arbiter: FUZZ_LIBS = -lsqlite3
fuzz-daemon-objs: $(FUZZ_DAEMON_OBJS)
	@:

fuzz: fuzz-build
	@bash tests/fuzz/run.sh run $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz-build:
	@bash tests/fuzz/run.sh check $(FUZZ_CC) $(FUZZ_PACKAGES)
	@CFLAGS="-O1 -g" $(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) \
	  SANITIZE="$(FUZZ_SAN) -fsanitize=fuzzer-no-link -Wno-format-nonliteral" $(FUZZ_BUILD)/libvgpucore.a \
	  $(if $(filter %/fuzz_arbiter,$(FUZZ_BINS)),fuzz-daemon-objs)
	@$(MAKE) -s --no-print-directory $(FUZZ_BINS) FUZZ_ONLY=$(FUZZ_ONLY)

$(FUZZ_BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(FUZZ_BUILD)/libvgpucore.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -O1 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter -Ilib/include -Ilib/hook \
	  $(FUZZ_SAN) -fsanitize=fuzzer $< $(FUZZ_OBJS) $(FUZZ_BUILD)/libvgpucore.a -o $@ $(FUZZ_LIBS) -ljson-c -ldl -lpthread -lm

# ---- the soak (issue 11): many jobs of two users under chaos on the simulated GPU -----------------
# make soak [SOAK_SECONDS=N]: tests/cli/soak.sh at length (make test runs it for 18 s). tests/soak/*.c is
# the driver; tests/soak/worker.c its worker program (linked against libcuda.so.1, as tests/progs are).
SOAK_SECONDS ?= 60
SOAK_SRC  := $(filter-out tests/soak/worker.c,$(wildcard tests/soak/*.c))
SOAK_BINS := $(BUILD)/tests/soak/soak $(BUILD)/tests/soak/soak_worker
all: $(SOAK_BINS)

$(BUILD)/tests/soak/soak: $(call obj,$(SOAK_SRC)) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lpthread

$(BUILD)/tests/soak/soak_worker: $(BUILD)/obj/tests/soak/worker.o $(BUILD)/fakegpu/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LDFLAGS) -L$(BUILD)/fakegpu -l:libcuda.so.1 -ldl -lpthread

soak:
	@$(MAKE) --no-print-directory all
	@VGPU_TEST_VERBOSE=1 VGPU_SOAK_SECONDS=$(SOAK_SECONDS) bash tests/run.sh $(BUILD) cli/soak

# ---- ThreadSanitizer: the hook's concurrent tests (tests/tsan.sh lists them) into build-tsan/ -----------
tsan:
	CFLAGS="-O1 -g" $(MAKE) BUILD=build-tsan SANITIZE="-fsanitize=thread" all
	@bash tests/tsan.sh build-tsan

# ---- Slurm (issue 16): the SPANK plugin and its test on a real one-node Slurm ----------------------
# Not part of `all` or `make test`: they need Debian's Slurm packages, which `make deps` installs
# (root) and `make test-slurm` names when they are missing. man/vgpu-slurm.7 has the setup.
SLURM_PACKAGES := libslurm-dev slurmctld slurmd slurm-client munge
SLURM_SRC      := $(wildcard lib/slurm/*.c)
SLURM_PLUGIN   := $(BUILD)/slurm/spank_vgpu.so
.PHONY: slurm test-slurm deps-slurm slurm-headers install-slurm
slurm: $(SLURM_PLUGIN)
$(call obj,$(SLURM_SRC)): CFLAGS += -fvisibility=hidden -Ilib/slurm -DVGPU_SLURM_LIBRARY='"$(PREFIX)/lib/vgpu/libvgpu.so"' \
  -include lib/include/vgpu/glibc_compat.h
$(call obj,$(SLURM_SRC)): | slurm-headers
slurm-headers:
	@test -f /usr/include/slurm/spank.h || { echo "make slurm: /usr/include/slurm/spank.h is missing: sudo apt-get install libslurm-dev (or sudo make deps)" >&2; exit 1; }
# The spank_* and slurm_* symbols come from the Slurm program that loads the plugin; the core's
# own symbols stay inside (--exclude-libs), so they cannot clash with anything Slurm loads.
$(SLURM_PLUGIN): $(call obj,$(SLURM_SRC)) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(call obj,$(SLURM_SRC)) $(CORE_LIB) -Wl,--exclude-libs,ALL $(LDFLAGS) -ldl -lpthread

# The plugin is installed on its own (make install stays what the Debian package holds).
install-slurm: $(SLURM_PLUGIN)
	install -d $(DESTDIR)$(PREFIX)/lib/vgpu
	install -m 0644 $(SLURM_PLUGIN) $(DESTDIR)$(PREFIX)/lib/vgpu/spank_vgpu.so

test-slurm:
	@bash tests/deps.sh auto $(SLURM_PACKAGES) >/dev/null 2>&1 || true
	@$(MAKE) --no-print-directory all
	@if bash tests/deps.sh check $(SLURM_PACKAGES) 2>/dev/null; then $(MAKE) --no-print-directory slurm; fi
	@VGPU_TEST_SLURM=1 VGPU_SLURM_PACKAGES="$(SLURM_PACKAGES)" bash tests/run.sh $(BUILD) cli/slurm.sh

deps-slurm:
	@bash tests/deps.sh install $(SLURM_PACKAGES)

# ---- engines (issue 29): real podman and Prometheus read what vgpu writes -----------------------
# Not part of `make test`: they need root and Debian's packages, which `make deps` installs (root)
# and `make test-engines` names when they are missing. Only this machine and loopback are used.
ENGINE_PACKAGES := podman prometheus prometheus-node-exporter
.PHONY: test-engines deps-engines
test-engines:
	@bash tests/deps.sh auto $(ENGINE_PACKAGES) >/dev/null 2>&1 || true
	@$(MAKE) --no-print-directory all
	@VGPU_TEST_ENGINES=1 VGPU_ENGINE_PACKAGES="$(ENGINE_PACKAGES)" bash tests/run.sh $(BUILD) cli/engine_

deps-engines:
	@bash tests/deps.sh install $(ENGINE_PACKAGES)

# ---- packaging ----------------------------------------------------------------------------------
install: $(VGPU_BIN) $(HOOK_LIB)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/vgpu $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/man/man8 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions
	install -m 0755 $(VGPU_BIN) $(DESTDIR)$(PREFIX)/bin/vgpu
	install -m 0644 $(HOOK_LIB) $(DESTDIR)$(PREFIX)/lib/vgpu/libvgpu.so
	for n in $(CMD_NAMES); do ln -sf vgpu $(DESTDIR)$(PREFIX)/bin/vgpu-$$n; done
	install -m 0644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	if ls man/*.7 >/dev/null 2>&1; then install -m 0644 man/*.7 $(DESTDIR)$(PREFIX)/share/man/man7/; fi
	install -m 0644 man/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 completions/vgpu.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/vgpu
	# bash-completion loads a command's completion by its name on first use: without a vgpu-CMD
	# beside vgpu, vgpu-CMD had none until vgpu itself was completed once.
	for n in $(CMD_NAMES); do ln -sf vgpu $(DESTDIR)$(PREFIX)/share/bash-completion/completions/vgpu-$$n; done
	install -m 0644 completions/_vgpu $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_vgpu
	install -m 0755 packaging/slurm/vgpu-task-prolog $(DESTDIR)$(PREFIX)/lib/vgpu/vgpu-task-prolog
	install -d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d
	install -m 0644 packaging/tmpfiles.d/vgpu.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/vgpu.conf
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system
	sed 's|/usr/bin/vgpu|$(PREFIX)/bin/vgpu|' packaging/systemd/vgpu-daemon.service \
	  > $(DESTDIR)$(PREFIX)/lib/systemd/system/vgpu-daemon.service

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/vgpu $(DESTDIR)$(PREFIX)/lib/vgpu/libvgpu.so \
	  $(DESTDIR)$(PREFIX)/lib/vgpu/vgpu-task-prolog $(DESTDIR)$(PREFIX)/lib/vgpu/spank_vgpu.so
	for n in $(CMD_NAMES); do rm -f $(DESTDIR)$(PREFIX)/bin/vgpu-$$n $(DESTDIR)$(PREFIX)/share/man/man1/vgpu-$$n.1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/vgpu-$$n; done
	for f in man/*.7; do rm -f $(DESTDIR)$(PREFIX)/share/man/man7/$${f#man/}; done
	for f in man/*.8; do rm -f $(DESTDIR)$(PREFIX)/share/man/man8/$${f#man/}; done
	rm -f $(DESTDIR)$(PREFIX)/lib/systemd/system/vgpu-daemon.service
	rm -f $(DESTDIR)$(PREFIX)/share/man/man1/vgpu.1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions/vgpu \
	  $(DESTDIR)$(PREFIX)/share/zsh/vendor-completions/_vgpu $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/vgpu.conf

# ---- Debian package (issue 19) --------------------------------------------------------------------
# make deb: build/deb/vgpu_VERSION_ARCH.deb, built by dpkg-buildpackage and debhelper (debian/) on a
# copy of this tree, so the tree and its build/ stay as they are. tests/cli/deb.sh checks the package.
DEB_TOOL_PACKAGES := debhelper dpkg-dev lintian
deb:
	@command -v dh >/dev/null && command -v dpkg-buildpackage >/dev/null || { \
	  echo "make deb: dpkg-buildpackage and debhelper are missing: sudo apt-get install debhelper dpkg-dev (or sudo make deps)" >&2; exit 1; }
	@grep -q '^vgpu ($(VERSION))' debian/changelog || { \
	  echo "make deb: debian/changelog's first entry is not version $(VERSION) (the Makefile's VERSION): add one" >&2; exit 1; }
	rm -rf $(BUILD)/deb && mkdir -p $(BUILD)/deb/vgpu-$(VERSION)
	tar -c --exclude='./build*' --exclude='./$(BUILD)' --exclude=./.git --exclude=./debian/vgpu --exclude=./debian/.debhelper . | \
	  tar -x -C $(BUILD)/deb/vgpu-$(VERSION)
	cd $(BUILD)/deb/vgpu-$(VERSION) && DEB_BUILD_OPTIONS="parallel=$${VGPU_DEB_JOBS:-2} $${DEB_BUILD_OPTIONS:-}" \
	  dpkg-buildpackage -b -us -uc
	@rm -rf $(BUILD)/deb/vgpu-$(VERSION)
	@ls $(BUILD)/deb/*.deb

# Regenerate the completion scripts from the command table (a test checks they match).
completions: $(VGPU_BIN)
	$(VGPU_BIN) completion bash > completions/vgpu.bash
	$(VGPU_BIN) completion zsh > completions/_vgpu

# ---- dependencies -----------------------------------------------------------------------------------
# `make deps` installs what is missing when run as root, and otherwise prints the exact command.
deps:
	@bash tests/deps.sh install $(DEB_PACKAGES) $(DEB_TOOL_PACKAGES) $(SLURM_PACKAGES) $(ENGINE_PACKAGES)

deps-fuzz:
	@bash tests/deps.sh install $(FUZZ_PACKAGES)

deps-if-root:
	@bash tests/deps.sh auto $(DEB_PACKAGES) $(DEB_TOOL_PACKAGES)

check-deps:
	@bash tests/deps.sh check $(DEB_PACKAGES)

clean:
	rm -rf build build-asan build-fuzz build-tsan
