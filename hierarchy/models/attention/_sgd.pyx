# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled steps of online SGD (docs/math.md §2; the paper's eqs. 7, 25, 395).

Compiled on demand by ``hierarchy.jit.cache.compile_pyx`` from
``hierarchy/models/attention/sgd_steppers.py``; not a public module. All arrays are
C-contiguous float64. One step is split in two calls around the loss derivative, which stays
in Python (``hierarchy.models.attention.losses``):

    forward(...)  ->  G[b, i, j, k]  (pre-activations of the minibatch)
    dG = loss.gradient(G)
    update(...)   ->  the model matrices, in place

Samples are passed as the standard normals ``Z`` (rows ``b*L + i``); the tokens are
``x_b = chol(C) z_b``. The Cholesky factor is applied to the small ``L × width`` blocks, never
to ``Z``, so the large products all read ``Z`` directly:

    X_b W = chol · (Z_b W),      Σ_b X_bᵀ H_b = Zᵀ · [cholᵀ H_b]_b.

The model matrices of all indices sit side by side in one array (tied ``[W_1 | W_2 | ...]``,
untied ``[U_1 V_1 | U_2 V_2 | ...]``, direct ``[S_1 | S_2 | ...]``), so the forward products
of every index are ONE matrix product; each trainable index then costs one more.
"""
from libc.math cimport sqrt
from scipy.linalg.cython_blas cimport dgemm


cdef inline void gemm(char ta, char tb, int m, int n, int k, double alpha,
                      const double* A, int lda, const double* B, int ldb,
                      double beta, double* C, int ldc) noexcept nogil:
    # Row-major C[m×n] = alpha·op(A)·op(B) + beta·C. BLAS is column-major and a row-major
    # matrix is its transpose in column-major, so Cᵀ = op(B)ᵀ op(A)ᵀ: swap the operands.
    dgemm(&tb, &ta, &n, &m, &k, &alpha, <double*>B, &ldb, <double*>A, &lda, &beta, C, &ldc)


cdef void apply_chol_rows(double[:, ::1] P, const double[:, ::1] chol, int L,
                          Py_ssize_t col0, Py_ssize_t ncol) noexcept nogil:
    """P_b ← chol · P_b for every sample block (rows b*L..b*L+L-1), columns col0..col0+ncol."""
    cdef Py_ssize_t nb = P.shape[0] // L, b, i, j, c
    cdef double acc
    for b in range(nb):
        for c in range(col0, col0 + ncol):
            # lower triangular: row i only reads rows j <= i, so go from the last row up
            for i in range(L - 1, -1, -1):
                acc = 0.0
                for j in range(i + 1):
                    acc = acc + chol[i, j] * P[b * L + j, c]
                P[b * L + i, c] = acc


cdef void apply_cholT_rows(double[:, ::1] H, const double[:, ::1] chol, int L,
                           Py_ssize_t col0, Py_ssize_t ncol) noexcept nogil:
    """H_b ← cholᵀ · H_b for every sample block: row i reads rows j >= i, so go top down."""
    cdef Py_ssize_t nb = H.shape[0] // L, b, i, j, c
    cdef double acc
    for b in range(nb):
        for c in range(col0, col0 + ncol):
            for i in range(L):
                acc = 0.0
                for j in range(i, L):
                    acc = acc + chol[j, i] * H[b * L + j, c]
                H[b * L + i, c] = acc


cdef double frobenius2(const double[:, ::1] A, Py_ssize_t col0, Py_ssize_t ncol) noexcept nogil:
    cdef Py_ssize_t r, c
    cdef double acc = 0.0
    for r in range(A.shape[0]):
        for c in range(col0, col0 + ncol):
            acc = acc + A[r, c] * A[r, c]
    return acc


cdef double trace_block(const double[:, ::1] A, Py_ssize_t col0) noexcept nogil:
    cdef Py_ssize_t r
    cdef double acc = 0.0
    for r in range(A.shape[0]):
        acc = acc + A[r, col0 + r]
    return acc


cdef double mean_contraction(const double[:, :, :, ::1] dG, const double[:, ::1] C,
                             Py_ssize_t k) noexcept nogil:
    """mean_b Σ_ij dG[b,i,j,k] C_ij."""
    cdef Py_ssize_t B = dG.shape[0], L = dG.shape[1], b, i, j
    cdef double acc = 0.0
    for b in range(B):
        for i in range(L):
            for j in range(L):
                acc = acc + dG[b, i, j, k] * C[i, j]
    return acc / B


cdef inline double row_dot(const double[:, ::1] P, Py_ssize_t r1, Py_ssize_t c1,
                           const double[:, ::1] Q, Py_ssize_t r2, Py_ssize_t c2,
                           Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t c
    cdef double acc = 0.0
    for c in range(n):
        acc = acc + P[r1, c1 + c] * Q[r2, c2 + c]
    return acc


def forward_products(const double[:, ::1] Z, const double[:, ::1] Wcat, double[:, ::1] P):
    """P = Z @ Wcat (one BLAS call for every index)."""
    cdef int m = Z.shape[0], dd = Z.shape[1], n = Wcat.shape[1]
    with nogil:
        gemm(b'N', b'N', m, n, dd, 1.0, &Z[0, 0], dd, &Wcat[0, 0], n, 0.0, &P[0, 0], n)


# ----------------------------------------------------------------------------- tied

def tied_forward(const double[:, ::1] Z, const double[:, ::1] Wcat, double[:, ::1] P,
                 const long[::1] offsets, const long[::1] widths,
                 const double[:, ::1] chol, const double[:, ::1] C, bint identity,
                 double[:, :, :, ::1] G):
    """G_bijk = (x_iᵀ W_k W_kᵀ x_j − C_ij ‖W_k‖²_F)/√d; leaves P = [X_b W_k]_b (chol applied)."""
    cdef Py_ssize_t K = offsets.shape[0], B = G.shape[0], L = G.shape[1]
    cdef Py_ssize_t k, b, i, j
    cdef double inv_sqrt_d = 1.0 / sqrt(<double>Z.shape[1]), tr
    forward_products(Z, Wcat, P)
    with nogil:
        if not identity:
            apply_chol_rows(P, chol, L, 0, P.shape[1])
        for k in range(K):
            tr = frobenius2(Wcat, offsets[k], widths[k])
            for b in range(B):
                for i in range(L):
                    for j in range(i, L):
                        G[b, i, j, k] = (row_dot(P, b * L + i, offsets[k], P, b * L + j,
                                                 offsets[k], widths[k]) - C[i, j] * tr) * inv_sqrt_d
                        G[b, j, i, k] = G[b, i, j, k]


def tied_update(const double[:, ::1] Z, double[:, ::1] Wcat, const double[:, ::1] P,
                const long[::1] offsets, const long[::1] widths,
                const long[::1] trainable_positions,
                const double[:, ::1] chol, const double[:, ::1] C, bint identity,
                const double[:, :, :, ::1] dG, double[:, ::1] H,
                double lr, double weight_decay):
    """W_k ← s_k W_k − (lr/(B√d)) Zᵀ [cholᵀ (g_b+g_bᵀ) X_b W_k]_b  for k in trainable_positions.

    ``trainable_positions`` are 0-based (``Problem.trainable`` minus one).

    ``s_k = 1 − lr γ/d + (2 lr/√d) mean_b (g_b : C)`` carries the centering term of
    ∇_{W_k} G and the weight decay.
    """
    cdef Py_ssize_t B = dG.shape[0], L = dG.shape[1], D = Wcat.shape[1]
    cdef Py_ssize_t t, k, b, i, j, c, off, w
    cdef int d = Z.shape[1], BL = Z.shape[0]
    cdef double sq = sqrt(<double>d), scale, acc
    for t in range(trainable_positions.shape[0]):
        k = trainable_positions[t]
        off = offsets[k]
        w = widths[k]
        with nogil:
            for b in range(B):
                for i in range(L):
                    for c in range(w):
                        acc = 0.0
                        for j in range(L):
                            acc = acc + (dG[b, i, j, k] + dG[b, j, i, k]) * P[b * L + j, off + c]
                        H[b * L + i, c] = acc
            if not identity:
                apply_cholT_rows(H, chol, L, 0, w)
            scale = 1.0 - lr * weight_decay / d + 2.0 * lr * mean_contraction(dG, C, k) / sq
            gemm(b'T', b'N', d, <int>w, BL, -lr / (B * sq), &Z[0, 0], d, &H[0, 0], <int>H.shape[1],
                 scale, &Wcat[0, off], <int>D)


# ----------------------------------------------------------------------------- untied

def untied_forward(const double[:, ::1] Z, const double[:, ::1] UVcat, double[:, ::1] P,
                   const long[::1] offsets, const long[::1] widths,
                   const double[:, ::1] chol, bint identity, double[:, :, :, ::1] G):
    """G_bijk = x_iᵀ U_k V_kᵀ x_j/√d (not centered); leaves P = [X_b U_k, X_b V_k]_b."""
    cdef Py_ssize_t K = offsets.shape[0], B = G.shape[0], L = G.shape[1]
    cdef Py_ssize_t k, b, i, j, off, w
    cdef double inv_sqrt_d = 1.0 / sqrt(<double>Z.shape[1])
    forward_products(Z, UVcat, P)
    with nogil:
        if not identity:
            apply_chol_rows(P, chol, L, 0, P.shape[1])
        for k in range(K):
            off = offsets[k]
            w = widths[k]
            for b in range(B):
                for i in range(L):
                    for j in range(L):
                        G[b, i, j, k] = row_dot(P, b * L + i, off, P, b * L + j, off + w, w) * inv_sqrt_d


def untied_update(const double[:, ::1] Z, double[:, ::1] UVcat, const double[:, ::1] P,
                  const long[::1] offsets, const long[::1] widths,
                  const long[::1] trainable_positions,
                  const double[:, ::1] chol, bint identity,
                  const double[:, :, :, ::1] dG, double[:, ::1] H,
                  double lr, double weight_decay):
    """[U_k V_k] ← (1 − lr γ/d)[U_k V_k] − (lr/(B√d)) Zᵀ [cholᵀ g_b X_b V_k, cholᵀ g_bᵀ X_b U_k]_b."""
    cdef Py_ssize_t B = dG.shape[0], L = dG.shape[1], D = UVcat.shape[1]
    cdef Py_ssize_t t, k, b, i, j, c, off, w
    cdef int d = Z.shape[1], BL = Z.shape[0]
    cdef double sq = sqrt(<double>d), accu, accv
    for t in range(trainable_positions.shape[0]):
        k = trainable_positions[t]
        off = offsets[k]
        w = widths[k]
        with nogil:
            for b in range(B):
                for i in range(L):
                    for c in range(w):
                        accu = 0.0
                        accv = 0.0
                        for j in range(L):
                            accu = accu + dG[b, i, j, k] * P[b * L + j, off + w + c]
                            accv = accv + dG[b, j, i, k] * P[b * L + j, off + c]
                        H[b * L + i, c] = accu
                        H[b * L + i, w + c] = accv
            if not identity:
                apply_cholT_rows(H, chol, L, 0, 2 * w)
            gemm(b'T', b'N', d, <int>(2 * w), BL, -lr / (B * sq), &Z[0, 0], d, &H[0, 0],
                 <int>H.shape[1], 1.0 - lr * weight_decay / d, &UVcat[0, off], <int>D)


# ----------------------------------------------------------------------------- direct

def direct_forward(const double[:, ::1] Z, const double[:, ::1] Scat, double[:, ::1] P,
                   const double[:, ::1] chol, const double[:, ::1] C, bint identity,
                   double[:, ::1] raw, double[:, :, :, ::1] G):
    """G_bijk = (x_iᵀ S_k x_j − C_ij Tr S_k)/√d; leaves P = [Z_b S_k]_b (no chol)."""
    cdef Py_ssize_t K = G.shape[3], B = G.shape[0], L = G.shape[1], d = Z.shape[1]
    cdef Py_ssize_t k, b, i, j, a, e
    cdef double inv_sqrt_d = 1.0 / sqrt(<double>d), tr, acc
    forward_products(Z, Scat, P)
    with nogil:
        for k in range(K):
            tr = trace_block(Scat, k * d)
            for b in range(B):
                # raw = Z_b S_k Z_bᵀ (L × L), then chol · raw · cholᵀ
                for i in range(L):
                    for j in range(L):
                        raw[i, j] = row_dot(P, b * L + i, k * d, Z, b * L + j, 0, d)
                for i in range(L):
                    for j in range(L):
                        if identity:
                            acc = raw[i, j]
                        else:
                            acc = 0.0
                            for a in range(i + 1):
                                for e in range(j + 1):
                                    acc = acc + chol[i, a] * raw[a, e] * chol[j, e]
                        G[b, i, j, k] = (acc - C[i, j] * tr) * inv_sqrt_d


def direct_update(const double[:, ::1] Z, double[:, ::1] Scat,
                  const long[::1] trainable_positions,
                  const double[:, ::1] chol, const double[:, ::1] C, bint identity,
                  const double[:, :, :, ::1] dG, double[:, ::1] H, double[:, ::1] small,
                  double lr, double weight_decay):
    """S_k ← (1 − lr γ/d) S_k + (lr/√d) mean(g:C) I − (lr/(B√d)) Zᵀ [(cholᵀ g_b chol) Z_b]_b."""
    cdef Py_ssize_t B = dG.shape[0], L = dG.shape[1], D = Scat.shape[1]
    cdef Py_ssize_t t, k, b, i, j, a, e, c
    cdef int d = Z.shape[1], BL = Z.shape[0]
    cdef double sq = sqrt(<double>d), acc, shift
    for t in range(trainable_positions.shape[0]):
        k = trainable_positions[t]
        with nogil:
            for b in range(B):
                for i in range(L):
                    for j in range(L):
                        if identity:
                            small[i, j] = dG[b, i, j, k]
                        else:
                            acc = 0.0
                            for a in range(i, L):
                                for e in range(j, L):
                                    acc = acc + chol[a, i] * dG[b, a, e, k] * chol[e, j]
                            small[i, j] = acc
                for i in range(L):
                    for c in range(d):
                        acc = 0.0
                        for j in range(L):
                            acc = acc + small[i, j] * Z[b * L + j, c]
                        H[b * L + i, c] = acc
            shift = lr * mean_contraction(dG, C, k) / sq
            gemm(b'T', b'N', d, d, BL, -lr / (B * sq), &Z[0, 0], d, &H[0, 0], d,
                 1.0 - lr * weight_decay / d, &Scat[0, k * d], <int>D)
            for i in range(d):
                Scat[i, k * d + i] = Scat[i, k * d + i] + shift


# ----------------------------------------------------------------------------- benchmark

def step_products(const double[:, ::1] Z, double[:, ::1] Wcat, double[:, ::1] P,
                  const long[::1] col0, const long[::1] ncol, double[:, ::1] H):
    """Only the matrix products of one step (the raw-BLAS floor of tools/bench_sgd.py):
    P = Z @ Wcat, then Wcat[:, col0:col0+ncol] += Zᵀ H[:, :ncol] for every listed block."""
    cdef Py_ssize_t t
    cdef int d = Z.shape[1], BL = Z.shape[0], D = Wcat.shape[1]
    forward_products(Z, Wcat, P)
    for t in range(col0.shape[0]):
        with nogil:
            gemm(b'T', b'N', d, <int>ncol[t], BL, 1e-30, &Z[0, 0], d, &H[0, 0], <int>H.shape[1],
                 1.0, &Wcat[0, col0[t]], D)
