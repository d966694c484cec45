/* hc-convert internals: each input reader (llama2.c, Hugging Face, synth)
 * validates its input completely, then describes the output as a vocabulary,
 * hyper-parameters and a list of tensors; convert_out.c streams that into a
 * GGUF. Nothing is written before the input has been validated. */
#ifndef HC_CONVERT_H
#define HC_CONVERT_H

#include <stddef.h>
#include <stdint.h>
#include "cli.h"
#include "gguf.h"

/* The most bytes each JSON input of a Hugging Face directory may have
 * (hc_read_json: cJSON takes about 40 times the text). The largest seen are
 * a few KiB of config.json, ~100 KiB of index for 3000 tensors, 33 MiB of
 * tokenizer.json. */
#define HF_MAX_CONFIG_JSON (1u << 20)
#define HF_MAX_INDEX_JSON (16u << 20)
#define HF_MAX_TOKENIZER_JSON (64u << 20)

/* llama_token_type values (the same numbers as SentencePiece's piece types). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER_DEFINED = 4,
       TOK_UNUSED = 5, TOK_BYTE = 6 };

/* A vocabulary in llama.cpp's SentencePiece form (spaces already U+2581), or
 * its byte-level BPE form (model "gpt2": tokens in GPT-2's byte-to-unicode
 * characters, merges "left right" in rank order; see gguf-tools/convert_bpe.c). */
typedef struct {
    uint32_t n;
    char **tokens;           /* NUL-terminated copies */
    float *scores;
    int32_t *types;
    const char *model;       /* tokenizer.ggml.model: "llama" or "gpt2" */
    char **merges;           /* gpt2 */
    uint32_t n_merges;
    const char *pre;         /* gpt2: llama.cpp's pre-tokenizer name, or NULL: then */
    char **pre_regex;        /* the regexes, as hotcold.tokenizer.pre_regex */
    char *normalizer;        /* gpt2: tokenizer.json's normalizer (JSON), as hotcold.tokenizer.normalizer */
    uint32_t n_pre_regex;
    int ignore_merges;       /* gpt2: -1, or hotcold.tokenizer.ignore_merges (the name's differs) */
    int add_bos, add_eos;    /* the post-processor's: -1 when the file does not say */
    int64_t bos_id, eos_id;  /* the tokens it adds, or -1 */
    int fuse_unk;            /* 0: hotcold.tokenizer.fuse_unk = false (one <unk> per character) */
    int add_space_prefix;    /* llama: -1, or tokenizer.ggml.add_space_prefix */
    uint32_t *strip[2];      /* ids of added tokens with lstrip [0] / rstrip [1] (hotcold.tokenizer.*strip) */
    uint32_t n_strip[2];
    const char *prepend_scheme;  /* llama: Metaspace's "first" or "always" (hotcold.tokenizer.prepend_scheme) */
    int unigram;             /* llama: hotcold.tokenizer.unigram (scores are Unigram's: Viterbi) */
} cv_vocab;

void cv_vocab_init(cv_vocab *v, uint32_t n);            /* n empty NORMAL tokens, model "llama" */
/* Set token id (text of len bytes is copied; for "llama" every ' ' becomes U+2581). */
void cv_vocab_set(cv_vocab *v, uint32_t id, const char *text, size_t len, float score, int32_t type);
void cv_vocab_free(cv_vocab *v);
/* 1 if text is exactly a byte token "<0xHH>". */
int cv_is_byte_token(const char *text, size_t len);

/* Hyper-parameters and special token ids as written into the GGUF. */
typedef struct {
    uint32_t n_vocab, n_embd, n_ff, n_layer, n_head, n_head_kv, n_ctx;
    float eps;
    const char *arch;        /* general.architecture and key prefix; NULL: "llama" */
    uint32_t head_dim;       /* 0: n_embd / n_head */
    int layer_norm;          /* eps is attention.layer_norm_epsilon (LayerNorm), not _rms_ */
    int no_rope;             /* learned positions: no rope.dimension_count */
    const char *name;        /* general.name */
    uint32_t unk_id, bos_id, eos_id, pad_id;    /* pad: UINT32_MAX when none */
} cv_hparams;

/* The KVs every converter writes, in the order llama.cpp's llama2.c converter
 * writes them: vocab arrays, tokenizer model, architecture, name, special ids,
 * ARCH.* hyper-parameters. Callers append their own keys after these. */
