# scripts/model.mk: model builds as Make targets, and the CI check of committed .gpuidx files.
# Included by the top Makefile; also usable alone: make -f scripts/model.mk model SRC=... HC_BIN=bin
#
#   make model SRC=SOURCE CORPUS=TEXT [QUANT=Q4_0] [BUDGET=4GiB] [OUT=build/model] [SHARDS=N] [THREADS=N]
#              [LAUNCH=local|slurm] [SBATCH_OPTS="--partition=... --time=..."]
#
# SRC: synth (hc-convert synth $(SYNTH_FLAGS)), a .gguf (used as is), a Hugging Face
# directory (hc-convert hf), or a llama2.c checkpoint (hc-convert llama2c, with
# TOKENIZER, default tokenizer.bin beside it). QUANT=none skips quantization.
# Artefacts in $(OUT):
#   model.gguf        converted model (absent when SRC is a .gguf)
#   model-quant.gguf  quantized model (absent when QUANT=none)
#   stats.gguf        activation statistics (SHARDS>1: merged from stats.shardI-N.gguf)
#   model.gpuidx      hot-neuron placement, and solve.json, hc-solve's report
# Every option value lives in a stamp file that is rewritten only when the value
# changes (source.txt, quant.txt, profile.txt, budget.txt), so a new BUDGET re-runs
# only hc-solve, a new or edited CORPUS re-runs hc-profile and hc-solve, a new QUANT
# re-runs quantize, profile and solve. With make -j the shards are profiled in
# parallel; merging them gives the same bytes as one run, so SHARDS is not a stamp.
# LAUNCH=slurm profiles the shards as a Slurm job array and merges them in a Slurm
# job (scripts/slurm-profile.sh, docs/slurm.md); it waits for them, and a rerun
# submits only the shards whose files are missing.
#
#   make gpuidx-check [GPUIDX_MANIFEST=models/gpuidx.manifest]   (CI)
#   make gpuidx-update
# regenerate every .gpuidx of the manifest with hc-solve; check fails naming each
# file that differs and its first differing byte; update rewrites them.

m_dir       := $(dir $(lastword $(MAKEFILE_LIST)))
BIN         ?= bin
HC_BIN      ?= $(BIN)
HC_CONVERT  ?= $(HC_BIN)/hc-convert
HC_QUANTIZE ?= $(HC_BIN)/hc-quantize
HC_PROFILE  ?= $(HC_BIN)/hc-profile
HC_SOLVE    ?= $(HC_BIN)/hc-solve

OUT           ?= build/model
QUANT         ?= Q4_0
BUDGET        ?= 4GiB
SHARDS        ?= 1
LAUNCH        ?= local
SBATCH_OPTS   ?=
THREADS       ?=
CORPUS        ?=
TOKENIZER     ?= $(dir $(SRC))tokenizer.bin
SYNTH_FLAGS   ?= --act relu --hot-fraction 0.1 --hot-skew 2
CONVERT_FLAGS ?=
QUANT_FLAGS   ?=
PROFILE_FLAGS ?=
SOLVE_FLAGS   ?=

.PHONY: model model-clean gpuidx-check gpuidx-update gpuidx-inputs

# ---------------------------------------------------------------- make model
MODEL_GOALS := $(filter model model-clean $(OUT)/%,$(MAKECMDGOALS))
ifneq ($(MODEL_GOALS),)
ifneq ($(filter-out model-clean,$(MODEL_GOALS)),)
  $(if $(SRC),,$(error make model: SRC=synth|MODEL.gguf|HF_DIR|CHECKPOINT.bin is required))
  $(if $(CORPUS),,$(error make model: CORPUS=TEXT_FILE is required (profiling corpus)))
  $(if $(wildcard $(CORPUS)),,$(error make model: CORPUS=$(CORPUS): no such file))
  $(if $(filter-out 0,$(shell test '$(SHARDS)' -ge 1 2>/dev/null && echo 1 || echo 0)),,$(error make model: SHARDS=$(SHARDS) is not a positive integer))
  $(if $(filter local slurm,$(LAUNCH)),,$(error make model: LAUNCH=$(LAUNCH): expected local or slurm))
endif

m_threads := $(if $(THREADS),-t $(THREADS))
m_kind    := $(if $(filter synth,$(SRC)),synth,$(if $(filter %.gguf,$(SRC)),gguf,$(if $(shell test -d '$(SRC)' && echo d),hf,llama2c)))
m_base    := $(if $(filter gguf,$(m_kind)),$(SRC),$(OUT)/model.gguf)
m_quant   := $(if $(filter none NONE,$(QUANT)),$(m_base),$(OUT)/model-quant.gguf)
m_gptq    := $(filter gptq GPTQ,$(QUANT))

