#!/usr/bin/env python3
"""An independent GPTQ in numpy, the test oracle of hotcold's quantizer/gptq_*.c.

Written from the GPTQ paper (Frantar, Ashkboos, Hoefler, Alistarh, "GPTQ:
Accurate Post-Training Quantization for Generative Pre-trained Transformers",
ICLR 2023; Algorithm 1 and sections 3-4), in float64:
  - the Hessian of the layer-wise objective ||WX - QX||^2: H = 2/T X^T X;
  - dead inputs (H_jj = 0): H_jj = 1 and the column of W zeroed;
  - damping: lambda = damp * mean(diag H) added to the diagonal;
  - the inverse Hessian through Cholesky: U upper with H^-1 = U^T U, whose
    rows carry every update the column loop needs ("Cholesky reformulation");
  - lazy batches of 128 columns: inside a batch, column j's scaled error
    e = (w_j - q_j) / U_jj updates the batch's later columns at once
    (W[:, j+1:i2] -= e U[j, j+1:i2]), and the whole batch's errors update the
    columns after it in one product (W[:, i2:] -= E U[i1:i2, i2:]);
  - groups of group_size columns, each with its own grid; the grid of a group
    is chosen when the loop reaches its first column, from the weights as
    updated by every earlier column (hotcold's choice: a batch holds whole
    groups, so no group straddles a lazy update);
  - act-order: columns in order of decreasing H_jj (ties by index), with
    static groups: every group's grid is chosen before any update, from the
    unpermuted (dead-zeroed) weights, and g_idx stays k / group_size.
Grids, as hotcold stores them: "native" is the paper's min-max asymmetric or
symmetric 4-bit grid (scale (xmax - xmin) / 15 with 0 inside the range,
symmetric zero 8, asymmetric zero round(-xmin/scale)) with the scale rounded
to fp16 before any code is chosen; "q4_0" and "q4_1" are ggml's Q4_0 block
grid (d = fp16(max / -8), max the value of largest magnitude, zero 8) and
Q4_1 grid (d = fp16((xmax - xmin) / 15), m = fp16(xmin)). Codes round half
to even.

Usage: gptq_ref.py check DIR    one layer (below)
       gptq_ref.py calib DIR    a whole calibration of a llama2.c checkpoint
                                (see calib() and tests/test_gptq_oracle.c)
For check, DIR holds what the C test (tests/test_gptq_oracle.c) wrote: params.txt
(key value lines), W.f32 [N][K], X.f32 [T][K], H.f32 [K][K] (hotcold's
Hessian of X), codes.u8 [N][K], d.f32 / m.f32 [G][N] and zero.i32 [G][N]
(hotcold's grids), rel.f64 (hotcold's ||(W-Q)X|| / ||WX||). Prints one line
of figures and exits 1 (with the reason) when hotcold disagrees.

float32 (hotcold) and float64 (here) round differently, so a weight that
lands within TIE of a rounding boundary may get either code; the oracle then
follows hotcold's code (and likewise a grid whose scale lies within TIE of an
fp16 rounding boundary), counts it, and goes on from the same state, so
every other code must be identical. The unfollowed float64 run's layer error
is reported beside hotcold's.
"""
import sys

import numpy as np

BLOCK = 128
MAXQ = 15
TIE = 1e-3          # in grid steps (codes) or in fp16 steps (scales)
MAX_TIES = 0.005    # followed ties allowed, as a fraction of the codes


def fp16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def fp16_neighbours(x):
    """The two fp16 values around x (equal when x is one)."""
    h = np.float16(x)
    lo = h if float(h) <= x else np.nextafter(h, np.float16(-np.inf))
    hi = h if float(h) >= x else np.nextafter(h, np.float16(np.inf))
    return float(lo), float(hi)


class Grid:
    """value(q) = d * q + m; zero is the code of 0 (native, q4_0) or 0 (q4_1)."""

    def __init__(self, d, m, zero, raw_d=None, raw_zero=None):
        self.d, self.m, self.zero = d, m, zero
        self.raw_d = d if raw_d is None else raw_d          # before fp16 rounding
        self.raw_zero = raw_zero                            # before rounding (asym)


