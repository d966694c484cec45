# hotcold — build, test, install.
#
# Conventions (so each tool's folder can grow without touching this file):
#   common/*.c                          -> libhc_common.a  (GGUF I/O, types, CLI helpers)
#   runtime/*.c  except hc-run.c        -> libhc_runtime.a (model, kernels, tokenizer, ...)
#     with runtime/opencl/ (the OpenCL device; with OPENCL=0 its stub none.c)
#   D/*.c except D/hc-*.c, for each tool folder D -> libhc_D.a
#   D/hc-NAME.c                         -> bin/hc-NAME (linked with every library)
#   tests/test_*.c                      -> build/tests/test_* ; tests/test_*.sh run as-is
#   scripts/bench_*.c, solve-bench-gen.c -> build/bench/* (benchmark helpers of scripts/bench-*.sh)
#   D/module.mk                         -> optional extra rules of a folder
#
# Each folder compiles with the include paths of the folders it may use, so a
# wrong #include fails the build: common <- runtime <- quantizer, profiler;
# gguf-tools <- common and runtime (hc-convert tokenizes tokenizer.json with the
# runtime's normalizer and pre-tokenizer); solver uses common only; tests/ and
# scripts/ see everything.
#
# make help           every target, one line each
# make                build everything          make test      build and run the suite
# make SANITIZE=1     ASan+UBSan build (in build/asan, programs in build/asan/bin)
# make OPENCL=0       no OpenCL: no device, no libOpenCL (in build/noopencl, programs in build/noopencl/bin)
# make install PREFIX=/usr/local DESTDIR=   (programs and manual pages)
# make man            regenerate man/*.1 from docs/hc-*.md (needs pandoc)

CC      ?= cc
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man

OPENCL  ?= 1
ifeq ($(SANITIZE),1)
  O     ?= build/asan
  BIN   ?= $(O)/bin
  OPT   := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDSAN := -fsanitize=address,undefined
else ifeq ($(OPENCL),0)
  O     ?= build/noopencl
  BIN   ?= $(O)/bin
  OPT   := -O2 -g
  LDSAN :=
else
  O     ?= build
  BIN   ?= bin
  OPT   := -O2 -g
  LDSAN :=
endif

PKG_CONFIG ?= pkg-config
PKGS    := zlib libzip openblas $(if $(filter 0,$(OPENCL)),,OpenCL) libcjson libpcre2-8
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null || \
                echo -lz -lzip -lopenblas $(if $(filter 0,$(OPENCL)),,-lOpenCL) -lcjson -lpcre2-8)

# -ffp-contract=off: no fused multiply-add anywhere by default, so quantizers
# round exactly as ggml's x86-64 build (docs/formats.md, "The FMA caveat").
CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE -DCL_TARGET_OPENCL_VERSION=120 $(OPT) \
           -Wall -Wextra -Werror -ffp-contract=off -pthread $(PKG_CFLAGS)
# --as-needed: a program links only the libraries it calls, whatever the
# compiler's default (GCC's here drops the others, Clang's keeps them): a
# program that loads OpenBLAS without calling it got OpenBLAS's thread pool
# at load, which hangs the exit under an address-space limit (runtime/blas_fixed.c).
LDLIBS  += -Wl,--as-needed $(PKG_LIBS) -lglpk -lunistring -lm -lpthread

# The folders whose headers each folder's sources may include (see the top).
USES_common     := common
USES_runtime    := common runtime runtime/cpu
USES_quantizer  := common runtime runtime/cpu quantizer
USES_profiler   := common runtime runtime/cpu profiler
USES_gguf-tools := common gguf-tools
USES_solver     := common solver
USES_tests      := common runtime runtime/cpu gguf-tools quantizer profiler solver
USES_scripts    := $(USES_tests)