# m_stamp FILE,VALUE: write VALUE to $(OUT)/FILE unless it already holds it
# (at parse time, so that make -n and make -q see the right state)
m_q = '$(subst ','\'',$(1))'
m_stamp = $(shell mkdir -p $(call m_q,$(OUT)) && f=$(call m_q,$(OUT)/$(1)) && v=$(call m_q,$(2)) && \
              { [ -f "$$f" ] && [ "$$(cat "$$f")" = "$$v" ] || printf '%s\n' "$$v" >"$$f"; })
ifneq ($(filter-out model-clean,$(MODEL_GOALS)),)
  $(call m_stamp,source.txt,$(m_kind) $(abspath $(SRC)) $(if $(filter llama2c,$(m_kind)),$(abspath $(TOKENIZER))) $(if $(filter synth,$(m_kind)),$(SYNTH_FLAGS),$(CONVERT_FLAGS)))
  $(call m_stamp,quant.txt,$(QUANT) $(QUANT_FLAGS)$(if $(m_gptq), --calib $(abspath $(CORPUS))))
  $(call m_stamp,profile.txt,$(abspath $(CORPUS)) $(PROFILE_FLAGS))
  $(call m_stamp,budget.txt,$(BUDGET) $(SOLVE_FLAGS))
endif

# no recipe: make -q model answers whether the artefacts are up to date
model: $(OUT)/model.gpuidx ## convert, quantize, profile, solve: SRC=... CORPUS=... (scripts/model.mk)

model-clean: ## remove the artefacts of make model from OUT
	rm -f $(addprefix $(OUT)/,model.gguf model-quant.gguf stats.gguf stats.shard*.gguf stats.shards.txt model.gpuidx \
	      solve.json source.txt quant.txt profile.txt budget.txt)

# convert
ifeq ($(m_kind),synth)
$(OUT)/model.gguf: $(OUT)/source.txt $(HC_CONVERT)
	$(HC_CONVERT) synth -o $@ $(SYNTH_FLAGS)