def find_grid(x, sym, kind):
    """The grid of one row over one group (x: that row's weights in the group)."""
    xmin, xmax = float(x.min()), float(x.max())
    if kind == "native":
        xmin, xmax = min(xmin, 0.0), max(xmax, 0.0)
        if sym:
            xmax = max(-xmin, xmax)
            if xmin < 0:
                xmin = -xmax
        if xmin == 0 and xmax == 0:
            xmin, xmax = -1.0, 1.0
        scale = (xmax - xmin) / MAXQ
        raw_zero = None if sym else -xmin / scale
        zero = (MAXQ + 1) // 2 if sym else int(np.rint(raw_zero))
        d = fp16(scale)
        if d == 0:
            d = float(np.nextafter(np.float16(0), np.float16(1)))
        return Grid(d, -d * zero, zero, scale, raw_zero)
    if kind == "q4_0":
        mx = float(x[np.argmax(np.abs(x))])     # first of largest magnitude
        return Grid(fp16(mx / -8.0), -8.0 * fp16(mx / -8.0), 8, mx / -8.0)
    d = fp16((xmax - xmin) / MAXQ)
    return Grid(d, fp16(xmin), 0, (xmax - xmin) / MAXQ)


def unclamped(g, kind, w):
    """The real-valued code of w before rounding and clamping."""
    if g.d == 0:
        return float(g.zero)
    if kind == "q4_1":
        return (w - g.m) / g.d
    return w / g.d + g.zero


def code(g, kind, w):
    if g.d == 0:
        return g.zero
    if kind == "q4_1":
        q = np.rint((w - g.m) / g.d)
    else:
        q = np.rint(w / g.d) + g.zero
    return int(min(max(q, 0), MAXQ))


class Follow:
    """Follows hotcold through near-ties (see the top); None: run alone."""

    def __init__(self, codes, d, m, zero):
        self.codes, self.d, self.m, self.zero = codes, d, m, zero
        self.code_ties = self.grid_ties = 0

    def grid(self, mine, g, n):
        hd, hm, hz = float(self.d[g, n]), float(self.m[g, n]), int(self.zero[g, n])
        if (mine.d, mine.m, mine.zero) == (hd, hm, hz):
            return mine
        lo, hi = fp16_neighbours(mine.raw_d)
        d_tie = hd in (lo, hi) and abs(mine.raw_d - (lo + hi) / 2) <= TIE * (hi - lo)
        z_tie = mine.raw_zero is not None and abs(mine.raw_zero - (min(mine.zero, hz) + 0.5)) <= TIE
        if (hd == mine.d or d_tie) and (hz == mine.zero or z_tie):
            self.grid_ties += 1
            return Grid(hd, hm, hz)
        raise Mismatch("grid of group %d row %d: hotcold d %.9g m %.9g zero %d, oracle d %.9g (raw %.9g) "
                       "m %.9g zero %d" % (g, n, hd, hm, hz, mine.d, mine.raw_d, mine.m, mine.zero))

    def code(self, mine, g, kind, w, n, k):
        h = int(self.codes[n, k])
        if h == mine:
            return mine
        x = unclamped(g, kind, w)
        if abs(h - mine) == 1 and abs(x - (min(h, mine) + 0.5)) <= TIE:
            self.code_ties += 1
            return h
        raise Mismatch("code of row %d column %d: hotcold %d, oracle %d (unrounded %.6f)" % (n, k, h, mine, x))


class Mismatch(Exception):
    pass