# The runtime's OpenCL folder: plain C always, OpenCL calls and the kernels
# (runtime/opencl/kernels/*.cl, embedded as C strings by runtime/module.mk)
# unless OPENCL=0.
CL_KERNELS := $(wildcard runtime/opencl/kernels/*.cl)
EXTRA_SRCS_runtime := $(wildcard runtime/cpu/*.c) runtime/opencl/rows.c runtime/opencl/device.c runtime/opencl/launch.c \
    $(if $(filter 0,$(OPENCL)),runtime/opencl/none.c,runtime/opencl/cl.c runtime/opencl/hot_rows.c runtime/opencl/backend.c \
        $(patsubst runtime/opencl/kernels/%.cl,$(O)/gen/%_cl.c,$(CL_KERNELS)))

TOOL_DIRS := gguf-tools quantizer profiler solver
LIB_NAMES := $(TOOL_DIRS) runtime common

lib_srcs = $(filter-out $(1)/hc-%.c,$(wildcard $(1)/*.c)) $(EXTRA_SRCS_$(1))
obj      = $(patsubst %.c,$(O)/obj/%.o,$(1))
LIBS     := $(foreach d,$(LIB_NAMES),$(O)/lib/libhc_$(d).a)

MAIN_SRCS := $(wildcard $(foreach d,$(TOOL_DIRS) runtime,$(d)/hc-*.c))
PROGRAMS  := $(patsubst %.c,$(BIN)/%,$(notdir $(MAIN_SRCS)))
TEST_SRCS := $(wildcard tests/test_*.c)
TESTS     := $(patsubst tests/%.c,$(O)/tests/%,$(TEST_SRCS))
TEST_SUPPORT := $(call obj,$(filter-out tests/test_%.c,$(wildcard tests/*.c)))

# One version for every program (--version): the VERSION file, plus `git describe`
# in a git checkout. Written at parse time, and only when it changes, so that
# `make -q` stays exact and a new commit relinks the programs without a rebuild.
HC_GIT     := $(shell test -e .git && git describe --always --dirty 2>/dev/null)
HC_VERSION := $(shell cat VERSION 2>/dev/null || echo unknown)$(if $(HC_GIT), (git $(HC_GIT)))
HC_VERSION_H := $(O)/gen/hc_version.h
$(shell mkdir -p $(O)/gen && (echo '#define HC_VERSION "$(HC_VERSION)"' | cmp -s - $(HC_VERSION_H) || \
        echo '#define HC_VERSION "$(HC_VERSION)"' > $(HC_VERSION_H)))
$(O)/obj/common/version.o: CFLAGS += -I$(O)/gen

LINK_LIBS = -Wl,--start-group $(LIBS) -Wl,--end-group $(LDSAN) $(LDLIBS)

BENCH_SRCS := $(wildcard scripts/bench_*.c) scripts/solve-bench-gen.c
BENCHES    := $(patsubst scripts/%.c,$(O)/bench/%,$(BENCH_SRCS))

.PHONY: all help test deps install uninstall clean demo bench benches fuzz man
all: $(PROGRAMS) $(TESTS) $(BENCHES) ## build every program, test and benchmark helper

help: ## this list
	@grep -hE '^[a-z][a-z-]*:.*## ' $(filter-out %.d,$(MAKEFILE_LIST)) | sed 's/:.*## /\t/' | awk -F'\t' '{ printf "  make %-14s %s\n", $$1, $$2 }'

# The first folder of a source's path picks its include paths.
$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(addprefix -I,$(USES_$(firstword $(subst /, ,$<)))) -MMD -MP -c $< -o $@

define lib_rule
$(O)/lib/libhc_$(1).a: $(call obj,$(call lib_srcs,$(1)))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach d,$(LIB_NAMES),$(eval $(call lib_rule,$(d))))

# A program links its own folder's library, the runtime (which the profiler and
# GPTQ drive, and whose loader hc-solve validates models with through
# common/model_check.h) and common; hc-gguf needs only its folder and common.
prog_libs = $(foreach d,$(if $(filter hc-gguf,$(2)),,runtime) $(filter-out runtime,$(1)) common,$(O)/lib/libhc_$(d).a)
define prog_rule
$(BIN)/$(notdir $(basename $(1))): $(call obj,$(1)) $(call prog_libs,$(patsubst %/,%,$(dir $(1))),$(notdir $(basename $(1))))
	@mkdir -p $$(dir $$@)
	$(CC) $(CFLAGS) $$< -o $$@ -Wl,--start-group $$(filter %.a,$$^) -Wl,--end-group $(LDSAN) $(LDLIBS)
endef
$(foreach m,$(MAIN_SRCS),$(eval $(call prog_rule,$(m))))

$(O)/tests/%: $(O)/obj/tests/%.o $(TEST_SUPPORT) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(TEST_SUPPORT) -o $@ $(LINK_LIBS)

# Benchmark helpers: built with the project's flags, run by scripts/bench-*.sh.
$(O)/bench/%: $(O)/obj/scripts/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(LINK_LIBS)

benches: $(BENCHES) ## build the benchmark helpers into build/bench/

-include $(wildcard */module.mk)

# Dependencies: installs missing Debian packages when run as root, else says what to run.
deps: ## install the missing Debian packages (scripts/install-deps.sh)
	@sh scripts/install-deps.sh --if-missing

test: deps ## install missing packages, build, run the suite (tests/run.sh)
	@$(MAKE) --no-print-directory all
	@HC_BIN=$(abspath $(BIN)) HC_TESTS=$(abspath $(O)/tests) sh tests/run.sh

demo: deps ## install missing packages, build the programs, run the pipeline demo (scripts/demo.sh)
	@$(MAKE) --no-print-directory $(PROGRAMS)
	@HC_BIN=$(abspath $(BIN)) sh scripts/demo.sh

bench: deps ## build, then run every scripts/bench-*.sh (long; not a test)
	@$(MAKE) --no-print-directory all
	@HC_BIN=$(abspath $(BIN)) O=$(O) sh scripts/bench.sh

# Manual pages: man/hc-NAME.1 is generated from docs/hc-NAME.md by `make man`
# (pandoc, Debian package `pandoc`) and committed, so that building and
# installing need no pandoc; tests/test_docs.sh checks they are up to date.
MAN_PAGES := $(patsubst %,man/%.1,$(notdir $(basename $(MAIN_SRCS))))
man: ## regenerate man/*.1 from docs/hc-*.md (needs pandoc)
	@command -v pandoc >/dev/null || { echo "man: needs pandoc (apt-get install pandoc)"; exit 1; }
	@mkdir -p man
	@for p in $(notdir $(basename $(MAIN_SRCS))); do \
	    sh scripts/man-page.sh docs/$$p.md > man/$$p.1.tmp && mv man/$$p.1.tmp man/$$p.1 || exit 1; done

install: $(PROGRAMS) ## copy the programs to DESTDIR/PREFIX/bin and their man pages to .../share/man/man1
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(PROGRAMS) $(DESTDIR)$(BINDIR)/
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/

uninstall: ## remove what install copied
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(PROGRAMS)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN_PAGES)))

clean: ## remove build/ and bin/
	rm -rf build bin

# make model / gpuidx-check / gpuidx-update (the pipeline as Make targets)
include scripts/model.mk

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)
