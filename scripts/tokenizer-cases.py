#!/usr/bin/env python3
"""Writes tests/bpe_cases.h: the ids Hugging Face `tokenizers` gives for the
hostile inputs of tests/test_tokenizer_bpe.c, as (count, FNV-1a 64 of the
int32 ids) so that 10 000-token answers stay small.

    pip install tokenizers && python3 scripts/tokenizer-cases.py [FIXTURES]

FIXTURES defaults to ../shared/fixtures; the tokenizer is
hf-tokenizers/bpe-llama3/tokenizer.json, as stated, or changed the way the
test changes it (VARIANTS), plus two SentencePiece-style files (SPM_FILES).
Not part of `make test`: the test reads the header this writes."""
import json
import struct
import sys

from tokenizers import Tokenizer, __version__

FIX = sys.argv[1] if len(sys.argv) > 1 else "../shared/fixtures"
BASE = json.load(open(FIX + "/hf-tokenizers/bpe-llama3/tokenizer.json"))

CATS = ["A", "a", "\u01c5", "\u02b0", "\u0627", "\u0301", "\u0903", "\u20dd", "\u0663", "\u216b", "\u00bd",
        "_", "-", "(", ")", "\u00ab", "\u00bb", "!", "+", "$", "^", "\u00a9", "\u3000", "\u2028", "\u2029",
        "\x01", "\u200b", "\ue000", "\u0378"]
# name, unit, repeat, suffix: the text is unit * repeat + suffix
HOSTILE = [
    ("nul", "a\x00b \x00", 1, ""),
    ("combining", "\u0301 e\u0301\u0301 \u0301x \u20dd", 1, ""),
    ("long_letters", "a", 10000, ""),
    ("long_2byte", "\u00e9", 10000, ""),
    ("long_4byte", "\U0001f999", 3000, ""),
    ("long_digits", "1", 10000, ""),
    ("long_spaces", " ", 10000, "x"),
    ("long_newlines", "\n", 10000, ""),
    ("long_words", "lorem ipsum ", 2000, ""),
    ("categories", "".join("x" + c + "y " + c + " " for c in CATS), 1, ""),
    ("contractions", "'S 'LL 'll I'M \u017f'\u017f '\u017f \u212a", 1, ""),
    ("whitespace", "\r\n\r\n  \t x\u00a0y\u2003z\n \n", 1, ""),
    ("specials", "<|begin_of_text|>Hello<|end_of_text|> <|end_of_text|>x", 1, ""),
]
# invalid UTF-8: the runtime reads each byte that does not start a valid
# character as U+FFFD (as llama.cpp does); tokenizers only takes valid text
INVALID = [
    ("invalid_ff", b"a\xffb", "a\ufffdb"),
    ("invalid_truncated", b"x\xc3", "x\ufffd"),
    ("invalid_surrogate", b"\xed\xa0\x80z", "\ufffd\ufffd\ufffdz"),
    ("invalid_overlong", b"\xc0\x80 q", "\ufffd\ufffd q"),
    ("invalid_too_big", b"\xf4\x90\x80\x80", "\ufffd" * 4),
    ("invalid_cut_3byte", b"\xe2\x82 euro", "\ufffd\ufffd euro"),
]
TEXT = ("Hello world 1234567 it's  done\n\n \u00e9t\u00e9 \u4e2d\u6587 \U0001f999!! \u039f\u0394\u039f\u03a3 "
        "\u0130stanbul \uff21\uff22\uff23 \ufb01 e\u0301 \u00c5 \u212b \u00bd 2024"
        " x  <|end_of_text|>  y\u3000<|end_of_text|>\u2005z <|end_of_text|>\u00a0\n")