def fasterquant(W, H, gs, sym, kind, act_order, damp, follow=None):
    """Codes [N][K] and grids [G][N] of W [N][K] on H [K][K] (None: round to nearest)."""
    N, K = W.shape
    G = (K + gs - 1) // gs
    W = W.astype(np.float64).copy()
    codes = np.zeros((N, K), dtype=np.int64)
    grids = [[None] * N for _ in range(G)]

    def set_grids(g, cols):
        for n in range(N):
            mine = find_grid(cols[n], sym, kind)
            grids[g][n] = follow.grid(mine, g, n) if follow else mine

    if H is None:
        for g in range(G):
            set_grids(g, W[:, g * gs:(g + 1) * gs])
            for k in range(g * gs, min((g + 1) * gs, K)):
                for n in range(N):
                    c = code(grids[g][n], kind, W[n, k])
                    codes[n, k] = follow.code(c, grids[g][n], kind, W[n, k], n, k) if follow else c
        return codes, grids

    H = H.astype(np.float64).copy()
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    perm = np.arange(K)
    if act_order:
        for g in range(G):                       # static groups
            set_grids(g, W[:, g * gs:(g + 1) * gs])
        perm = np.argsort(-np.diag(H), kind="stable")
        W, H = W[:, perm], H[perm][:, perm]
    H[np.diag_indices(K)] += damp * np.mean(np.diag(H))
    L = np.linalg.cholesky(H)
    Linv = np.linalg.inv(L)
    Hinv = Linv.T @ Linv
    U = np.linalg.cholesky(Hinv).T               # H^-1 = U^T U, U upper

    B = gs if gs >= BLOCK else BLOCK // gs * gs  # whole groups per lazy batch
    for i1 in range(0, K, B):
        i2 = min(i1 + B, K)
        E = np.zeros((N, i2 - i1))
        for j in range(i1, i2):
            col = perm[j]
            g = col // gs
            if not act_order and j % gs == 0:
                set_grids(g, W[:, j:j + gs])
            w = W[:, j]
            q = np.empty(N)
            for n in range(N):
                c = code(grids[g][n], kind, w[n])
                if follow:
                    c = follow.code(c, grids[g][n], kind, w[n], n, col)
                codes[n, col] = c
                q[n] = grids[g][n].d * c + grids[g][n].m
            e = (w - q) / U[j, j]
            E[:, j - i1] = e
            W[:, j + 1:i2] -= np.outer(e, U[j, j + 1:i2])
        W[:, i2:] -= E @ U[i1:i2, i2:]
    return codes, grids