else ifeq ($(m_kind),hf)
$(OUT)/model.gguf: $(OUT)/source.txt $(HC_CONVERT) $(wildcard $(SRC)/*.json $(SRC)/*.safetensors $(SRC)/tokenizer.model)
	$(HC_CONVERT) hf $(SRC) -o $@ $(CONVERT_FLAGS)
else ifeq ($(m_kind),llama2c)
$(OUT)/model.gguf: $(OUT)/source.txt $(HC_CONVERT) $(SRC) $(TOKENIZER)
	$(HC_CONVERT) llama2c $(SRC) $(TOKENIZER) -o $@ $(CONVERT_FLAGS)
endif

# quantize (GPTQ calibrates on the corpus)
ifneq ($(m_quant),$(m_base))
$(OUT)/model-quant.gguf: $(m_base) $(OUT)/source.txt $(OUT)/quant.txt $(HC_QUANTIZE) $(if $(m_gptq),$(CORPUS))
	$(HC_QUANTIZE) -q $(m_threads) $(if $(m_gptq),--calib $(CORPUS)) $(QUANT_FLAGS) $(m_base) $@ $(QUANT)
endif

# profile: one run, or SHARDS shards (parallel under make -j, or as Slurm jobs) merged
m_prof_deps := $(m_quant) $(OUT)/source.txt $(OUT)/quant.txt $(OUT)/profile.txt $(CORPUS) $(HC_PROFILE)
ifeq ($(LAUNCH),slurm)
$(OUT)/stats.gguf: $(m_prof_deps)
	HC_PROFILE=$(HC_PROFILE) sh $(m_dir)slurm-profile.sh -m $(m_quant) -f $(CORPUS) -o $@ -n $(SHARDS) $(m_threads) \
	    --profile-opts $(call m_q,$(PROFILE_FLAGS)) --sbatch-opts $(call m_q,$(SBATCH_OPTS)) --logs $(OUT)/logs
else ifeq ($(SHARDS),1)
$(OUT)/stats.gguf: $(m_prof_deps)
	$(HC_PROFILE) -m $(m_quant) -f $(CORPUS) -o $@ $(m_threads) $(PROFILE_FLAGS)
else
m_shards := $(foreach i,$(shell seq 0 $$(($(SHARDS) - 1))),$(OUT)/stats.shard$(i)-$(SHARDS).gguf)
$(OUT)/stats.shard%-$(SHARDS).gguf: $(m_prof_deps)
	$(HC_PROFILE) -m $(m_quant) -f $(CORPUS) -o $@ --shard $*/$(SHARDS) $(m_threads) $(PROFILE_FLAGS)
$(OUT)/stats.gguf: $(m_shards) $(HC_PROFILE)
	$(HC_PROFILE) merge $(m_shards) -o $@
endif

# solve
$(OUT)/model.gpuidx: $(m_quant) $(OUT)/stats.gguf $(OUT)/budget.txt $(HC_SOLVE)
	$(HC_SOLVE) -m $(m_quant) -s $(OUT)/stats.gguf --vram-budget $(BUDGET) $(SOLVE_FLAGS) -o $@ --report $(OUT)/solve.json
endif

# ---------------------------------------------------------------- committed .gpuidx files
# Manifest lines: GPUIDX MODEL STATS BUDGET [hc-solve options...], paths relative
# to the manifest's folder; '#' starts a comment line.
GPUIDX_MANIFEST ?= models/gpuidx.manifest

# m_gpuidx MODE: check or update every manifest entry
define m_gpuidx
@mode=$(1); m='$(GPUIDX_MANIFEST)'; d=$$(dirname "$$m"); \
[ -f "$$m" ] || { echo "gpuidx-$$mode: $$m: no such manifest" >&2; exit 1; }; \
tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/gpuidx.XXXXXX") || exit 1; \
trap 'rm -rf "$$tmp"' EXIT; bad=0; n=0; \
while read -r idx model stats budget opts; do \
    case $$idx in ''|'#'*) continue ;; esac; \
    n=$$((n + 1)); new="$$tmp/$$n/$$(basename "$$idx")"; mkdir -p "$$tmp/$$n"; \
    if [ -z "$$budget" ]; then echo "gpuidx-$$mode: $$m: line for $$idx needs GPUIDX MODEL STATS BUDGET" >&2; bad=1; continue; fi; \
    if ! $(HC_SOLVE) -m "$$d/$$model" -s "$$d/$$stats" --vram-budget "$$budget" $$opts -o "$$new" >"$$tmp/log" 2>&1 </dev/null; then \
        cat "$$tmp/log" >&2; echo "gpuidx-$$mode: $$d/$$idx: hc-solve failed" >&2; bad=1; continue; fi; \
    if [ ! -f "$$d/$$idx" ]; then diff="is missing"; \
    elif c=$$(cmp "$$d/$$idx" "$$new" 2>&1); then diff=; \
    else b=$$(printf '%s\n' "$$c" | sed -n 's/.* byte \([0-9]*\).*/\1/p'); \
         case $$c in *EOF*) diff="differs from the regenerated file at byte offset $${b:-0} (one of them ends there)" ;; \
                     *) diff="differs from the regenerated file at byte offset $$((b - 1)) (cmp: byte $$b)" ;; esac; fi; \
    if [ -z "$$diff" ]; then echo "gpuidx-$$mode: $$d/$$idx: ok"; \
    elif [ "$$mode" = update ]; then cp "$$new" "$$d/$$idx.tmp" && mv "$$d/$$idx.tmp" "$$d/$$idx" && \
        echo "gpuidx-$$mode: $$d/$$idx rewritten (it $$diff)" || bad=1; \
    else echo "gpuidx-$$mode: $$d/$$idx $$diff; make gpuidx-update rewrites it" >&2; bad=1; fi; \
done <"$$m"; \
[ $$n -gt 0 ] || { echo "gpuidx-$$mode: $$m: no entries" >&2; exit 1; }; \
exit $$bad
endef

# gpuidx-inputs: regenerate the committed model and statistics of models/ (when a tool's
# output format changes), then make gpuidx-update
m_in := models
gpuidx-inputs: $(HC_CONVERT) $(HC_QUANTIZE) $(HC_PROFILE) ## regenerate the committed model and statistics of models/
	@mkdir -p build/gpuidx-inputs
	$(HC_CONVERT) synth -o build/gpuidx-inputs/synth-relu.gguf --act relu --hot-fraction 0.1 --hot-skew 2
	$(HC_QUANTIZE) -q build/gpuidx-inputs/synth-relu.gguf $(m_in)/synth-relu-q4_0.gguf Q4_0
	$(HC_PROFILE) -m $(m_in)/synth-relu-q4_0.gguf -f $(m_in)/synth-corpus.txt -o $(m_in)/synth-relu.stats.gguf

gpuidx-check: $(HC_SOLVE) ## re-solve every committed .gpuidx (models/gpuidx.manifest), fail on a byte change
	$(call m_gpuidx,check)

gpuidx-update: $(HC_SOLVE) ## rewrite the committed .gpuidx files
	$(call m_gpuidx,update)
