#!/bin/sh
# llama.cpp's tokenizer test vectors, every vocabulary: fetches the
# llama-cpp-python sdist from PyPI (its vendored llama.cpp 0c1e570), takes
# vendor/llama.cpp/models/ggml-vocab-*.gguf with their .inp/.out into DIR, and
# runs tests/test_tokenizer.c's test_llama_vocab_dir on them: one line per
# vocabulary (N/N cases with llama.cpp's ids, or the refusal) on stderr.
# These files are MIT-licensed but large: they stay out of the repository.
#   sh scripts/llama-vocab.sh [DIR]        (default build/llama-vocab; kept for the next run)
set -eu
DIR=${1:-build/llama-vocab}
VERSION=0.3.36
mkdir -p "$DIR"
if ! ls "$DIR"/ggml-vocab-*.gguf >/dev/null 2>&1; then
    python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$DIR" >&2
    tar -xzf "$DIR/llama_cpp_python-$VERSION.tar.gz" -C "$DIR" --strip-components=4 --wildcards \
        "llama_cpp_python-$VERSION/vendor/llama.cpp/models/ggml-vocab-*"
    rm -f "$DIR/llama_cpp_python-$VERSION.tar.gz"
fi
O=${O:-build}
make -s O="$O" "$O/tests/test_tokenizer" >&2
HC_LLAMA_VOCAB=$DIR "$O/tests/test_tokenizer"