def dequant(codes, grids, gs):
    N, K = codes.shape
    Q = np.empty((N, K))
    for k in range(K):
        for n in range(N):
            g = grids[k // gs][n]
            Q[n, k] = g.d * codes[n, k] + g.m
    return Q


def rel_error(W, Q, X):
    r = np.linalg.norm(W @ X.T)
    return np.linalg.norm((W - Q) @ X.T) / r if r > 0 else 0.0


def load(d):
    p = {}
    with open(d + "/params.txt") as f:
        for line in f:
            k, v = line.split()
            p[k] = v
    N, K, T = int(p["N"]), int(p["K"]), int(p["T"])
    G = (K + int(p["gs"]) - 1) // int(p["gs"])

    def arr(name, dt, shape):
        return np.fromfile(d + "/" + name, dtype=dt).reshape(shape)

    return p, {
        "W": arr("W.f32", "<f4", (N, K)), "X": arr("X.f32", "<f4", (T, K)), "H": arr("H.f32", "<f4", (K, K)),
        "codes": arr("codes.u8", "u1", (N, K)), "d": arr("d.f32", "<f4", (G, N)),
        "m": arr("m.f32", "<f4", (G, N)), "zero": arr("zero.i32", "<i4", (G, N)),
        "rel": float(np.fromfile(d + "/rel.f64", dtype="<f8")[0]),
    }


def check(d):
    p, a = load(d)
    gs, sym, kind = int(p["gs"]), int(p["sym"]), p["kind"]
    act, damp, rtn = int(p["act_order"]), float(p["damp"]), int(p["rtn"])
    W, X = a["W"].astype(np.float64), a["X"].astype(np.float64)
    N, K = W.shape
    # the Hessian hotcold accumulated, against 2/T X^T X in float64
    Href = 2.0 / X.shape[0] * (X.T @ X)
    herr = np.abs(a["H"] - Href).max() / max(np.abs(Href).max(), 1e-30)
    if herr > 1e-5:
        raise Mismatch("Hessian: max |H_hotcold - 2/T X^T X| = %.3g of max |H|" % herr)
    H = None if rtn else a["H"]
    follow = Follow(a["codes"], a["d"], a["m"], a["zero"])
    codes, grids = fasterquant(W, H, gs, sym, kind, act, damp, follow)
    Q = dequant(codes, grids, gs)
    Qhc = dequant(a["codes"].astype(np.int64), [[Grid(float(a["d"][g, n]), float(a["m"][g, n]), 0)
                                                  for n in range(N)] for g in range(len(grids))], gs)
    if not np.array_equal(Q, Qhc):
        raise Mismatch("dequantized weights differ")
    err = rel_error(W, Q, X)
    if abs(err - a["rel"]) > 1e-5 * max(err, 1e-30):
        raise Mismatch("layer error: hotcold %.9g, oracle %.9g" % (a["rel"], err))
    if follow.code_ties > MAX_TIES * N * K:
        raise Mismatch("%d near-tie codes followed (of %d)" % (follow.code_ties, N * K))
    alone = rel_error(W, dequant(*fasterquant(W, H, gs, sym, kind, act, damp), gs), X)
    rtn_err = rel_error(W, dequant(*fasterquant(W, None, gs, sym, kind, 0, damp), gs), X)
    print("codes, scales and zeros identical (%d x %d, %d near-tie codes and %d grids followed); "
          "Hessian max rel. diff %.2g; layer error hotcold %.6f, oracle alone %.6f, RTN %.6f"
          % (N, K, follow.code_ties, follow.grid_ties, herr, a["rel"], alone, rtn_err))


# ---------------------------------------------------------------- calibration
# A llama2.c legacy checkpoint run in numpy as llama2.c's run.c does (RMSNorm
# eps 1e-5, interleaved RoPE on the unpermuted q/k rows, grouped-query
# attention, SwiGLU), to recompute every layer's calibration inputs.

def load_llama2c(path):
    raw = np.fromfile(path, dtype="<f4")
    dim, hid, L, nh, nkv, vocab, seq = (int(v) for v in raw[:7].view("<i4"))
    hd, kvd, off = dim // nh, dim // nh * nkv, 7
    m = {"dim": dim, "hid": hid, "L": L, "nh": nh, "nkv": nkv, "hd": hd}

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        a = raw[off:off + n].reshape(shape).astype(np.float64)
        off += n
        return a

    m["emb"] = take(abs(vocab), dim)
    m["attn_norm"] = take(L, dim)
    for name, rows, cols in (("attn_q", dim, dim), ("attn_k", kvd, dim), ("attn_v", kvd, dim),
                             ("attn_output", dim, dim)):
        m[name] = list(take(L, rows, cols))
    m["ffn_norm"] = take(L, dim)
    m["ffn_gate"], m["ffn_down"], m["ffn_up"] = list(take(L, hid, dim)), list(take(L, dim, hid)), list(take(L, hid, dim))
    return m


def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w


def rope(x, nheads, hd):
    """x [C][nheads*hd]: pairs (2i, 2i+1) of each head rotated by pos * 10000^(-2i/hd)."""
    C = x.shape[0]
    x = x.reshape(C, nheads, hd // 2, 2)
    ang = np.arange(C)[:, None] * 10000.0 ** (-np.arange(0, hd, 2) / hd)[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0], x[..., 1]
    return np.stack([a * c - b * s, a * s + b * c], axis=-1).reshape(C, nheads * hd)


def attention(m, l, xn):
    """The attention result of one window (input of attn_output)."""
    C, hd, nh, nkv = xn.shape[0], m["hd"], m["nh"], m["nkv"]
    q = rope(xn @ m["attn_q"][l].T, nh, hd)
    k = rope(xn @ m["attn_k"][l].T, nkv, hd)
    v = xn @ m["attn_v"][l].T
    out = np.empty((C, nh * hd))
    mask = np.triu(np.full((C, C), -np.inf), 1)
    for h in range(nh):
        g = h // (nh // nkv)
        a = q[:, h * hd:(h + 1) * hd] @ k[:, g * hd:(g + 1) * hd].T / np.sqrt(hd) + mask
        a = np.exp(a - a.max(axis=1, keepdims=True))
        out[:, h * hd:(h + 1) * hd] = (a / a.sum(axis=1, keepdims=True)) @ v[:, g * hd:(g + 1) * hd]
    return out


def stage_inputs(m, l, s, xs):
    """Inputs of stage s of block l over every window xs [W][C][dim]."""
    out = []
    for x in xs:
        xn = rmsnorm(x, m["attn_norm"][l])
        if s == 0:
            out.append(xn)
            continue
        att = attention(m, l, xn)
        if s == 1:
            out.append(att)
            continue
        fn = rmsnorm(x + att @ m["attn_output"][l].T, m["ffn_norm"][l])
        if s == 2:
            out.append(fn)
            continue
        g = fn @ m["ffn_gate"][l].T
        out.append(g / (1 + np.exp(-g)) * (fn @ m["ffn_up"][l].T))
    return np.concatenate(out)


def block(m, l, x):
    att = attention(m, l, rmsnorm(x, m["attn_norm"][l]))
    x = x + att @ m["attn_output"][l].T
    fn = rmsnorm(x, m["ffn_norm"][l])
    g = fn @ m["ffn_gate"][l].T
    return x + (g / (1 + np.exp(-g)) * (fn @ m["ffn_up"][l].T)) @ m["ffn_down"][l].T


STAGES = (("attn_q", "attn_k", "attn_v"), ("attn_output",), ("ffn_gate", "ffn_up"), ("ffn_down",))


def calib(d):
    """Replays hotcold's calibration of a llama2.c model (see the C test)."""
    p = {}
    with open(d + "/params.txt") as f:
        for line in f:
            k, v = line.split(None, 1)
            p[k] = v.strip()
    m = load_llama2c(p["model"])
    gs, sym, damp, C, budget = int(p["gs"]), int(p["sym"]), float(p["damp"]), int(p["ctx"]), int(p["calib_tokens"])
    toks = np.fromfile(d + "/tokens.i32", dtype="<i4")
    windows = min(len(toks) // (C - 1), budget // C)   # BOS + C-1 text tokens each, in text order
    win = [np.concatenate([[int(p["bos"])], toks[w * (C - 1):(w + 1) * (C - 1)]]) for w in range(windows)]
    xs = [m["emb"][t] for t in win]
    names = open(d + "/names.txt").read().split()
    idx, ties, grid_ties = 0, 0, 0
    for l in range(m["L"]):
        for s, stage in enumerate(STAGES):
            X = stage_inputs(m, l, s, xs)
            H = 2.0 / X.shape[0] * (X.T @ X)
            for name in stage:
                full = "blk.%d.%s.weight" % (l, name)
                if names[idx] != full:
                    raise Mismatch("result %d: hotcold quantized %s, expected %s" % (idx, names[idx], full))
                W = m[name][l]
                N, K = W.shape
                G = (K + gs - 1) // gs
                hc = {k: np.fromfile("%s/%d.%s" % (d, idx, ext), dtype=dt) for k, ext, dt in
                      (("codes", "codes.u8", "u1"), ("d", "d.f32", "<f4"), ("m", "m.f32", "<f4"),
                       ("zero", "zero.i32", "<i4"))}
                follow = Follow(hc["codes"].reshape(N, K), hc["d"].reshape(G, N), hc["m"].reshape(G, N),
                                hc["zero"].reshape(G, N))
                try:
                    codes, grids = fasterquant(W, H, gs, sym, "native", 0, damp, follow)
                except Mismatch as e:
                    raise Mismatch("%s: %s" % (full, e))
                m[name][l] = dequant(codes, grids, gs)
                ties, grid_ties, idx = ties + follow.code_ties, grid_ties + follow.grid_ties, idx + 1
        xs = [block(m, l, x) for x in xs]
    if idx != len(names):
        raise Mismatch("hotcold quantized %d weights, expected %d" % (len(names), idx))
    print("%d weights over %d windows of %d: codes, scales and zeros identical (%d near-tie codes and %d grids "
          "followed)" % (idx, windows, C, ties, grid_ties))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "calib"):
        sys.exit("usage: gptq_ref.py check|calib DIR")
    try:
        (check if sys.argv[1] == "check" else calib)(sys.argv[2])
    except Mismatch as e:
        print("gptq_ref: " + str(e))
        sys.exit(1)


if __name__ == "__main__":
    main()