void cv_set_llama_kvs(gguf_writer *w, const cv_hparams *hp, const cv_vocab *v);
/* 0 when the shape is one this toolchain and llama.cpp accept, else -1 + message. */
int cv_check_hparams(const cv_hparams *hp, char *err, size_t errlen);

/* One output tensor, produced row by row as F32 (ne[0] floats per row) and then
 * stored as `type`. Source: either `gen`, or `src` (row-major F32/F16/BF16 data,
 * e.g. a mapped file) read straight, with the Q/K row permutation, or transposed. */
typedef struct cv_tensor cv_tensor;
typedef void (*cv_gen_fn)(const cv_tensor *t, int64_t row0, int64_t nrows, float *out);

typedef enum {
    CV_COPY = 0,       /* output row r = source row r */
    CV_PERMUTE,        /* HF rotate-half -> GGUF adjacent pairs, over `heads` heads */
    CV_TRANSPOSE,      /* output row r = source column r (source has ne[1] columns) */
    CV_FALCON_QKV,     /* Falcon's query_key_value, per KV group [its Q heads, K, V] -> all Q, all K, all V */
} cv_layout;

struct cv_tensor {
    char name[GGUF_MAX_NAME + 1];
    uint32_t type;           /* GGML_TYPE_F32, F16 or BF16 */
    uint32_t n_dims;
    int64_t ne[2];
    const void *src;
    uint32_t src_type;
    cv_layout layout;
    uint32_t heads;          /* CV_PERMUTE, CV_FALCON_QKV */
    uint32_t heads_kv;       /* CV_FALCON_QKV */
    cv_gen_fn gen;
    const void *gen_ctx;
    int64_t gen_id;          /* free for the generator (e.g. layer index) */
};

/* A growing list of output tensors. */
typedef struct {
    cv_tensor *t;
    size_t n, cap;
} cv_tensors;