LLAMA3 = BASE["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
BL_NOREGEX = dict(BL, use_regex=False)
def split(rx):
    return {"type": "Split", "pattern": {"Regex": rx}, "behavior": "Isolated", "invert": False}
# name, pre_tokenizer, post_processor (None: the file's), ignore_merges, llama.cpp name (None: hotcold key),
# normalizer (None: the file's), lstrip (1) / rstrip (2) on added token 1
QWEN2 = {"type": "Sequence", "pretokenizers": [split(LLAMA3.replace("\\p{N}{1,3}", "\\p{N}")), BL_NOREGEX]}
NORMS = {"type": "Sequence", "normalizers": [
    {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Replace", "pattern": {"Regex": "\\d{2,}"}, "content": "#"},
    {"type": "Replace", "pattern": {"String": "it's"}, "content": "it is"}, {"type": "Prepend", "prepend": ">"}]}
VARIANTS = [
    ("qwen2", QWEN2, None, False, "qwen2", None, 0),
    ("qwen2_nfc", QWEN2, None, False, "qwen2", {"type": "NFC"}, 0),
    ("normalizers", QWEN2, None, False, "qwen2", NORMS, 0),
    ("nfd", QWEN2, None, False, "qwen2", {"type": "NFD"}, 0),
    ("nfkd", QWEN2, None, False, "qwen2", {"type": "NFKD"}, 0),
    ("lstrip", BASE["pre_tokenizer"], None, True, "llama-bpe", None, 1),
    ("rstrip", BASE["pre_tokenizer"], None, True, "llama-bpe", None, 2),
    ("lrstrip", BASE["pre_tokenizer"], None, True, "llama-bpe", None, 3),
    ("gpt2", BL, {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
     False, "gpt-2", None, 0),
    ("starcoder", {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, BL]},
     None, False, "starcoder", None, 0),
    ("smaug", BASE["pre_tokenizer"], None, False, "smaug-bpe", None, 0),
    # Falcon's tokenizer.json: digits split again after ByteLevel (llama.cpp's "falcon")
    ("falcon", {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Contiguous"}, BL,
                                                      {"type": "Digits", "individual_digits": False},
                                                      split("[0-9][0-9][0-9]")]},
     None, False, "falcon", None, 0),
    ("punctuation", {"type": "Sequence", "pretokenizers": [{"type": "Punctuation"}, BL]}, None, False, None, None, 0),
    ("custom", {"type": "Sequence", "pretokenizers": [split(LLAMA3.replace("\\p{N}{1,3}", "\\p{N}{1,2}")),
                                                      {"type": "Digits", "individual_digits": False}, BL_NOREGEX]},
     None, True, None, None, 0),
]
SPM_VOCAB = ["<unk>", "<s>", "</s>", "\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + \
    ["\u2581t", "he", "\u2581the", "in", "\u2581a", "an", "\u2581an", "d", "\u00e9"]
SPM_MERGES = ["\u2581 t", "h e", "\u2581t he", "i n", "\u2581 a", "a n", "\u2581a n"]
def spm_bpe(fuse):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for i, t in enumerate(SPM_VOCAB[:3])],
            "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                           {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
            "pre_tokenizer": None,
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": None,
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": fuse, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {t: i for i, t in enumerate(SPM_VOCAB)}, "merges": SPM_MERGES}}
def spm_metaspace(scheme):
    d = spm_bpe(True)
    d["normalizer"] = None
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": False}
    return d
def spm_unigram():
    d = spm_bpe(True)
    # scores that make the best path differ from merging the best pair first
    scores = [0.0, 0.0, 0.0] + [-(1.0 + (i * 37 % 17) / 2.0) for i in range(3, len(SPM_VOCAB))]
    d["model"] = {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
                  "vocab": [[t, sc] for t, sc in zip(SPM_VOCAB, scores)]}
    return d
SPM_FILES = [("spm_fuse", spm_bpe(True)), ("spm_nofuse", spm_bpe(False)), ("spm_first", spm_metaspace("first")),
             ("spm_always", spm_metaspace("always")), ("unigram", spm_unigram())]
SPM_TEXTS = ["the \u4e2d\u6587\u00e9\u00e9 an\u00f1\u00f1x then", "\u4e2d the\u6587\u6587 a\u00df", "d\u00e9\u00e9",
             "ab<s>the an<s> then thee", " <s> the \u2581x"]


def fnv(ids):
    h = 0xcbf29ce484222325
    for b in struct.pack("<%di" % len(ids), *ids):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def c_str(b):
    out = '"'
    for ch in b:   # octal escapes are always 3 digits: a digit after one is safe
        if 32 <= ch < 127 and ch not in (34, 92, 63):
            out += chr(ch)
        elif ch in (34, 92):
            out += "\\" + chr(ch)
        else:
            out += "\\%03o" % ch
    return out + '"'


def case(tok, text):
    ids = tok.encode(text).ids
    return "%d, 0x%016xULL" % (len(ids), fnv(ids))


def main():
    base = Tokenizer.from_str(json.dumps(BASE))
    w = ["/* Generated by scripts/tokenizer-cases.py with tokenizers %s: do not edit. */" % __version__,
         "typedef struct { const char *name, *unit; size_t unit_len; int repeat; const char *suffix; "
         "int n; uint64_t hash; } bpe_case;", "static const bpe_case HOSTILE[] = {"]
    for name, unit, rep, suffix in HOSTILE:
        u = unit.encode()
        w.append('    { "%s", %s, %d, %d, %s, %s },' % (name, c_str(u), len(u), rep, c_str(suffix.encode()),
                                                       case(base, unit * rep + suffix)))
    for name, raw, text in INVALID:
        w.append('    { "%s", %s, %d, 1, "", %s },' % (name, c_str(raw), len(raw), case(base, text)))
    w.append("};")
    w.append("static const char VARIANT_TEXT[] = %s;" % c_str(TEXT.encode()))
    w.append("typedef struct { const char *name, *pre_tokenizer, *post_processor; int ignore_merges; "
             "const char *pre, *normalizer; int strip, n; uint64_t hash; } bpe_variant;")
    w.append("static const bpe_variant VARIANTS[] = {")
    for name, pre, post, im, llname, norm, strip in VARIANTS:
        d = json.loads(json.dumps(BASE))
        d["pre_tokenizer"] = pre
        if post is not None:
            d["post_processor"] = post
        if norm is not None:
            d["normalizer"] = norm
        d["model"]["ignore_merges"] = im
        d["added_tokens"][1]["lstrip"] = bool(strip & 1)
        d["added_tokens"][1]["rstrip"] = bool(strip & 2)
        tok = Tokenizer.from_str(json.dumps(d))
        w.append('    { "%s", %s, %s, %d, %s, %s, %d, %s },' % (
            name, c_str(json.dumps(pre).encode()), c_str(json.dumps(post).encode()) if post else "NULL",
            int(im), '"%s"' % llname if llname else "NULL", c_str(json.dumps(norm).encode()) if norm else "NULL",
            strip, case(tok, TEXT)))
    w.append("};")
    w.append("typedef struct { const char *name, *json; int ids[%d][32]; } spm_file;" % len(SPM_TEXTS))
    w.append("static const char *const SPM_TEXTS[] = { %s };" % ", ".join(c_str(t.encode()) for t in SPM_TEXTS))
    w.append("static const spm_file SPM_FILES[] = {")
    for name, d in SPM_FILES:
        tok = Tokenizer.from_str(json.dumps(d))
        ids = [tok.encode(t).ids + [-1] for t in SPM_TEXTS]
        w.append('    { "%s", %s,' % (name, c_str(json.dumps(d).encode())))
        w.append("      { %s } }," % ", ".join("{ %s }" % ", ".join(map(str, i)) for i in ids))
    w.append("};")
    open("tests/bpe_cases.h", "w").write("\n".join(w) + "\n")


main()
