# tests/: the fuzz targets (tests/fuzz/fuzz_NAME.c), the regression test that
# replays tests/regress/NAME/* through them, and `make fuzz`.
#
#   make fuzz [FUZZ_SECONDS=10] [FUZZ_TARGETS="gguf zip"]
#       builds every target with clang -fsanitize=fuzzer,address,undefined into
#       build/fuzz/, seeds build/fuzz/corpus/NAME (tests/fuzz/seeds.py and the
#       fixtures) and runs each for FUZZ_SECONDS; one summary line per target.
#   make valgrind      tests/test_valgrind.sh on the programs of $(BIN) (~45 s;
#                      `make test` skips it)
#   make faults        tests/test_faults.sh (also part of `make test`)
#   make tsan          the C unit tests built with -fsanitize=thread into
#                      build/tsan and run: the pool, the kernels' row splits,
#                      the scheduler's batches, GPTQ's products on the pool

FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_ALL     := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRCS))
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SECONDS ?= 10
FUZZ_O       := build/fuzz
FUZZ_OPT     := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
                -fno-sanitize-recover=all -DHC_LIBFUZZER

# The parsers' objects a target may reach (not the kernels, solver or GPTQ).
FUZZ_DEPS := $(call obj,$(wildcard common/*.c) tests/fuzz/util.c runtime/gpuidx.c \
               $(addprefix runtime/,tokenizer.c tokenizer_bpe.c heap.c prompts.c) \
               $(addprefix gguf-tools/convert_,out.c safetensors.c tokenizer.c bpe.c) \
               $(addprefix profiler/,zipread.c pickle.c ptfile.c))

# fuzz_model drives the whole model loader: it links the runtime's objects.
# The kernels are not what it fuzzes (the loader is), and clang's coverage and
# sanitizer instrumentation of their intrinsics takes minutes per file: in the
# fuzz build they are compiled without it.
$(O)/fuzz/fuzz_model: $(call obj,$(call lib_srcs,runtime))
$(FUZZ_O)/obj/runtime/cpu/kernels%.o: override OPT := -O1 -g

# Built only inside `make fuzz` (O=build/fuzz, clang, FUZZ_OPT).
$(O)/fuzz/fuzz_%: $(O)/obj/tests/fuzz/fuzz_%.o $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $^ -o $@ -Wl,--wrap=hc_die $(LDLIBS)

# test_regress links the targets themselves; hc_die is caught as in the fuzzers.
$(O)/tests/test_regress: $(O)/obj/tests/test_regress.o $(call obj,$(FUZZ_SRCS) tests/fuzz/util.c) $(TEST_SUPPORT) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter %.o,$^) -o $@ -Wl,--wrap=hc_die $(LINK_LIBS)

fuzz: ## libFuzzer targets built with clang, each run FUZZ_SECONDS (default 10)
	@command -v clang >/dev/null || { echo "fuzz: needs clang (libFuzzer)"; exit 1; }
	@$(MAKE) --no-print-directory O=$(FUZZ_O) BIN=$(FUZZ_O)/bin CC=clang OPT="$(FUZZ_OPT)" LDSAN= \
	    $(patsubst %,$(FUZZ_O)/fuzz/fuzz_%,$(FUZZ_TARGETS))
	@FUZZ_O=$(FUZZ_O) sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

.PHONY: valgrind faults tsan
valgrind: ## the programs under valgrind (tests/test_valgrind.sh, ~45 s; not in make test)
	@$(MAKE) --no-print-directory $(PROGRAMS)
	@HC_VALGRIND=1 HC_BIN=$(abspath $(BIN)) sh tests/test_valgrind.sh

faults: ## full disk, kills, bad and huge inputs (tests/test_faults.sh; also in make test)
	@$(MAKE) --no-print-directory $(PROGRAMS)
	@HC_BIN=$(abspath $(BIN)) sh tests/test_faults.sh

# A report of ThreadSanitizer ends its test with a non-zero status (halt_on_error).
# A kernel whose address-space randomisation leaves TSan no room for its shadow
# memory (vm.mmap_rnd_bits above 28 for GCC 12's) is a skip, said as one.
TSAN_O := build/tsan
tsan: ## the C unit tests under ThreadSanitizer (build/tsan; not in make test)
	@$(MAKE) --no-print-directory O=$(TSAN_O) BIN=$(TSAN_O)/bin OPT="-O1 -g -fsanitize=thread" \
	    LDSAN=-fsanitize=thread $(patsubst $(O)/%,$(TSAN_O)/%,$(TESTS))
	@if $(TSAN_O)/tests/test_budget 2>&1 | grep -q 'ThreadSanitizer: unexpected memory mapping'; then \
	    echo "skip tsan: ThreadSanitizer cannot place its shadow memory on this kernel (vm.mmap_rnd_bits)"; \
	else TSAN_OPTIONS="halt_on_error=1 $${TSAN_OPTIONS:-}" HC_TESTS=$(abspath $(TSAN_O)/tests) \
	    sh tests/run.sh --binaries; fi