/* Append a tensor; name is printf-formatted. Returns it for further fields. */
cv_tensor *cv_add(cv_tensors *ts, uint32_t type, uint32_t n_dims, int64_t ne0, int64_t ne1,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void cv_tensors_free(cv_tensors *ts);

/* Declare every tensor, then stream their bytes into path (atomically, with a
 * progress bar on a terminal). 0, or -1 + message (no output file then). */
int cv_write(gguf_writer *w, const cv_tensors *ts, const char *path, char *err, size_t errlen);

/* ------------------------------------------------------------ safetensors
 * A set of mapped .safetensors files (one model, possibly sharded). Headers are
 * parsed with cJSON and validated: known dtype, shape, offsets inside the data
 * section, bytes = dtype size x elements, no two tensors overlapping. */
typedef struct {
    char *name;
    char dtype[12];          /* "F32", "BF16", "I64", ... */
    uint32_t type;           /* GGML_TYPE_F32/F16/BF16, or UINT32_MAX for other dtypes */
    uint32_t n_dims;
    int64_t shape[8];        /* safetensors (PyTorch) order: shape[n_dims-1] is contiguous */
    const void *data;
    uint64_t nbytes;
    size_t file;             /* index into st_set.paths */
    int used;                /* set by the converter that consumes it */
} st_tensor;

typedef struct {
    hc_map *maps;
    char **paths;
    size_t n_files;
    st_tensor *t;
    size_t n;
    size_t *by_name;         /* indices of t sorted by name, for st_find */
    const char *where;       /* named in "missing tensor" messages (the directory) */
} st_set;

/* Map one file and add its tensors, each named prefix + its name in the file
 * (prefix "" for none; a name already in the set is an error). O(n log n) in
 * the set's tensors: names and offsets are sorted, not compared pairwise. */
int st_add_file(st_set *s, const char *path, const char *prefix, char *err, size_t errlen);
/* Index of a tensor by name, or -1 (binary search). */
long st_find(const st_set *s, const char *name);
void st_free(st_set *s);

/* ------------------------------------------------------------ tokenizers
 * The vocabulary of a Hugging Face directory: tokenizer.model (SentencePiece
 * protobuf) when present, else tokenizer.json (SentencePiece-style BPE with
 * byte_fallback, or Unigram). Padded to n_vocab with UNUSED "[PADi]" tokens. */
int cv_hf_vocab(const char *dir, uint32_t n_vocab, cv_vocab *v, uint32_t *unk_id,
                char *err, size_t errlen);

/* ------------------------------------------------------------ converters
 * What hc-convert's subcommands run once their options are parsed and
 * checked (gguf-tools/hc-convert.c). Each writes out atomically and returns
 * 0, or -1 with a one-line message in err (no output file then); a reader
 * that finds its input bad exits through hc_die, naming the file. */

/* llama2.c checkpoint (legacy or version 1) + tokenizer.bin -> llama GGUF. */
typedef struct {
    const char *checkpoint, *tokenizer, *out;
    long ctx;                /* llama.context_length; 0: the checkpoint's seq_len */
} cv_llama2c_opts;
int cv_convert_llama2c(const cv_llama2c_opts *o, char *err, size_t errlen);

/* Hugging Face directory of a supported family (convert_hf.h) -> GGUF, or
 * PowerInfer's sparse GGUF (PWRI) with the predictors of predictors (NULL: none). */
typedef struct {
    const char *dir, *predictors, *out;
    uint32_t type;           /* GGML_TYPE_F32, F16 or BF16: 2-D weights */
    int relu_arch;           /* --relu-arch: insist on "llama-relu" (the default for a dense ReLU llama) */
    int llama_arch;          /* --llama-arch: a dense ReLU llama as "llama" (docs/formats.md: llama.cpp misruns it) */
} cv_hf_opts;
int cv_convert_hf(const cv_hf_opts *o, char *err, size_t errlen);

/* A random well-formed GGUF of a family, deterministic from seed, optionally with
 * a planted hot-neuron set (convert_synth.c). */
typedef struct {
    const char *out;
    long dim, n_ff, layers, heads, kv_heads, vocab, ctx;   /* kv_heads 0: heads */
    int relu;                /* FFN activation: ReLU, else SiLU */
    uint32_t type;           /* GGML_TYPE_F32 or F16: 2-D weights */
    uint64_t seed;
    double hot_fraction;     /* in (0, 1]; 0: nothing planted */
    double hot_skew;
    double active_fraction;  /* in (0, 1): every neuron's firing rate; 0: not planted */
    long gate_rank;          /* gate rows of this rank; 0: full rank */
    const char *arch;        /* llama, qwen2, bamboo, opt or falcon: the family's tensor set */
} cv_synth_opts;
int cv_convert_synth(const cv_synth_opts *o, char *err, size_t errlen);

/* tokenizer.json (parsed) pieces, in gguf-tools/convert_bpe.c: */
struct cJSON;
/* 1 when its pre-tokenizer maps bytes (ByteLevel): a byte-level BPE. */
int cv_json_byte_level(const struct cJSON *root);
/* The byte-level BPE model of root into v (model "gpt2"); unsupported parts
 * are refused by name. 0, or -1 + "path: what" in err. */
int cv_json_bpe(const char *path, const struct cJSON *root, cv_vocab *v, char *err, size_t errlen);
/* SentencePiece-style files: refuse a normalizer or pre-tokenizer other than
 * the U+2581 escaping the SPM tokenizer does itself; set v's prefix and
 * fuse_unk flags. 0, or -1 + message. */
int cv_json_spm(const char *path, const struct cJSON *root, cv_vocab *v, char *err, size_t errlen);
/* added_tokens' lstrip/rstrip into v; single_word is refused. 0, or -1 + message. */
int cv_json_added(const char *path, const struct cJSON *root, cv_vocab *v, char *err, size_t errlen);
/* The post-processor's BOS/EOS into v (add_bos, add_eos, bos_id, eos_id). */
int cv_json_post(const char *path, const struct cJSON *root, cv_vocab *v, char *err, size_t errlen);
/* A merge, "a b" or ["a", "b"]: its two pieces. 0, or -1 when it is neither. */
int cv_json_merge(const struct cJSON *e, const char **a, size_t *na, const char **b, size_t *nb);

/* piece -> id hash index over a vocabulary's tokens (open addressing). */
typedef struct {
    int64_t *slot;           /* id, or -1 */
    uint64_t mask;
} cv_piece_index;
void cv_index_build(cv_piece_index *ix, const cv_vocab *v);     /* free(ix->slot) after */
long cv_index_find(const cv_piece_index *ix, const cv_vocab *v, const char *piece);

/* The three subcommands: argc/argv start at the subcommand name. Exit status. */
int convert_llama2c_main(int argc, char **argv);
int convert_hf_main(int argc, char **argv);
int convert_synth_main(int argc, char **argv);

#endif
