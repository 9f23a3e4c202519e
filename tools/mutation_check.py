"""Mutation check: do the tests fail when the mathematics is made slightly wrong?

Each entry of :data:`MUTATIONS` is one small plausible error (a factor 2, a sign, a dropped
term, a swapped index) in the package source: the file(s), the exact original snippet, its
replacement, the tests that cover that formula, and what the error means. The runner

1. copies the checkout (package, templates, tests, tools) to a temporary folder, so the
   working tree is never touched; the templates are placed inside the copied package, so
   ``hierarchy.templates`` resolves to the copy too (checked before anything runs);
2. runs every selection once on the unmodified copy (a test that fails without a mutation
   cannot vouch for catching one), then
3. applies each mutation alone to the copy, runs its selection with ``PYTHONPATH`` at the
   copy and ``HIERARCHY_GENERATED`` at a temporary kernel cache (compiled kernels of mutants
   never reach the real cache; the cache's alias index is emptied before every run, so a
   mutant's kernel is always rebuilt from its own source), and restores the file.

It prints ``caught by TEST`` (the first failing test) or ``NOT caught`` per mutation, and
ends with ``N of M caught``. An original snippet that is missing from its file, or present
more than once, is an ``ERROR`` (the list drifted from the source), never skipped. Exit
status: 0 when every mutation is caught, 1 otherwise, 2 for bad arguments.

This is a release check, not part of the default tests (it runs for a while on two cores)::

    python tools/mutation_check.py            # every mutation
    python tools/mutation_check.py --list     # the mutations only
    python tools/mutation_check.py -k xor     # those whose name contains "xor"
    python tools/mutation_check.py -k net-kernel,hermite   # containing either text
"""

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: what the copy holds (the rest of the checkout is not needed by the tests)
COPIED = ("hierarchy", "templates", "tests", "tools", "docs", "README.md", "pyproject.toml",
          "setup.py")
IGNORED = shutil.ignore_patterns("__pycache__", "*.so", "*.c", "build", ".hypothesis",
                                 ".pytest_cache", "*.egg-info", "figures", "generated")
#: seconds one selection may run before it counts as not caught
TIMEOUT_S = 900


@dataclasses.dataclass(frozen=True)
class Edit:
    """Replace ``original`` (exactly once in ``path``, relative to the checkout) by ``new``."""

    path: str
    original: str
    new: str


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One plausible error: its edits, the pytest arguments that cover it, its meaning."""

    name: str
    edits: tuple
    tests: tuple
    description: str


def mutation(name, path, original, new, tests, description):
    """A :class:`Mutation` with one edit."""
    return Mutation(name, (Edit(path, original, new),), tuple(tests), description)


HOLES = "tests/test_mutation_holes.py"
PATHS = "tests/test_compiled_paths.py"
ESTIMATES = "tests/test_error_estimates.py"
CLASSES = "tests/test_fixed_point_classes.py"
NOISE = "tests/test_noise_moments.py"
DIMENSIONS = "tests/test_dimension_statistics.py"
GMM = "hierarchy/models/gmm"
MC = "hierarchy/models/multiclass"
ATT = "hierarchy/models/attention"
PCA = "hierarchy/models/summary"

MUTATIONS = (
    # ---- the seven mutations of issue 23 that passed the whole suite
    Mutation("gmm-corrector-halved-both-engines",
             (Edit(f"{GMM}/field.py", "g_r = model.step * v[:, :, None]",
                   "g_r = 0.5 * model.step * v[:, :, None]"),
              Edit("templates/gmm_field.pyx.j2", "out[row] = step * v[i] * v[j]",
                   "out[row] = 0.5 * step * v[i] * v[j]")),
             (f"{HOLES}::test_sgd_matches_the_ode_within_standard_errors_where_the_corrector"
              "_is_large",),
             "the Gaussian-mixture corrector c_delta v v B / lambda halved in numpy and C"),
    mutation("gmm-gaussian-start-R-lambda", f"{GMM}/starts.py",
             "np.eye(k) / scale", "np.eye(k) * scale",
             [f"{HOLES}::test_gaussian_start_law_is_the_limit_of_the_sgd_start"],
             "finite-lambda binary Gaussian start R(0) = lambda I instead of I / lambda"),
    mutation("gmm-filippov-repelling-leaves-plus", f"{GMM}/field.py",
             "np.where((phi_p > FLAT) & (phi_m >= -FLAT), phi_p,", "np.where(phi_p > FLAT, phi_p,",
             [f"{HOLES}::test_filippov_repelling_zero_stays_an_unstable_equilibrium"],
             "Filippov rule: a repelling zero (phi+ > 0 > phi-) leaves to the + side"),
    mutation("gmm-kink-jacobian-plus-side", f"{GMM}/stability.py",
             "steps[kinks] = np.asarray(sides) * H", "steps[kinks] = H",
             [f"{HOLES}::test_xor_origin_spectrum_is_the_closed_form_in_every_orthant"],
             "one-sided Jacobian at a kink always steps to the + side"),
    mutation("multiclass-jacobian-doubled", f"{MC}/fixed_points.py",
             "field(model, minus, points)) / (2 * H)", "field(model, minus, points)) / H",
             [f"{HOLES}::test_multiclass_low_noise_jacobian_has_the_exact_r_block"],
             "multiclass fixed-point Jacobian twice too large"),
    mutation("extrapolation-no-runner-up-check", "hierarchy/core/extrapolation.py",
             "return estimate, np.fmax(error, np.where(np.isfinite(check), check, 0.0))",
             "return estimate, error",
             ["tests/test_extrapolation.py::test_best_error_bounds_the_true_error_on_the_exact"
              "_case_at_the_documented_factors"],
             "'best' keeps the smallest error estimate without the runner-up cross-check"),
    mutation("continuation-wishart-1-over-d2", f"{ATT}/continuation.py",
             "+ (3 * r + 3) / d + 4 / d ** 2)", "+ (3 * r + 3) / d)",
             [f"{HOLES}::test_wishart_moments_at_d_1_are_chi_square_moments"],
             "the 4/d^2 term of E tr S^3 / d dropped"),
    # ---- the three caught only narrowly
    mutation("bulk-edge-weight-power", "hierarchy/spectra/bulk.py",
             "np.sum((w / (1.0 + w * m)) ** 2)", "np.sum(w / (1.0 + w * m) ** 2)",
             [f"{HOLES}::test_bulk_edge_is_homogeneous_of_degree_one_in_the_weights"],
             "bulk edge: w / (1 + w m)^2 for w^2 / (1 + w m)^2 (equal at w = 1)"),
    mutation("gmm-corrector-halved-numpy", f"{GMM}/field.py",
             "g_r = model.step * v[:, :, None]", "g_r = 0.5 * model.step * v[:, :, None]",
             [f"{HOLES}::test_numpy_corrector_is_the_sampled_second_moment_of_the_error"],
             "the numpy corrector alone halved"),
    mutation("gmm-sqrt-psd-not-symmetric", f"{GMM}/functionals.py",
             '"bij,bj,bkj->bik"', '"bij,bj,bjk->bik"',
             [f"{HOLES}::test_symmetric_square_root_at_widths_above_two"],
             "V D V instead of V D V^T in the symmetric square root (equal for 2x2 eigh)"),
    # ---- gmm-binary and gmm-xor
    mutation("gmm-drift-R-ridge", f"{GMM}/field.py",
             "f_r = va + np.swapaxes(va, 1, 2) + 2 * a * r", "f_r = va + np.swapaxes(va, 1, 2) + a * r",
             ["tests/test_gmm_binary.py::test_low_noise_field_is_the_printed_orthant_form",
              f"{HOLES}::test_binary_origin_spectrum_is_the_closed_form"],
             "weight decay of R_perp: alpha R for 2 alpha R"),
    mutation("gmm-drift-v-aperp-dropped", f"{GMM}/field.py",
             '+ np.einsum("bii->bi", fun.Aperp) + a * v', "+ a * v",
             [f"{HOLES}::test_sgd_matches_the_ode_within_standard_errors_where_the_corrector"
              "_is_large"],
             "the Aperp_ii term of f_v dropped (zero at lambda = inf)"),
    mutation("gmm-onestep-noise-count", f"{GMM}/onestep.py",
             "(dimension - s - k) / model.snr", "(dimension - s) / model.snr",
             ["tests/test_gmm_binary.py::test_one_step_identity_at_finite_dimension"],
             "chi^2 degrees of freedom N - S - K off by K in the exact one-step identity"),
    mutation("gmm-noise-scale", f"{GMM}/functionals.py",
             "scale = 1.0 / math.sqrt(snr)", "scale = 1.0 / snr",
             ["tests/test_gmm_binary.py::test_one_step_identity_at_finite_dimension"],
             "noise of the reduced law 1/lambda instead of 1/sqrt(lambda) in std"),
    mutation("xor-sliding-sign", f"{GMM}/field.py",
             "mask[rows] = zero & (phi_p < -FLAT) & (phi_m > FLAT)",
             "mask[rows] = zero & (phi_p > FLAT) & (phi_m < -FLAT)",
             ["tests/test_gmm_xor.py::test_sliding_mode_is_frozen_at_zero"],
             "the sliding mask marks repelling zeros instead of attracting ones"),
    mutation("xor-count-law-surjections", f"{GMM}/basins.py",
             "(j - i) ** n for i in range(j + 1)", "(j - i) ** (n - 1) for i in range(j + 1)",
             ["tests/test_gmm_xor.py::test_overparametrization_formula_matches_the_law"],
             "number of surjections of K neurons onto j classes: (j - i)^(K - 1)"),
    mutation("xor-optimal-probability", f"{GMM}/basins.py",
             "6 * 0.5**k", "6 * 0.5**(k + 1)",
             ["tests/test_gmm_xor.py::test_overparametrization_formula_matches_the_law"],
             "inclusion-exclusion term 6 (1/2)^K of P_K halved"),
    mutation("gmm-radial-variance", f"{GMM}/diffusion.py",
             '"radial_variance": float(w @ sigma @ w / (2 * kappa))',
             '"radial_variance": float(w @ sigma @ w / kappa)',
             ["tests/test_gmm_binary.py::test_ring_diffusion_rank_one_and_radial_variance"],
             "stationary OU variance w.Sigma.w / kappa for / (2 kappa)"),
    mutation("gmm-diffusion-uncentred", f"{GMM}/diffusion.py",
             "centred = rows - mean", "centred = rows",
             [f"{HOLES}::test_ring_diffusion_is_the_covariance_of_the_cluster_gradients_off"
              "_the_ring"],
             "the diffusion as the second moment, not the covariance, of the gradients"),
    mutation("gmm-network-hessian-weight", f"{GMM}/network.py",
             "curvature = y_hat * (1.0 - y_hat)", "curvature = y_hat * (1.0 - y_hat) ** 2",
             ["tests/test_spectra_operators.py::test_xor_per_sample_derivatives_match_finite"
              "_differences"],
             "Hessian weight sigma (1 - sigma)^2 for sigma' = sigma (1 - sigma)"),
    mutation("gmm-network-first-layer-gradient", f"{GMM}/network.py",
             "(e[..., None] * v) * active, e", "(e[..., None] * np.abs(v)) * active, e",
             [f"{HOLES}::test_sgd_matches_the_ode_within_standard_errors_where_the_corrector"
              "_is_large"],
             "first-layer gradient with |v_i| for v_i (SGD only)"),
    # ---- gmm-multiclass
    mutation("multiclass-loss-G-weight", f"{MC}/loss.py",
             'out[("G", f"x{c + 1}")] = r[..., c] ** 2',
             'out[("G", f"x{c + 1}")] = np.abs(r[..., c])',
             ["tests/test_spectra_operators.py::test_multiclass_per_sample_derivatives_match"
              "_finite_differences"],
             "G-block weight |pi - y| for (pi - y)^2"),
    mutation("multiclass-R-ridge", f"{MC}/field.py",
             "dr = -2.0 * beta * r", "dr = -beta * r",
             ["tests/test_gmm_multiclass.py::test_low_noise_flow_targets"],
             "the printed -beta R_perp instead of the derived -2 beta R_perp"),
    mutation("multiclass-corrector-halved", f"{MC}/field.py",
             "+ model.step / lam * corrector", "+ 0.5 * model.step / lam * corrector",
             ["tests/test_gmm_multiclass.py::test_field_matches_real_space_sampling"],
             "the multiclass corrector (c_delta / lambda) C halved"),
    mutation("multiclass-m-noise-sign", f"{MC}/field.py",
             "dm -= (p_bar[:, None] * m - s_bar @ m) / lam",
             "dm += (p_bar[:, None] * m - s_bar @ m) / lam",
             ["tests/test_gmm_multiclass.py::test_field_matches_real_space_sampling"],
             "sign of the 1/lambda integration-by-parts term of m'"),
    mutation("multiclass-logit-noise-scale", f"{MC}/field.py",
             "normal_points(model.classes, points).T / math.sqrt(model.snr)",
             "normal_points(model.classes, points).T / model.snr",
             ["tests/test_gmm_multiclass.py::test_field_matches_real_space_sampling"],
             "logit noise with covariance Gram / lambda^2 instead of Gram / lambda"),
    mutation("multiclass-closed-form-root", f"{MC}/fixed_points.py",
             "return beta * m * tail + beta * m * math.exp(m) - p * tail",
             "return beta * m * tail + beta * m * math.exp(m) - 2 * p * tail",
             ["tests/test_gmm_multiclass.py::test_closed_form_fixed_point"],
             "the closed-form fixed-point equation with 2p for p"),
    mutation("multiclass-gaussian-start-R", f"{MC}/starts.py",
             "return pack(np.zeros((1, k, k)), np.eye(k)[None])[:, 0]",
             "return pack(np.zeros((1, k, k)), 0.5 * np.eye(k)[None])[:, 0]",
             [f"{HOLES}::test_multiclass_gaussian_start_is_the_limit_of_the_sgd_start"],
             "the multiclass Gaussian start with R_perp(0) = I/2"),
    # ---- spiked PCA (summary statistics, sympy engine)
    mutation("pca-second-order-half", f"{PCA}/engine.py",
             "second = tuple(sp.expand(noise.pair(h) / 2) for h in hessians)",
             "second = tuple(sp.expand(noise.pair(h)) for h in hessians)",
             ["tests/test_summary_pca.py::test_drift_corrector_diffusion_match_contract"],
             "the 1/2 of L u = (1/2) <V, grad^2 u> dropped"),
    mutation("pca-ridge-half", f"{PCA}/engine.py",
             "return loss.population + ridge / 2 * q, loss.noise_kernel",
             "return loss.population + ridge * q, loss.noise_kernel",
             ["tests/test_summary_pca.py::test_ballistic_ode_with_step_and_ridge_settles_on_the"
              "_equator"],
             "ridge alpha |x|^2 instead of (alpha / 2) |x|^2"),
    # ---- attention-indexed family
    mutation("attention-tied-weight-decay", f"{ATT}/rules.py",
             'dW[k] = -drive * W[k] - _coef("gamma") / 4 * W[k]',
             'dW[k] = -drive * W[k] - _coef("gamma") / 2 * W[k]',
             ["tests/test_rules.py::test_tied_rule_is_the_symmetric_product_with_a_quarter_decay"],
             "weight decay gamma/2 for gamma/4 in the tied flow of W"),
    mutation("attention-riccati-denominator", f"{ATT}/exact_limit.py",
             "return lam0 * np.exp(at) / (1.0 + b * lam0 * growth)",
             "return lam0 * np.exp(at) / (1.0 + 0.5 * b * lam0 * growth)",
             ["tests/test_exact_limit.py::test_riccati_closed_form_solves_the_ode"],
             "Riccati closed form lambda(t) with b/2"),
    mutation("attention-free-poisson-rate", f"{ATT}/limit_moments.py",
             "narayana(n, j) * c ** j for j", "narayana(n, j) * c ** (j - 1) for j",
             ["tests/test_limit_moments.py::test_narayana_triangle_and_polynomials"],
             "free Poisson moment with c^(j-1) (equal at c = 1)"),
    mutation("attention-hermite-weights", f"{ATT}/potential.py",
             "w = w / np.sqrt(2 * np.pi)", "w = w / np.sqrt(np.pi)",
             ["tests/test_potential.py::test_rules_integrate_gaussian_moments"],
             "Gauss-Hermite weights normalised for exp(-x^2) instead of N(0, 1)"),
    # ---- long horizons: continuation and extrapolation
    mutation("continuation-wishart-1-over-d", f"{ATT}/continuation.py",
             "+ (3 * r + 3) / d + 4 / d ** 2)", "+ (3 * r + 2) / d + 4 / d ** 2)",
             [f"{HOLES}::test_wishart_moments_at_d_1_are_chi_square_moments"],
             "the 1/d term of E tr S^3 / d: 3r + 2 for 3r + 3"),
    mutation("continuation-fit-weights", f"{ATT}/continuation.py",
             "w = 1.0 / se ** 2", "w = 1.0 / se",
             ["tests/test_continuation.py::test_extrapolation_error_is_two_standard_errors_of_the"
              "_intercept_for_two_dims"],
             "least-squares weights 1/se instead of 1/se^2 in the 1/d' fit"),
    mutation("extrapolation-no-tail-factor", "hierarchy/core/extrapolation.py",
             "spread = step * np.where(ratio > 0.5, ratio / (1.0 - ratio), 1.0)",
             "spread = step",
             ["tests/test_extrapolation.py::test_levin_sums_a_logarithmically_convergent_series"],
             "the tail factor r/(1 - r) of slowly converging columns dropped"),
    mutation("extrapolation-no-column-below", "hierarchy/core/extrapolation.py",
             "spread = np.maximum(spread, np.abs(newest - below[-1]))", "spread = spread",
             ["tests/test_extrapolation.py::test_a_column_settled_away_from_the_one_below_is"
              "_not_trusted"],
             "the distance to the column below left out of the error"),
    mutation("extrapolation-no-input-sensitivity", "hierarchy/core/extrapolation.py",
             "error = np.fmax(error, np.where(np.isfinite(sensitivity), sensitivity, np.inf))",
             "error = error",
             ["tests/test_extrapolation.py::test_levin_error_covers_input_noise_through_the"
              "_perturbed_table"],
             "the response to the inputs' own error left out of the error"),
    # (a sign or a factor on every 1/difference of the epsilon recurrence is an equivalent
    # mutant: it scales the odd, auxiliary columns only)
    mutation("extrapolation-wynn-index", "hierarchy/core/extrapolation.py",
             "nxt = older[1:current.shape[0]] + 1.0 / (current[1:] - current[:-1])",
             "nxt = older[:current.shape[0] - 1] + 1.0 / (current[1:] - current[:-1])",
             ["tests/test_extrapolation.py::test_divergent_geometric_series_is_summed"],
             "epsilon recurrence with eps_{k-1}^(n) for eps_{k-1}^(n+1)"),
    # ---- spectra
    mutation("spectra-multiclass-shift", "hierarchy/spectra/population_multiclass.py",
             "scale = 0.0 if np.isinf(snr) else 1.0 / snr",
             "scale = 0.0 if np.isinf(snr) else 1.0 / np.sqrt(snr)",
             ["tests/test_spectra_population.py::test_contract_values_snr_10_fixed_point"],
             "identity part of a class block (1/sqrt(lambda)) E[w] for (1/lambda) E[w]"),
    mutation("spectra-xor-second-layer", "hierarchy/spectra/population_xor.py",
             "(probabilities[:, None] / w.shape[1])", "(probabilities[:, None] / (2 * w.shape[1]))",
             ["tests/test_spectra_population.py::test_xor_reduction_matches_brute_force"],
             "the v block of the XOR population halved"),
    # ---- issue 33: compiled paths against their references (network kernel, attention SGD)
    mutation("net-kernel-relu-dx-no-guard", "templates/network_field.pyx.j2",
             "        if C[f[0] * D + f[0]] <= 0.0:\n            return 0.0\n"
             "        return C[f[0] * D + f[1]] / sqrt(2.0 * M_PI * C[f[0] * D + f[0]])",
             "        return C[f[0] * D + f[1]] / sqrt(2.0 * M_PI * C[f[0] * D + f[0]])",
             [f"{PATHS}::test_compiled_network_kernel_equals_the_numpy_table"],
             "compiled E[relu'(u) v] without its C_uu = 0 guard (NaN at Q = 0)"),
    mutation("net-kernel-relu-dxg-angle-factor", "templates/network_field.pyx.j2",
             "return a + C[f[1] * D + f[2]] * (M_PI - t) / (2.0 * M_PI)",
             "return a + C[f[1] * D + f[2]] * (M_PI - t) / M_PI",
             [f"{PATHS}::test_compiled_network_kernel_equals_the_numpy_table"],
             "compiled relu E[g'(u) v g(w)]: (pi - t)/pi for (pi - t)/(2 pi)"),
    mutation("net-kernel-erf-i3-no-one", "templates/network_field.pyx.j2",
             "a = 1.0 + C[f[0] * D + f[0]]", "a = C[f[0] * D + f[0]]",
             [f"{PATHS}::test_compiled_network_kernel_equals_the_numpy_table"],
             "compiled erf I3 with C_uu for 1 + C_uu"),
    mutation("net-kernel-erf-i4-sign", "templates/network_field.pyx.j2",
             "+ c12 * c13 * c24 + c12 * c14 * c23", "- c12 * c13 * c24 + c12 * c14 * c23",
             [f"{PATHS}::test_compiled_network_kernel_equals_the_numpy_table"],
             "compiled erf I4: sign of the c12 c13 c24 term of Lambda0"),
    mutation("net-kernel-relu-g-factor", "templates/network_field.pyx.j2",
             "return sqrt(C[f[0] * D + f[0]] / (2.0 * M_PI))",
             "return sqrt(C[f[0] * D + f[0]] / M_PI)",
             [f"{PATHS}::test_compiled_network_kernel_equals_the_numpy_table"],
             "compiled E[relu(u)] = sqrt(C_uu / pi) for sqrt(C_uu / (2 pi)) (a linear loss term)"),
    mutation("net-kernel-wick-pair-index", "templates/network_field.pyx.j2",
             "term = term * C[f[pairs[2 * p]] * D + f[pairs[2 * p + 1]]]",
             "term = term * C[f[pairs[2 * p]] * D + f[pairs[2 * p]]]",
             [f"{PATHS}::test_compiled_network_kernel_equals_the_numpy_table"],
             "compiled Wick pair (a, b) read as (a, a)"),
    mutation("net-kernel-first-v-skipped", "templates/network_field.pyx.j2",
             "if v_index[r * V + j] >= 0:", "if v_index[r * V + j] > 0:",
             [f"{PATHS}::test_compiled_network_kernel_equals_the_numpy_table"],
             "compiled row weight skips the trained v_1 (off by one)"),
    mutation("attention-direct-shift-one-percent", f"{ATT}/_sgd.pyx",
             "shift = lr * mean_contraction(dG, C, k) / sq",
             "shift = 1.01 * lr * mean_contraction(dG, C, k) / sq",
             [f"{PATHS}::test_compiled_sgd_step_equals_the_numpy_step"],
             "compiled direct step: the trace shift 1 % too large"),
    mutation("attention-direct-identity-transposed", f"{ATT}/_sgd.pyx",
             "small[i, j] = dG[b, i, j, k]", "small[i, j] = dG[b, j, i, k]",
             [f"{PATHS}::test_compiled_sgd_step_equals_the_numpy_step"],
             "compiled direct step with C = I: g_b transposed (the identity branch only)"),
    mutation("attention-direct-forward-identity-transposed", f"{ATT}/_sgd.pyx",
             "acc = raw[i, j]", "acc = raw[j, i]",
             [f"{PATHS}::test_compiled_sgd_step_equals_the_numpy_step"],
             "compiled direct G with C = I: x_j S x_i for x_i S x_j"),
    mutation("attention-tied-centering-one-percent", f"{ATT}/_sgd.pyx",
             "+ 2.0 * lr * mean_contraction(dG, C, k) / sq",
             "+ 2.02 * lr * mean_contraction(dG, C, k) / sq",
             [f"{PATHS}::test_compiled_sgd_step_equals_the_numpy_step"],
             "compiled tied step: the centering term 1 % too large"),
    mutation("attention-untied-decay-halved", f"{ATT}/_sgd.pyx",
             "1.0 - lr * weight_decay / d, &UVcat[0, off]",
             "1.0 - lr * weight_decay / (2 * d), &UVcat[0, off]",
             [f"{PATHS}::test_compiled_sgd_step_equals_the_numpy_step"],
             "compiled untied step: weight decay halved"),
    # ---- issue 33: error estimates against the truth, both ways
    mutation("hermite-error-no-safety", "hierarchy/models/network/quadrature.py",
             "SAFETY = 1.25", "SAFETY = 1.0",
             [f"{ESTIMATES}::test_gauss_hermite_error_bounds_the_true_error_within_its_factor"],
             "Gauss-Hermite error |E_n - E_2n| alone (0.9x the true error: under-claims)"),
    mutation("hermite-error-tripled", "hierarchy/models/network/quadrature.py",
             "SAFETY = 1.25", "SAFETY = 3.75",
             [f"{ESTIMATES}::test_gauss_hermite_error_bounds_the_true_error_within_its_factor"],
             "Gauss-Hermite error over-claimed 3x"),
    mutation("hermite-error-wide-vouched", "hierarchy/models/network/quadrature.py",
             "return np.where(wide, np.inf, error)", "return error",
             [f"{ESTIMATES}::test_gauss_hermite_error_is_not_vouched_for_beyond_the_trusted"
              "_variances"],
             "the two-order Gauss-Hermite error vouched for at any width (under-claims there)"),
    mutation("qmc-error-per-replicate", "hierarchy/models/network/quadrature.py",
             "return reps.std(axis=0, ddof=1) / np.sqrt(len(reps))",
             "return reps.std(axis=0, ddof=1)",
             [f"{ESTIMATES}::test_qmc_standard_error_is_calibrated_against_relu_closed_forms"],
             "QMC error: the replicates' spread, not the standard error of their mean (2.8x)"),
    mutation("quadrature-field-error-third", "hierarchy/models/network/quadrature.py",
             "    return reps.std(axis=0, ddof=1) / np.sqrt(len(reps))",
             "    return reps.std(axis=0, ddof=1) / len(reps)",
             [f"{ESTIMATES}::test_quadrature_field_standard_error_is_calibrated_against_the_term"
              "_table"],
             "quadrature field's standard error divided by R for sqrt(R) (2.8x too small)"),
    mutation("sigma-error-tripled", "hierarchy/models/network/diffusion.py",
             "scale = 1.0 / np.sqrt(len(reps))", "scale = 3.0 / np.sqrt(len(reps))",
             [f"{ESTIMATES}::test_sigma_and_stationary_covariance_errors_are_calibrated_against"
              "_wick"],
             "fixed_points.json: sigma_error and the stationary covariance's error 3x"),
    mutation("stationary-covariance-error-third", "hierarchy/models/network/diffusion.py",
             '"stationary_covariance_error": (covariances.std(axis=0, ddof=1) * scale).tolist()',
             '"stationary_covariance_error": (covariances.std(axis=0, ddof=1) * scale / 3)'
             ".tolist()",
             [f"{ESTIMATES}::test_sigma_and_stationary_covariance_errors_are_calibrated_against"
              "_wick"],
             "fixed_points.json: the stationary covariance's error 3x too small"),
    mutation("extrapolation-tail-factor-tripled", "hierarchy/core/extrapolation.py",
             "spread = step * np.where(ratio > 0.5, ratio / (1.0 - ratio), 1.0)",
             "spread = step * np.where(ratio > 0.5, 3 * ratio / (1.0 - ratio), 1.0)",
             [f"{ESTIMATES}::test_epsilon_tail_factor_claims_the_error_of_a_logarithmic_sum"
              "_within_its_factor"],
             "the tail factor r/(1 - r) of slowly converging columns tripled (over-claims)"),
    mutation("extrapolation-tail-factor-linear", "hierarchy/core/extrapolation.py",
             "spread = step * np.where(ratio > 0.5, ratio / (1.0 - ratio), 1.0)",
             "spread = step * np.where(ratio > 0.5, ratio, 1.0)",
             [f"{ESTIMATES}::test_epsilon_tail_factor_claims_the_error_of_a_logarithmic_sum"
              "_within_its_factor"],
             "the tail factor r for r/(1 - r) (the geometric tail's sum dropped)"),
    # ---- issue 33: fixed-point stability
    mutation("fixed-points-no-neutral-band", "hierarchy/models/network/fixed_points.py",
             "NEUTRAL_FACTOR = 10.0", "NEUTRAL_FACTOR = 0.0",
             [f"{CLASSES}::test_a_jordan_block_split_by_the_jacobian_error_is_neutral"],
             "no neutral band beyond 1e-8: a Jordan block split by the Jacobian's error is "
             "called unstable"),
    mutation("fixed-points-band-without-jordan-term", "hierarchy/models/network/fixed_points.py",
             "(e + np.sqrt(e * float(np.linalg.norm(drift, 2))))", "(e + e)",
             [f"{CLASSES}::test_a_jordan_block_split_by_the_jacobian_error_is_neutral"],
             "the neutral band without the sqrt(e |J|) split of a defective zero eigenvalue"),
    mutation("fixed-points-neutral-below-zero-is-stable",
             "hierarchy/models/network/fixed_points.py",
             "    if top < -band:\n", "    if top < band and top < 0:\n",
             [f"{CLASSES}::test_the_rescaling_line_of_a_trained_linear_network_is_neutral"],
             "a zero eigenvalue computed as -1e-11 classified stable"),
    mutation("fixed-points-stable-flag", "hierarchy/models/network/fixed_points.py",
             '"stable": stability == "stable"', '"stable": stability != "unstable"',
             [f"{CLASSES}::test_stability_on_both_sides_of_the_learning_rate_threshold"],
             "the boolean stable true at a neutral point"),
    # ---- issue 33: label-noise moments of the term table
    mutation("network-noise-moments-truncated", "hierarchy/models/network/derivation.py",
             "np.arange(p - 1, 0, -2)", "np.arange(p - 1, 3, -2)",
             [f"{NOISE}::test_degree_five_loss_table_equals_exact_gauss_hermite"],
             "E xi^p without its factors 3 and 1: E xi^4 = 1, E xi^8 = 35 (fourth moment up)"),
    mutation("network-noise-variance-for-std", "hierarchy/models/network/derivation.py",
             'label = _sum(label, _atom("xi", 0, value=net.noise))',
             'label = _sum(label, _atom("xi", 0, value=net.noise ** 2))',
             [f"{NOISE}::test_degree_five_loss_table_equals_exact_gauss_hermite"],
             "label noise sigma^2 xi for sigma xi in the term table"),
    # ---- issue 33: the dimension study's statistics
    mutation("dimension-slope-stderr-dof", "hierarchy/study/dimension_analysis.py",
             "residual @ residual / (keep.sum() - 2)", "residual @ residual / (keep.sum() - 1)",
             [f"{DIMENSIONS}::test_fitted_slope_and_its_standard_error_are_linregress"],
             "slope standard error with n - 1 for n - 2 degrees of freedom"),
    mutation("dimension-slope-stderr-uncentred", "hierarchy/study/dimension_analysis.py",
             "(keep.sum() - 2) / np.sum((x - x.mean()) ** 2)", "(keep.sum() - 2) / np.sum(x ** 2)",
             [f"{DIMENSIONS}::test_fitted_slope_and_its_standard_error_are_linregress"],
             "slope standard error over sum x^2 for the centred sum of squares"),
    mutation("dimension-noise-over-runs", "hierarchy/study/dimension_analysis.py",
             "noise = spread / np.sqrt(runs)", "noise = spread / runs",
             [f"{DIMENSIONS}::test_noise_level_of_a_spread_growing_from_zero_is_the_standard"
              "_error_of_the_mean"],
             "noise level sd / runs for sd / sqrt(runs)"),
    mutation("net-moments-corrector-doubled", "hierarchy/models/network/moments.py",
             "sign(w * comp.variance * net.step ** 2)",
             "sign(2.0 * w * comp.variance * net.step ** 2)",
             ["tests/test_network_joint.py::test_joint_field_equals_the_term_table_on_mse_with_noise",
              "tests/test_network_joint.py::test_one_step_identity_fails_without_the_corrector"],
             "the joint and QMC fields' eta^2 corrector doubled (their shared assembly)"),
    mutation("gauss-levels-kink-mean-sign", "templates/_gauss_levels.c.j2",
             "t = (kinks[k] - m[f]) / L[f][j];", "t = (kinks[k] + m[f]) / L[f][j];",
             ["tests/test_network_joint.py::test_engine_within_its_stated_error_of_a_dense_reference"],
             "a kink placed at the reflected mean in the engines' shared level breakpoints"),
    mutation("gauss-levels-lag-unbounded", "templates/_gauss_levels.c.j2",
             "q = p - (lag < GAUSS_LOWER ? lag : GAUSS_LOWER);", "q = p - 3 * lag;",
             ["tests/test_network_engine.py::test_levels_of_very_different_widths_against_a"
              "_dense_reference"],
             "a narrow level's trapezoid rule lagging up to six orders (a few points)"),
    mutation("gauss-levels-clamped-at-order-0", "templates/_gauss_levels.c.j2",
             "pow(0.75, -q)", "pow(1.0, -q)",
             ["tests/test_network_engine.py::test_uneven_widths_are_met_honestly_at_loose"
              "_targets"],
             "a lagging level clamped at order 0's rule (flat across orders: its error hidden)"),
    mutation("engine-stops-at-order-1", "templates/network_engine.pyx.j2",
             "if (p > 1 && fabs(fine - previous) <= target) break;",
             "if (p > 0 && fabs(fine - previous) <= target) break;",
             ["tests/test_network_engine.py::test_uneven_widths_are_met_honestly_at_loose"
              "_targets"],
             "the engine trusting the difference of orders 0 and 1"),
    mutation("row-threads-pool-shared-across-fork", "hierarchy/core/row_threads.py",
             "    pid = os.getpid()", "    pid = 0",
             ["tests/test_row_threads.py::test_a_forked_child_makes_its_own_pool"],
             "the rows' thread pool kept across fork (the child's submissions wait forever)"),
    mutation("orthant4-no-refinement", "hierarchy/models/network/quadrature.py",
             "ORTHANT_REFINE = 1e-11", "ORTHANT_REFINE = 1.0",
             ["tests/test_network_engine.py::test_a_nearly_singular_four_step_row_goes_on_to_a"
              "_finer_orthant_rule"],
             "a four-step orthant row kept at 48 nodes however far 24 and 48 differ"),
    mutation("lift-error-change-alone", "hierarchy/models/network/closed_forms.py",
             "LIFT_ERROR_FACTOR = 1.0 / (2.0 ** (1.0 / 3.0) - 1.0)", "LIFT_ERROR_FACTOR = 1.0",
             ["tests/test_network_engine.py::test_a_rank_one_tie_is_within_its_lift_error"],
             "the lift off a tie stated as the change when it doubles, not its whole effect"),
    Mutation("joint-threads-share-one-context",
             (Edit("templates/network_joint.pyx.j2",
                   "joint_ctx *local = (joint_ctx *)malloc(sizeof(joint_ctx));",
                   "joint_ctx *local = (joint_ctx *)pass->c;"),
              Edit("templates/network_joint.pyx.j2", "        free(local);\n        return NULL;",
                   "        return NULL;")),
             ("tests/test_network_joint.py::test_threads_share_a_row_with_the_same_values_bit"
              "_for_bit",),
             "the threads of a row accumulate into one shared context (a race)"),
    mutation("joint-chunks-partial-dropped", "templates/network_joint.pyx.j2",
             "c->acc[o] += pass->partial[k * JOINT_NOUT + o];",
             "if (k != JOINT_CHUNKS / 2) c->acc[o] += pass->partial[k * JOINT_NOUT + o];",
             ["tests/test_network_joint.py::test_four_fields_against_monte_carlo"],
             "a middle chunk of the outermost level's nodes left out of the sum"),
    mutation("joint-no-turns", "hierarchy/models/network/joint.py",
             'turns = tuple(turn if f in sym["L"] else () for f in fields)',
             'turns = tuple(() for f in fields)',
             ["tests/test_network_joint.py::test_steep_saturating_student_is_split_at_its_turn"],
             "steep student fields on the trapezoid alone (no split at the activation's turn)"),
    mutation("engine-inner-turn-on-the-trapezoid", "templates/network_engine.pyx.j2",
             "engine_kink_start[id + 1] == engine_kink_start[id] || fabs(s) <= GAUSS_TURN_WIDTH",
             "1",
             ["tests/test_network_engine.py::test_steep_rows_meet_their_target_on_the_levels"
              "_split_at_the_turns"],
             "the innermost table of a steep turned field on the trapezoid (its turn ignored)"),
    mutation("engine-inner-turn-piece-weight", "templates/network_engine.pyx.j2",
             "                total += half * c->lw[i] * GAUSS_INV_SQRT_2PI * exp(-0.5 * xi * xi)\n"
             "                         * engine_h(id, m + s * xi);",
             "                total += c->lw[i] * GAUSS_INV_SQRT_2PI * exp(-0.5 * xi * xi)\n"
             "                         * engine_h(id, m + s * xi);",
             ["tests/test_network_engine.py::test_steep_rows_meet_their_target_on_the_levels"
              "_split_at_the_turns"],
             "the innermost table's pieces between turns weighted without their half-width"),
    mutation("gauss-levels-turn-split-when-gentle", "templates/_gauss_levels.c.j2",
             "if (turned != NULL && turned[key[f]] && fabs(L[f][j]) <= GAUSS_TURN_WIDTH) continue;",
             "if (0) continue;",
             ["tests/test_network_engine.py::test_gentle_rows_are_not_split"],
             "a turn splitting a level along which its field is gentle (slower, no more exact)"),
    mutation("gauss-levels-turn-width-tenfold", "templates/_gauss_levels.c.j2",
             "#define GAUSS_TURN_WIDTH 0.7", "#define GAUSS_TURN_WIDTH 7.0",
             ["tests/test_network_engine.py::test_steep_rows_meet_their_target_on_the_levels"
              "_split_at_the_turns"],
             "turns taken ten times wider than they are (a steep level left unsplit)"),
    mutation("field-no-activation-turns", "hierarchy/models/network/field.py",
             "for t in expectation_engine.turn_points(formula.expression)}))",
             "for t in () if formula is None}))",
             ["tests/test_network_field.py::test_a_steep_tanh_field_meets_its_target"],
             "a network's engine without the activations' turns (steep rows on the trapezoid)"),
    mutation("turn-points-off-by-a-grid-step", "hierarchy/models/network/engine.py",
             "    a, b = x[max(k - 1, 0)], x[min(k + 1, len(x) - 1)]",
             "    a, b = x[max(k, 0)], x[min(k + 2, len(x) - 1)]",
             ["tests/test_network_engine.py::test_turn_points_are_where_a_saturating_function_"
              "is_steepest"],
             "the turn searched one grid step off (a user's activation turns elsewhere)"),
    mutation("joint-narrow-piece-weights", "templates/network_joint.pyx.j2",
             "                c.lw[o] = lw + legendre_start[q + JOINT_LOWER - o];",
             "                c.lw[o] = lw + legendre_start[q + JOINT_LOWER];",
             ["tests/test_network_joint.py::test_engine_within_its_stated_error_of_a_dense_reference"],
             "a narrow piece's lower Legendre nodes weighted with the order's own weights"),
    mutation("structured-direct-b-transposed", "hierarchy/models/network/structured.py",
             'np.concatenate([moments["b"][0].T, moments["a"][0].T], axis=0)',
             'np.concatenate([moments["b"][0], moments["a"][0].T], axis=0)',
             ["tests/test_network_structured.py::"
              "test_loss_without_a_table_takes_its_moments_from_the_joint_engine"],
             "the structured blocks' B from the joint engine with its lambda rows transposed"),
    mutation("structured-direct-corrector-one-step", "hierarchy/models/network/structured.py",
             'corrector=net.step ** 2 * moments["c"][0]',
             'corrector=net.step * moments["c"][0]',
             ["tests/test_network_structured.py::"
              "test_one_step_identity_with_a_loss_without_a_table"],
             "the structured corrector from the joint engine with eta for eta^2"),
    mutation("structured-no-engine-target", "hierarchy/models/network/structured.py",
             "class StructuredSystem(EngineTarget):", "class StructuredSystem:",
             ["tests/test_network_structured.py::"
              "test_structured_solve_is_certified_against_its_own_target"],
             "the structured field neither told the solve's target nor re-solved tighter"),
    mutation("joint-memo-serves-looser-targets", "hierarchy/models/network/row_memo.py",
             "        if np.all(targets <= old) and (capped or np.all(errors <= targets)",
             "        if (capped or np.all(errors <= targets)",
             ["tests/test_network_joint.py::test_memo_serves_a_row_only_where_integrating_it_"
              "again_gives_the_same_bits"],
             "the engine's memo serving a row at a looser target (it would stop earlier)"),
    mutation("joint-memo-serves-every-row", "hierarchy/models/network/row_memo.py",
             "        if np.all(targets <= old) and (capped or np.all(errors <= targets)",
             "        if np.all(targets <= old) and (True or np.all(errors <= targets)",
             ["tests/test_network_joint.py::test_memo_serves_a_row_only_where_integrating_it_"
              "again_gives_the_same_bits"],
             "the engine's memo serving a row that met only the looser target"),
    mutation("joint-every-row-flagged-at-its-highest-order", "templates/network_joint.pyx.j2",
             "            if (agree) return q == pmax ? q + JOINT_CAPPED : q;",
             "            if (agree) return q + JOINT_CAPPED;",
             ["tests/test_network_joint.py::test_memo_serves_a_row_only_where_integrating_it_"
              "again_gives_the_same_bits"],
             "the module flagging a row that met its targets early as at its highest order"),
    mutation("joint-memo-ignores-the-highest-order-flag", "hierarchy/models/network/row_memo.py",
             "        if np.all(targets <= old) and (capped or np.all(errors <= targets)",
             "        if np.all(targets <= old) and (np.all(errors <= targets)",
             ["tests/test_network_joint.py::test_memo_serves_a_row_that_ran_to_its_highest_"
              "order_at_any_tighter_target"],
             "the engine's memo integrating again a row at its highest order (a lost saving)"),
    mutation("gauss-levels-no-kink-crossings", "templates/_gauss_levels.c.j2",
             "            nb = gauss_crossings(r, L, nend, ends, key, kink_start, kinks, turned, "
             "j, m, bp,\n                                 nb);\n", "",
             ["tests/test_network_engine.py::test_three_steps_on_a_nearly_singular_covariance"
              "_against_the_orthant_probability"],
             "a level not split where two kinks of the next level cross (a corner missed by "
             "both orders)"),
    mutation("gauss-levels-next-level-sweeps-only", "templates/_gauss_levels.c.j2",
             "for (level = j + 1; level < r; level++) {  /* the deeper levels' kinks sweep",
             "for (level = j + 1; level < r && level == j + 1; level++) {  /* the deeper "
             "levels' kinks sweep",
             ["tests/test_network_engine.py::test_a_narrow_field_with_a_kink_off_the_origin"
              "_against_its_probability"],
             "only the next level's kinks, not a deeper level's, swept over a level"),
    mutation("plans-read-back-with-positions-reversed", "hierarchy/models/network/closed_forms.py",
             "    return name, tuple(detail)", "    return name, tuple(reversed(detail))",
             ["tests/test_network_warm_path.py::test_plans_read_back_from_the_cache_equal_the_"
              "derived_ones"],
             "a closed form read back from the derivation cache with its variables reversed"),
    mutation("table-relu-taken-for-erf", "hierarchy/models/network/closed_forms.py",
             "        return formula.text if formula.text in CLOSED_FORMS else None",
             "        return \"erf\" if formula.text in CLOSED_FORMS else None",
             ["tests/test_network_field.py"],
             "a table entry's closed form found by the wrong name (relu's rows as erf's)"),
    mutation("formula-checks-skipped-for-written-formulas", "hierarchy/models/network/model.py",
             "    if not all(formula.table for formula in (g, teacher_g, loss)):",
             "    if False:",
             ["tests/test_formula_probe.py::test_undefined_and_non_integrable_network_formulas"
              "_are_refused"],
             "the finite-and-integrable checks skipped for every network, not only table ones"),
    mutation("cached-json-ignores-its-key", "hierarchy/models/network/table_cache.py",
             "        if isinstance(stored, dict) and stored.get(\"key\") == key \\\n",
             "        if isinstance(stored, dict) \\\n",
             ["tests/test_network_warm_path.py::test_cached_json_computes_once_and_refuses_a_"
              "file_of_another_key"],
             "a derived fact read back from a file written under another network's key"),
    mutation("full-quadrature-decided-by-the-table-alone", "hierarchy/models/network/derivation.py",
             "    return not applies or term_table(net) is None",
             "    return term_table(net) is None",
             ["tests/test_network_joint.py::test_auto_engine_is_joint_up_to_four_fields_and_qmc"
              "_beyond"],
             "the term table taken for a loss whose l' is not a polynomial (logistic)"),
    mutation("derivation-key-blind-to-templates", "hierarchy/models/network/table_cache.py",
             "    for name in TEMPLATES:\n", "    for name in ():\n",
             ["tests/test_table_cache.py::test_the_key_changes_with_the_engines_templates"],
             "the derivation cache's key blind to the engine templates whose rendered source "
             "it keeps (an upgraded template would load the old source)"),
    mutation("engine-ball-radius-shrunk", "templates/network_engine.pyx.j2",
             "room - xi * xi", "room - 2.0 * xi * xi",
             ["tests/test_network_engine.py::test_levels_of_very_different_widths_against_a"
              "_dense_reference"],
             "the engine's nodes kept in a ball of radius U / sqrt 2 instead of U"),
    mutation("engine-mirror-weight-not-doubled", "templates/network_engine.pyx.j2",
             "(share = gauss_mirror_share(xi, half)) == 0.0) continue;",
             "(share = 0.5 * gauss_mirror_share(xi, half)) == 0.0) continue;",
             ["tests/test_network_engine.py::test_a_mirrored_row_equals_a_row_summed_over_every"
              "_node"],
             "an even row's outermost level summed over xi > 0 without doubling it"),
    mutation("engine-mirror-zero-node-twice", "templates/_gauss_levels.c.j2",
             "if (fabs(xi) <= 1e-9 * scale) return 1.0;",
             "if (fabs(xi) <= 1e-9 * scale) return 2.0;",
             ["tests/test_network_engine.py::test_a_mirrored_row_equals_a_row_summed_over_every"
              "_node"],
             "the trapezoid's node at 0 counted twice in an even row"),
    mutation("engine-table-mirror-sign", "templates/network_engine.pyx.j2",
             "            sign = (double)c->tparity;", "            sign = 1.0;",
             ["tests/test_network_engine.py::test_a_mirrored_row_equals_a_row_summed_over_every"
              "_node"],
             "the innermost table of an odd function mirrored as if even"),
    mutation("engine-parity-ignores-asymmetric-points", "hierarchy/models/network/engine.py",
             "    return sorted(points) == sorted(-p for p in points)",
             "    return True",
             ["tests/test_network_engine.py::test_a_function_has_a_parity_only_where_its_split"
              "_points_are_symmetric"],
             "a parity claimed for a function split at points not symmetric about 0"),
    mutation("parity-even-and-odd-swapped", "hierarchy/models/network/activations.py",
             "    if sympy.expand(mirrored - expr) == 0:\n        return 1",
             "    if sympy.expand(mirrored - expr) == 0:\n        return -1",
             ["tests/test_network_engine.py::test_a_function_has_a_parity_only_where_its_split"
              "_points_are_symmetric"],
             "an even function taken for odd (its rows set to zero)"),
    mutation("joint-mirror-weight-not-doubled", "templates/network_joint.pyx.j2",
             "            w[k] = share * w[i];",
             "            w[k] = (share > 1.0 ? 1.0 : share) * w[i];",
             ["tests/test_network_joint.py::test_a_mirrored_row_against_the_dense_reference"],
             "the joint engine's even row summed over xi > 0 without doubling it"),
    mutation("joint-odd-outputs-kept", "templates/network_joint.pyx.j2",
             "if (joint_parity[o] < 0) c->acc[o] = 0.0;", "if (0) c->acc[o] = 0.0;",
             ["tests/test_network_joint.py::test_a_mirrored_row_against_the_dense_reference"],
             "odd outputs of a mirrored row left at their half-sum instead of 0"),
    mutation("joint-below-top-ignored", "templates/network_joint.pyx.j2",
             "if (pmax > joint_max_order[c.r] - below_top) pmax = joint_max_order[c.r] - "
             "below_top;",
             "if (pmax > joint_max_order[c.r]) pmax = joint_max_order[c.r];",
             ["tests/test_network_joint.py::test_one_order_below_the_top_gives_each_row_its_"
              "stated_error_away"],
             "the joint engine's coarse re-solve at the top order (it would check nothing)"),
    mutation("engine-below-top-ignored", "templates/network_engine.pyx.j2",
             "            - below_top;", "            - 0;",
             ["tests/test_network_engine.py::test_one_order_below_the_top_gives_the_value_its_"
              "stated_error_away"],
             "the single-field engine's coarse re-solve at the top order"),
    mutation("joint-coarse-shares-the-memo", "hierarchy/models/network/joint.py",
             "memo = self.memo if below_top == 0 else self.coarse_memo",
             "memo = self.memo",
             ["tests/test_network_joint.py::test_one_order_below_the_top_gives_each_row_its_"
              "stated_error_away"],
             "the coarse re-solve served the solve's rows (at their top order) by the memo"),
    mutation("certify-coarse-not-run", "hierarchy/models/network/family.py",
             'if getattr(system, "rows_short", 0) > short_before:',
             'if getattr(system, "rows_short", 0) < short_before:',
             ["tests/test_network_certify.py::test_rows_short_of_their_target_are_checked_one_"
              "order_lower"],
             "no coarse re-solve where rows ran to their highest order short of their target"),
    mutation("certify-re-solves-not-added", "hierarchy/models/network/family.py",
             "        moved_state[:rows] += state\n        moved_risk[:rows] += risk\n"
             "        out.update(coarse_trajectory",
             "        moved_state[:rows] = np.maximum(moved_state[:rows], state)\n"
             "        moved_risk[:rows] = np.maximum(moved_risk[:rows], risk)\n"
             "        out.update(coarse_trajectory",
             ["tests/test_network_certify.py::test_the_two_re_solves_changes_add_up_against_the_"
              "tolerance"],
             "the two re-solves' changes held to the tolerance each, not their sum"),
    mutation("certify-coarse-reason-after-tightening", "hierarchy/models/network/family.py",
             "    (checks.result, checks.eg), checks.level = promotion.kept, promotion.level\n",
             "    (checks.result, checks.eg), checks.level = promotion.kept, promotion.level\n"
             "    reason = reason or coarse_reason(system, 0)\n",
             ["tests/test_network_certify.py::test_rows_short_of_their_target_are_checked_one_"
              "order_lower"],
             "the coarse re-solve run on every solve (or never): its reason taken after the "
             "tightened re-solve, whose tighter target leaves rows short"),
    mutation("certify-lifted-rows-not-checked", "hierarchy/models/network/family.py",
             "    if untargeted:\n        reasons.append(untargeted)",
             "    if untargeted and False:\n        reasons.append(untargeted)",
             ["tests/test_network_certify.py::test_closed_forms_off_the_ties_are_checked_by_the_"
              "coarse_re_solve"],
             "a relu/erf field certified by its closed forms' stated error alone, a rate"),
    mutation("lifted-rows-not-moved-in-the-coarse-re-solve", "hierarchy/models/network/field.py",
             "        if self.below_top:\n            return self.lifted[j].coarse_of(",
             "        if False:\n            return self.lifted[j].coarse_of(",
             ["tests/test_network_certify.py::test_closed_forms_off_the_ties_are_checked_by_the_"
              "coarse_re_solve"],
             "the coarse re-solve gave the lifted closed forms their own values (it checked "
             "nothing)"),
    mutation("lifted-coarse-without-the-lift", "hierarchy/models/network/closed_forms.py",
             "        return values[:rows] + LIFT_ERROR_FACTOR * (values[2 * rows:]",
             "        return values[:rows] + 0.0 * (values[2 * rows:]",
             ["tests/test_network_engine.py::test_a_lifted_moment_s_coarse_value_is_its_stated_"
              "error_away"],
             "a lifted closed form's coarse value without the lift's part of its stated error"),
    mutation("orthant4-coarse-is-the-kept-rule", "hierarchy/models/network/quadrature.py",
             "return np.where(coarse, lower, fine), error",
             "return fine, error",
             ["tests/test_network_engine.py::test_the_orthants_lower_rule_is_the_stated_error_"
              "away"],
             "the four-dimensional orthants' coarse value on the rule kept"),
    mutation("lift-the-whole-covariance-off-the-cone", "hierarchy/models/network/field.py",
             "if np.linalg.eigvalsh(c)[0] >= 0:", "if True:",
             ["tests/test_network_field.py::test_the_field_s_lifted_groups_equal_each_group_"
              "lifted_on_its_own"],
             "a state just off the PSD cone clipped as a whole, not group by group as the "
             "moments are defined"),
    mutation("joint-plan-drops-the-turns", "hierarchy/models/network/joint.py",
             '"turns": [list(t) for t in self.turns]}',
             '"turns": [[] for t in self.turns]}',
             ["tests/test_network_joint.py::test_the_joint_plan_read_back_equals_the_derived_"
              "one"],
             "the joint engine's cached plan without the turns (a second run would place the "
             "rows on the wrong module)"),
    mutation("solve-figure-not-marked-uncertified", "hierarchy/models/network/family.py",
             'uncertified_from=summary.get("beyond_from"))', "uncertified_from=None)",
             ["tests/test_network_certify.py::test_solve_that_cannot_be_certified_exits_3_with_"
              "one_line"],
             "a solve that cannot be certified drawn like a certified one"),
    mutation("fallback-coarse-not-applied", "hierarchy/models/network/field.py",
             "if self.below_top and j in self.fallback:",
             "if False and j in self.fallback:",
             ["tests/test_network_certify.py::test_the_numpy_fallbacks_rows_are_checked_by_"
              "the_coarse_re_solve"],
             "the numpy fallback's rows keep their values in the coarse re-solve"),
    mutation("fallback-rows-never-checked", "hierarchy/models/network/field.py",
             "        if self.fallback:\n", "        if False:\n",
             ["tests/test_network_certify.py::test_the_numpy_fallbacks_rows_are_checked_by_"
              "the_coarse_re_solve"],
             "the numpy fallback's stated errors compared with the tolerance as rates only"),
    mutation("fallback-hermite-coarse-unscaled", "hierarchy/models/network/quadrature.py",
             "return kept + SAFETY * (hermite_expectation(",
             "return kept + (hermite_expectation(",
             ["tests/test_network_engine.py::test_the_numpy_fallbacks_coarse_value_is_its_"
              "stated_error_away"],
             "the Gauss-Hermite fallback's coarse value short of its stated error"),
    mutation("relabelling-ignores-pairwise-q", "hierarchy/models/network/relabelling.py",
             "            if assigned:\n                cost = max(cost, float(",
             "            if False:\n                cost = max(cost, float(",
             ["tests/test_network_relabelling.py"],
             "two states called one point up to a relabelling that moves their Q_ik"),
    mutation("qmc-certified-by-its-rates", "hierarchy/models/network/family.py",
             "    if reason:  # standard errors, not bounds",
             "    if False:  # standard errors, not bounds",
             ["tests/test_network_joint.py::test_a_qmc_solve_is_never_certified_whatever_the_"
              "tolerances"],
             "a QMC solve certified at loose tolerances by its standard errors"),
    mutation("blown-up-solve-certified-unchecked", "hierarchy/models/network/family.py",
             "                    return Checks(unchecked=UNCHECKED)",
             "                    return Checks()",
             ["tests/test_network_certify.py::test_a_solve_that_blew_up_is_not_certified_by_"
              "unchecked_estimates"],
             "a solve that blew up certified by stated errors no re-solve checked"),
    mutation("figure-process-failure-dropped", "hierarchy/core/figure_process.py",
             "    if failure is not None:\n        raise FigureProcessError",
             "    if failure is None:\n        raise FigureProcessError",
             ["tests/test_figure_process.py::test_a_failure_there_fails_the_call_with_its_"
              "traceback",
              "tests/test_figure_process.py::test_the_second_process_draws_the_same_pixels"],
             "a figure that failed in the second process reported as drawn"),
    mutation("figure-process-dies-on-ctrl-c", "hierarchy/core/figure_process.py",
             "    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the command's",
             "    pass  # Ctrl-C is the command's",
             ["tests/test_solve_interrupt.py::test_ctrl_c_to_the_process_group_ends_the_figure_"
              "process_too"],
             "Ctrl-C prints the figure process's KeyboardInterrupt traceback"),
    mutation("figure-process-never-started", "hierarchy/cli/main.py",
             "            figure_process.start()", "            pass",
             ["tests/test_figure_process.py::test_the_command_returns_with_its_figure_"
              "written"],
             "the command draws its figure itself, matplotlib's import on its path"),
    mutation("titles-fixed-over-the-offset-text", "hierarchy/core/panel_margins.py",
             "if not ax.get_visible() or ax.yaxis.get_major_formatter().get_offset() or \\",
             "if not ax.get_visible() or \\",
             ["tests/test_panel_margins.py::test_fixed_titles_are_where_matplotlib_would_put_"
              "them"],
             "a panel's title fixed on its top edge over an offset text that matplotlib "
             "lifts it above"),
    mutation("paired-mean-start-from-raw-starts", "hierarchy/sgd/paired.py",
             "    matched_starts = matched[:, 0]", "    matched_starts = u_runs[:, 0]",
             ["tests/test_paired.py::test_the_paired_odes_start_from_each_runs_own_"
              "statistics"],
             "the ODE from the mean start starts from the mean of the unmatched starts"),
    mutation("target-exponent-of-the-nus-allowed", "hierarchy/models/network/target.py",
             "        if exponent.free_symbols & set(nus):",
             "        if False and exponent.free_symbols & set(nus):",
             ["tests/test_network_target.py::test_bad_target_names_the_field"],
             "a target 2**(nu1*nu2) (infinite risk) accepted"),
    mutation("matching-drops-the-block", "hierarchy/models/network/matching.py",
             "        return unit_label(base) + at + block", "        return unit_label(base)",
             ["tests/test_network_structured.py::test_matching_relabels_the_units_of_every_"
              "block"],
             "a structured run's per-block labels lose their block when relabelled"),
    mutation("api-runs-told-by-shape", "hierarchy/api.py",
             "        if not runs_first(name):", "        if values.shape[0] == t.size:",
             ["tests/test_model_api.py::test_as_many_runs_as_times_keep_their_axes"],
             "the Python API tells runs from times by the arrays' shapes"),
    mutation("template-key-without-includes", "hierarchy/jit/render.py",
             "    for name in template_names():", "    for name in (template_name,):",
             ["tests/test_cache.py::test_a_template_key_covers_every_template_the_context_"
              "and_the_toolchain"],
             "a template's module key ignores the templates it includes"),
    mutation("study-hash-drops-the-batch", "hierarchy/study/dimensions.py",
             'SGD_KEYS_OF_NO_JOB = ("runs", "seed", "paired_runs")',
             'SGD_KEYS_OF_NO_JOB = ("runs", "seed", "paired_runs", "batch")',
             ["tests/test_dimension_job_hash.py"],
             "a dimension study's job hash ignores sgd.batch: --resume after a SIGKILL "
             "reuses a batch-1 ensemble for a mini-batch config"),
    mutation("matching-relabels-class-outputs", "hierarchy/models/network/matching.py",
             "    if net.K < 2 or net.loss_name in VECTOR_LOSSES:", "    if net.K < 2:",
             ["tests/test_paired.py::test_the_units_of_a_class_loss_are_never_relabelled"],
             "the units of a cross-entropy network (one output per class) are relabelled by "
             "|R| before the mean over runs"),
    mutation("logistic-takes-any-label", "hierarchy/models/network/mixture.py",
             'SIGN_LOSSES = ("logistic",)', "SIGN_LOSSES = ()",
             ["tests/test_network_presets.py::test_logistic_labels_are_signs"],
             "the logistic loss accepts the labels 1, 0 (a cluster that never trains)"),
    mutation("fixed-point-jacobian-one-step", "hierarchy/models/network/linearisation.py",
             "STEPS = (H, 1e-5, 1e-4)", "STEPS = (H,)",
             ["tests/test_network_fixed_points.py::test_a_strictly_convex_class_loss_has_a_"
              "stable_point"],
             "the fixed points' Jacobian at the smallest step only: the engine's quadrature "
             "error inflates the neutral band"),
    mutation("joint-fields-counted-after-sympy", "hierarchy/models/network/joint.py",
             "    if count > MAX_FIELDS and not points:  # counted before sympy derives anything",
             "    if False:",
             ["tests/test_network_joint.py::test_too_many_fields_are_refused_before_sympy_"
              "derives_anything"],
             "a network beyond the joint engine is refused only after sympy's derivatives "
             "(minutes for a wide cross-entropy)"),
    mutation("spectra-times-off-the-steps", "hierarchy/spectra/config.py",
             "    if step_time is not None:\n        _check_steps(",
             "    if False:\n        _check_steps(",
             ["tests/test_input_reliability.py::test_spectra_times_are_on_distinct_steps_and_"
              "train_data_from_step_one"],
             "two spectra times on one SGD step record one snapshot twice"),
    mutation("gmm-stability-beyond-the-quadrature", "hierarchy/models/gmm/stability.py",
             "    if abs(top) <= band and band > TOL:", "    if False:",
             ["tests/test_gmm_binary.py::test_finite_snr_verdicts_respect_the_mirror_and_the_"
              "quadratures_resolution"],
             "a finite-lambda fixed point's sign of a 1e-6 eigenvalue, below the QMC's "
             "resolution, decides its stability"),
    mutation("gmm-noiseless-solve-loses-its-rows", "hierarchy/models/gmm/ballistic.py",
             "        y = ensemble(model, start[:, None], times, dt, rows=rows, on_row=show)",
             "        y = ensemble(model, start[:, None], times, dt)",
             ["tests/test_gmm_binary.py::test_an_interrupted_noiseless_solve_keeps_its_rows_"
              "and_shows_its_progress"],
             "an interrupted lambda = inf solve keeps no row and shows no progress"),
    mutation("integrate-loop-never-stalls", "hierarchy/ode/integrate.py",
             "        if stalled >= STALL_STEPS:", "        if False:",
             ["tests/test_solve.py::test_the_shared_loop_fails_when_its_steps_cannot_advance"],
             "a solve whose steps cannot advance steps on at t = 0 for ever",
             ),
    mutation("sgd-seed-swallows-the-interrupt", "hierarchy/sgd/simulate.py",
             "            if on_checkpoint is None:\n                # Nobody keeps a partial run",
             "            if False:\n                # Nobody keeps a partial run",
             ["tests/test_study_resume.py::test_an_interrupt_inside_an_sgd_job_is_an_interrupt_"
              "not_a_finished_job"],
             "an interrupted SGD seed of a study returns its NaN rows as a finished job"),
    mutation("file-covariance-defaults-to-one-block", "hierarchy/models/network/inputs.py",
             '            "blocks": "", "path": "",',
             '            "blocks": 1, "path": "",',
             ["tests/test_network_structured.py::test_bad_inputs_are_one_line_naming_the_key",
              "tests/test_network_structured.py::test_a_covariance_file_is_known_by_its_"
              "content_not_its_path"],
             "a covariance file without blocks is silently x ~ N(0, I)"),
    mutation("certification-ignores-the-integrator", "hierarchy/core/certification.py",
             "    factor = CHECK_FACTOR ** -level\n", "    factor = 1.0\n",
             ["tests/test_network_certify.py::test_certified_covers_the_integrators_own_error",
              "tests/test_summary_certify.py::test_a_loose_solve_is_replaced_by_its_check_and_"
              "then_within_its_tolerance"],
             "the re-solve keeps the integrator's tolerances: its global error is not checked"),
    mutation("incomplete-result-keeps-stale-figures", "hierarchy/core/io.py",
             '        if not complete and name == "result":', "        if False:",
             ["tests/test_stale_figures.py"],
             "a diverged run leaves the figure of the run before beside its result"),
    mutation("study-certifies-lone-points", "hierarchy/study/analysis.py",
             "    return np.cumprod(pointwise, axis=0).astype(bool)\n", "    return pointwise\n",
             ["tests/test_study_extrapolation.py::test_certified_is_a_horizon_and_an_exact_"
              "reference_flags_under_claims"],
             "a lone later point of the study counts as certified"),
    mutation("study-ignores-under-claims", "hierarchy/study/analysis.py",
             "    over = valid & (diff > UNDER_CLAIM_FACTOR * claimed)",
             "    over = valid & (diff > np.inf)",
             ["tests/test_study_extrapolation.py::test_certified_is_a_horizon_and_an_exact_"
              "reference_flags_under_claims"],
             "the matrix flow catches an under-claim and the study says nothing"),
    mutation("gmm-zero-eigenvalue-is-a-saddle", "hierarchy/models/gmm/stability.py",
             "    elif abs(top) <= TOL:  # a zero eigenvalue", "    elif False:  # a zero eigenvalue",
             ["tests/test_gmm_binary.py::test_the_ring_points_are_neutral_not_saddles_in_the_"
              "record_and_the_figure"],
             "the binary ring points, attracting along no direction, called unstable"),
    mutation("loss-without-yhat-accepted", "hierarchy/models/network/formulas.py",
             "    if slope == 0:  # SGD on it never moves", "    if False:  # SGD on it never moves",
             ["tests/test_formula_probe.py::test_a_formula_that_ignores_its_variable_is_refused"],
             "a loss without yhat solves to a constant trajectory, certified"),
    mutation("atol-unbounded", "hierarchy/config/shared.py",
             "strict=False,\n                                  maximum=MAX_ATOL)",
             "strict=False)",
             ["tests/test_input_reliability.py::test_an_absolute_tolerance_above_a_tenth_is_"
              "refused"],
             "atol = 1e3 accepted, and a network solve certified against it"),
    mutation("integers-without-a-ceiling", "hierarchy/config/fields.py",
             "    maximum = MAX_INTEGER if maximum is None else min(maximum, MAX_INTEGER)\n", "",
             ["tests/test_input_reliability.py::test_a_huge_integer_is_one_line_not_an_overflow"],
             "init.d = 1e300 overflows the memory estimate: a traceback"),
    mutation("moments-file-keeps-the-last-repeat", "hierarchy/models/attention/initial.py",
             ", object_pairs_hook=_unique_keys)", ")",
             ["tests/test_input_faults.py::test_bad_moments_files_are_one_line_naming_init_"
              "moments"],
             "a moments file giving one word twice silently takes the last value"),
    mutation("any-newton-root-is-the-end-of-the-solve", "hierarchy/models/network/fixed_points.py",
             "    if distance <= END_NEAR:", "    if True:",
             ["tests/test_network_fixed_points.py::test_only_an_end_near_its_root_is_called_the_"
              "end_of_the_solve"],
             "a Newton jump 0.2 away from a moving state labelled the solve's end"),
    mutation("covariance-file-known-by-its-path", "hierarchy/models/network/inputs.py",
             '        given["sha256"] = _content_digest(table)', "        pass",
             ["tests/test_network_structured.py::test_a_covariance_file_is_known_by_its_"
              "content_not_its_path"],
             "--resume returns a run computed with another file at the same path"),
    mutation("resume-ignores-the-version", "hierarchy/core/io.py",
             '        if previous.get("version") != __version__:', "        if False:",
             ["tests/test_study_resume.py::test_results_of_another_package_version_are_not_"
              "resumed"],
             "--resume continues what another version of the package wrote"),
    mutation("network-ridge-on-R-sign", "hierarchy/models/network/field.py",
             "    out[n_q:n_q + n_r] = -net.step * net.ridge\n",
             "    out[n_q:n_q + n_r] = net.step * net.ridge\n",
             ["tests/test_network_presets.py"],
             "the ridge pushes the overlaps R away from zero instead of towards it"),
    mutation("network-field-drops-the-ridge", "hierarchy/models/network/field.py",
             "ridge_rates(net) if net.ridge else None", "None",
             ["tests/test_network_presets.py"],
             "the solve's field leaves the ridge out (its rates kept but never added)"),
    mutation("attention-panels-shaded-from-the-run-horizon",
             "hierarchy/models/attention/solve_job.py",
             "                            horizons_of(summary, labels, t_eval),",
             '                            summary["beyond_from"],',
             ["tests/test_long_horizons.py::test_each_panel_is_shaded_from_its_own_observables_"
              "horizon"],
             "a panel of constants valid to the end drawn beyond the validity horizon"),
    mutation("observables-title-unwrapped", "hierarchy/core/plotting.py",
             "        fit_title(fig, title)\n", "        fig.suptitle(title, fontsize=10)\n",
             ["tests/test_long_horizons.py::test_a_long_title_is_wrapped_inside_the_figure"],
             "a blow-up's title runs past both edges of observables.png"),
    mutation("sgd-figure-in-one-row", "hierarchy/core/plotting.py",
             "panel_grid(len(shown) + 1, width=3.0, height=3.2, extra_width=0.0)",
             "panel_grid(len(shown) + 1, width=3.0, height=3.2, extra_width=0.0, max_columns=99)",
             ["tests/test_plots.py::test_sgd_figure_of_many_observables_wraps_into_rows_of_four"],
             "seven SGD panels in one 3150-pixel row, unreadable at column width"),
    mutation("printed-comparison-hides-the-unpaired-se", "hierarchy/core/summary_table.py",
             "{'± ' + _text(entry.get('unpaired_se')):>10}", "{'':>10}",
             ["tests/test_paired.py::test_the_printed_comparison_gives_the_unpaired_standard_"
              "error"],
             "an unpaired difference of 3.7 standard errors printed as if it had none"),
    mutation("study-figure-slope-without-its-error", "hierarchy/study/dimension_report.py",
             '                   + ("" if stderr is None else f" ± {stderr:.2f}")\n', "",
             ["tests/test_console_output.py::test_study_figure_panel_titles_give_the_slope_with_"
              "its_standard_error"],
             "study_errors.png states a slope without the standard error the table gives"),
    mutation("paired-figure-band-of-one-standard-error", "hierarchy/core/plotting.py",
             "2.0 * spread / np.sqrt(np.maximum(count, 1))",
             "spread / np.sqrt(np.maximum(count, 1))",
             ["tests/test_plots.py::test_paired_sgd_figure_draws_the_run_mean_with_its_band"],
             "the band says two standard errors and draws one"),
    mutation("paired-odes-listed-under-a-common-start", "hierarchy/core/plotting.py",
             "            if not one_start:\n", "            if True:\n",
             ["tests/test_plots.py::test_paired_sgd_figure_draws_the_run_mean_with_its_band"],
             "the legend lists paired ODEs hidden under the one ODE they all equal"),
    mutation("killed-builds-left-behind", "hierarchy/jit/cache.py",
             "                remove_leftover_builds(folder, name)\n", "",
             ["tests/test_cache.py::test_a_killed_builds_folder_is_removed_by_the_next_build"],
             "a compile killed by SIGKILL leaves its temporary folder in the cache for good"),
    mutation("irregular-ladders-credited-with-acceleration", "hierarchy/core/extrapolation.py",
             "    return estimate, np.where(irregular(seqs), np.fmax(error, floor), error)\n",
             "    return estimate, error\n",
             ["tests/test_extrapolation.py::test_an_oscillating_ladder_is_not_credited_with_"
              "acceleration"],
             "an oscillating ladder's accidental plateau certified, 10^5 times off its claim"),
    mutation("irregular-ignores-sign-changes", "hierarchy/core/extrapolation.py",
             "                  & (np.all(last > 0, axis=0) | np.all(last < 0, axis=0))\n",
             "", ["tests/test_extrapolation.py::test_a_steady_rate_is_regular_and_an_"
                  "oscillating_ladder_is_not"],
             "a ladder whose differences change sign counted as converging steadily"),
    mutation("slowing-rate-counted-steady", "hierarchy/core/extrapolation.py",
             "    return ~steady | slowing | period_two\n", "    return ~steady | period_two\n",
             ["tests/test_extrapolation.py::test_rates_still_growing_or_of_period_two_are_"
              "irregular",
              "tests/test_extrapolation.py::test_a_rate_growing_towards_the_radius_is_not_"
              "credited_with_acceleration"],
             "a rate still growing towards the radius certified, 34 times off its claim"),
    mutation("settled-rate-counted-slowing", "hierarchy/core/extrapolation.py",
             "        slowing = (np.all(growth > 0, axis=0) & (growth[-1] >= 0.5 * growth[-2])\n",
             "        slowing = (np.all(growth > 0, axis=0)\n",
             ["tests/test_extrapolation.py::test_rates_still_growing_or_of_period_two_are_"
              "irregular"],
             "a rate that grew and settled refused its acceleration (the default config's "
             "horizon cut to t = 0.023)"),
    mutation("period-two-rate-counted-steady", "hierarchy/core/extrapolation.py",
             "    return ~steady | slowing | period_two\n", "    return ~steady | slowing\n",
             ["tests/test_extrapolation.py::test_rates_still_growing_or_of_period_two_are_"
              "irregular"],
             "a rate of period two certified, up to 100 times off its claim"),
    mutation('unread-keys-unchecked', 'hierarchy/config/loader.py',
             '    check_unread_keys(document, config, family.read_only_when, defaults)\n    return config',
             '    return config',
             ['tests/test_input_network_r16.py::test_gaussian_start_keys_with_a_statistics_start_are_refused'],
             'a written key nothing reads is silently ignored'),
    mutation('second-layer-step-unchecked', 'hierarchy/models/network/family.py',
             'check_second_layer_step(net, sgd["step_second_layer"])',
             'None',
             ['tests/test_input_network_r16.py::test_second_layer_step_with_a_fixed_second_layer_is_refused'],
             'eta_v with a fixed second layer ignored'),
    mutation('resume-overwrite-together', 'hierarchy/actions.py',
             '    if resume and overwrite:\n',
             '    if False:\n',
             ['tests/test_input_network_r16.py::test_sgd_resume_with_overwrite_is_refused'],
             '--resume silently wins over --overwrite'),
    mutation('show-config-flags-ignored', 'hierarchy/cli/commands.py',
             '        check_no_model_flags(args)\n',
             '',
             ['tests/test_input_network_r16.py::test_show_config_with_model_flags_is_refused'],
             'model flags ignored beside show --config'),
    mutation('target-degree-16', 'hierarchy/models/network/target.py',
             'max_degree=activations.ACTIVATION_DEGREE,',
             'max_degree=16,',
             ['tests/test_input_network_r16.py::test_targets_of_degree_above_a_teachers_are_refused_at_validation'],
             'degree-9..16 targets reach the term table'),
    mutation('api-out-any-type', 'hierarchy/api.py',
             '        check_path(out, "out", "a folder")\n',
             '',
             ['tests/test_input_network_r16.py::test_api_out_that_is_no_path_is_refused_naming_out'],
             'out=123 is a TypeError'),
    mutation('api-plain-unbounded', 'hierarchy/api.py',
             'if isinstance(value, (dict, list, tuple)) and depth > MAX_NESTING:',
             'if False:',
             ['tests/test_input_network_r16.py::test_api_self_referencing_and_too_deep_tables_are_refused'],
             'a self-referencing dict is a RecursionError'),
    mutation('api-progress-unchecked', 'hierarchy/api.py',
             'check_switches(progress=progress, overwrite=overwrite)',
             'check_switches(overwrite=overwrite)',
             ['tests/test_input_network_r16.py::test_api_progress_must_be_a_switch'],
             "progress='no' shows progress"),
    mutation('config-fifo-read', 'hierarchy/config/documents.py',
             '        handle = os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")',
             '        return pathlib.Path(path).read_bytes()',
             ['tests/test_input_network_r16.py::test_a_config_that_is_a_fifo_is_refused_not_read'],
             'a config FIFO blocks the command forever'),
    mutation('flag-digits-unbounded', 'hierarchy/cli/parser.py',
             'if sum(c.isdigit() for c in text) > MAX_FLAG_DIGITS:',
             'if False:',
             ['tests/test_input_network_r16.py::test_flags_with_thousands_of_digits_are_one_line'],
             'a 5000-digit flag is a traceback'),
    mutation('resume-reuse-silent', 'hierarchy/cli/commands.py',
             'if isinstance(summary, dict) and summary.get("reused"):',
             'if False:',
             ['tests/test_input_network_r16.py::test_resume_of_a_finished_sgd_run_says_the_results_were_reused'],
             "a reused run claims 'results written'"),
    mutation('one-run-named-runs', 'hierarchy/core/resources.py',
             '        check_one_run_fits(parameters, per_run, budget, keys, size_field or field)\n',
             '        pass\n',
             ['tests/test_input_network_r16.py::test_one_run_too_big_names_sgd_dimension'],
             'a too-large dimension is blamed on sgd.runs'),
    mutation('int-list-unbounded', 'hierarchy/config/fields.py',
             ' or abs(value) > MAX_INTEGER:',
             ':',
             ['tests/test_input_network_r16.py::test_400_digit_integers_in_lists_and_counts_are_refused'],
             '400-digit seeds accepted'),
    mutation('bom-refused', 'hierarchy/config/documents.py',
             'text = raw.decode("utf-8-sig")',
             'text = raw.decode("utf-8")',
             ['tests/test_input_network_r16.py::test_a_config_with_a_utf8_byte_order_mark_is_read'],
             'a byte-order mark makes the config malformed TOML'),
    mutation('study-max-degree-uncapped', 'hierarchy/models/attention/config.py',
             'high = section["max_degree"] = fields.integer(section, "study", "max_degree", minimum=2,\n                                                  maximum=MAX_DEGREE_SCANNED)',
             'high = section["max_degree"] = fields.integer(section, "study", "max_degree", minimum=2)',
             ['tests/test_input_attention_r16.py::test_huge_study_degree_is_refused_by_value_before_any_list'],
             'a huge study.max_degree builds the degree list'),
    mutation('loss-overflow-unchecked', 'hierarchy/models/attention/losses.py',
             '    if not np.all(np.isfinite(grads)):\n',
             '    grads = grads[np.all(np.isfinite(grads), axis=1)]\n    if False:\n',
             ['tests/test_input_attention_r16.py::test_an_mse_activation_overflowing_the_squared_loss_is_one_line'],
             'an overflowing loss is a traceback'),
    mutation('wick-lambdified', 'hierarchy/models/attention/potential.py',
             '        self._exponents, self._coefficients = monomial_table([phi] + grad + hess)\n',
             '        self._exponents, self._coefficients = monomial_table([phi] + grad + hess)\n        sympy.lambdify(args, [p.as_expr() for p in [phi] + grad + hess], cse=True)\n',
             ['tests/test_input_attention_r16.py::test_a_degree_16_polynomial_loss_gets_its_exact_gaussian_expectation'],
             'a degree-16 loss is a RecursionError after 35 s'),
    mutation('runaway-start-exit-3', 'hierarchy/cli/commands.py',
             'if summary.get("status", 0) != 0 and (at_once or not summary.get("extrapolate")):',
             'if summary.get("status", 0) != 0 and not summary.get("extrapolate"):',
             ['tests/test_input_attention_r16.py::test_a_solve_that_runs_away_at_once_is_exit_1_naming_the_blow_up'],
             'a start that runs away at once is exit 3'),
    mutation('study-start-unchecked', 'hierarchy/study/run.py',
             '        model.check_start(config)\n',
             '        pass\n',
             ['tests/test_input_attention_r16.py::test_study_refuses_an_untied_loss_without_a_convex_mean_before_any_job'],
             'the untied loss is refused only after the SGD job'),
    mutation('batch-memory-unchecked', 'hierarchy/models/attention/config.py',
             '    if section["batch"] * per_sample > budget:',
             '    if False:',
             ['tests/test_input_attention_r16.py::test_a_batch_beyond_memory_is_refused_naming_sgd_batch'],
             'a huge sgd.batch blamed on other keys'),
    mutation('spectra-count-spelled', 'hierarchy/spectra/config.py',
             'shown = size if size < 10**12 else f"{float(size):.3g}"',
             'shown = size',
             ['tests/test_input_attention_r16.py::test_too_many_spectra_samples_are_one_short_line_naming_the_key_set'],
             'a 300-digit integer in the message'),
    mutation('unused-loss-key-accepted', 'hierarchy/models/attention/config.py',
             '        if section["name"] != user and value.strip() != default:',
             '        if False:',
             ['tests/test_input_attention_r16.py::test_a_loss_key_the_loss_does_not_read_is_refused'],
             'loss keys silently ignored'),
    mutation('moments-with-gaussian-accepted', 'hierarchy/models/attention/config.py',
             '    if section["moments"] and section["source"] != "moments":',
             '    if False:',
             ['tests/test_input_attention_r16.py::test_a_moments_file_with_another_source_is_refused'],
             'init.moments silently ignored'),
    mutation('references-without-flow-accepted', 'hierarchy/models/attention/config.py',
             '    if "matrix-flow" not in references:',
             '    if False:',
             ['tests/test_input_attention_r16.py::test_study_references_without_the_matrix_flow_are_refused'],
             'study.references not honoured'),
    mutation('moments-label-length-unchecked', 'hierarchy/models/attention/initial.py',
             '        if degree is not None:\n            _check_label_length(label, degree)\n',
             '        pass\n',
             ['tests/test_input_attention_r16.py::test_a_huge_moments_label_is_refused_by_its_length_before_canonicalising'],
             'a long label canonicalised in quadratic time'),
    mutation('hankel-unchecked', 'hierarchy/models/attention/initial.py',
             '        if low < -HANKEL_TOLERANCE:',
             '        if low < -HANKEL_TOLERANCE and False:',
             ['tests/test_input_attention_r16.py::test_unrealisable_tied_power_moments_are_refused_naming_init_moments'],
             'unrealisable tied power moments accepted'),
    mutation('hankel-no-margin', 'hierarchy/models/attention/initial.py',
             'HANKEL_TOLERANCE = 1e-9',
             'HANKEL_TOLERANCE = -1e-9',
             ['tests/test_input_attention_r16.py::test_realisable_low_rank_and_zero_starts_pass_the_power_check'],
             'rounding refuses realisable low-rank starts'),
    mutation('init-scale-unbounded', 'hierarchy/models/attention/config.py',
             '        if scale == 0.0 or degree * power * math.log10(scale * spread) <= MAX_MOMENT_LOG10:',
             '        if True:',
             ['tests/test_input_attention_r16.py::test_a_huge_init_scale_is_refused_naming_init_scale'],
             'init.scale 1e300 reported as an SGD divergence'),
    mutation('summary-certified-without-its-check', 'hierarchy/ode/default_job.py',
             '        bad = ~(bound <= tolerance)  # a time the check did not reach is not certified',
             '        bad = np.zeros(len(kept.t), dtype=bool)',
             ['tests/test_summary_certify.py::test_a_loose_solve_that_may_not_be_replaced_is_not_certified_exit_3'],
             'a summary solve certified whatever its check moved'),
    mutation('summary-loose-solve-kept', 'hierarchy/core/certification.py',
             '        promotion.kept = promotion.check\n',
             '        return promotion\n',
             ['tests/test_summary_certify.py::test_a_loose_solve_is_replaced_by_its_check_and_then_within_its_tolerance'],
             'a solve its check moved past atol + rtol |u| kept instead of the tighter one'),
    mutation('gmm-qmc-solve-certified', 'hierarchy/models/gmm/ballistic.py',
             'return adaptive_check(solve, settings, uncertifiable=FIXED_POINT_ESTIMATES)',
             'return adaptive_check(solve, settings)',
             ['tests/test_summary_certify.py::test_a_finite_snr_solve_is_never_certified[gmm-binary]'],
             "a QMC-averaged mixture field certified by the integrator's check"),
    mutation('multiclass-qmc-solve-certified', 'hierarchy/models/multiclass/field.py',
             'uncertifiable=None if math.isinf(model.snr) else FIXED_POINT_ESTIMATES)',
             'uncertifiable=None)',
             ['tests/test_summary_certify.py::test_a_finite_snr_solve_is_never_certified[gmm-multiclass]'],
             'the multiclass QMC field certified'),
    mutation('summary-figure-not-shaded', 'hierarchy/ode/default_job.py',
             '                uncertified_from=summary.get("beyond_from"))',
             '                uncertified_from=None)',
             ['tests/test_summary_certify.py::test_the_figure_is_shaded_from_the_first_uncertified_time'],
             'an uncertified summary solve drawn like a certified one'),
    mutation('heun-check-same-step', 'hierarchy/models/gmm/family.py',
             'dt=ballistic.DT / ballistic.STEP_CHECK_FACTOR ** level,',
             'dt=ballistic.DT,',
             ['tests/test_summary_certify.py::test_the_snr_inf_solve_is_checked_by_its_step_and_claims_no_less_than_its_error'],
             'the lambda = inf check re-runs the same step (checks nothing)'),
    mutation("unread-key-at-its-default-refused", "hierarchy/config/loader.py",
             "        if defaults is not None and _written(defaults, key) \\\n",
             "        if False and _written(defaults, key) \\\n",
             ["tests/test_input_network_r16.py::test_a_validated_config_validates_again_"
              "unchanged"],
             "a validated config (as result.json keeps it) refused when given again"),
    mutation("trainable-repeats-counted-quadratically", "hierarchy/models/attention/config.py",
             "    repeated = sorted(i for i, times in seen.items() if times > 1)",
             "    repeated = sorted({i for i in trainable if trainable.count(i) > 1})",
             ["tests/test_input_attention_r16.py::test_a_long_trainable_list_is_refused_in_"
              "linear_time"],
             "a 150,000-entry trainable list takes 25 s to be refused"),
    mutation("summary-floor-check-certifies", "hierarchy/ode/default_job.py",
             "    floor = check.floor(promotion.level)\n", "    floor = None\n",
             ["tests/test_summary_certify.py::test_a_solve_at_the_rtol_floor_is_not_certified_"
              "by_a_check_at_the_same_rtol"],
             "rtol = 1e-13 certified by a check at the same rtol, 24 times off"),
    mutation("network-floor-check-certifies", "hierarchy/models/network/family.py",
             '    checks.unchecked = at_the_floor(config["solve"], checks.level)\n', "",
             ["tests/test_summary_certify.py::test_a_network_solve_at_the_rtol_floor_is_not_"
              "certified"],
             "a network solve at the rtol floor certified by a check at the same rtol"),
    mutation("moments-words-capped-at-the-degree", "hierarchy/models/attention/config.py",
             "                          MAX_DEGREE_SCANNED)", "                          degree)",
             ["tests/test_input_attention_r16.py::test_a_moments_file_with_words_beyond_the_"
              "degree_is_accepted"],
             "a study's moments file with words above hierarchy.degree refused"),
    mutation("toml-long-integer-traceback", "hierarchy/config/documents.py",
             "    except ValueError as error:  # an integer of more than 4300 digits",
             "    except ArithmeticError as error:  # an integer of more than 4300 digits",
             ["tests/test_input_network_r16.py::test_a_toml_integer_of_5000_digits_is_one_line"],
             "a 5000-digit TOML integer is a traceback"),
    mutation("panel-margins-measured-once", "hierarchy/core/panel_margins.py",
             "PASSES = 3\n", "PASSES = 1\n",
             ["tests/test_panel_margins.py::test_ticks_the_locator_picks_after_the_resize_are_"
              "the_ones_measured"],
             "tick labels chosen after the resize are wider than those measured: clipped"),
    mutation("gmm-method-ignored-at-snr-inf", "hierarchy/models/gmm/family.py",
             "    if math.isinf(model.snr) and method != default:",
             "    if False:",
             ["tests/test_input_network_r16.py::test_a_method_at_snr_inf_is_refused_where_no_"
              "integrator_reads_it"],
             "method = BDF at snr = inf accepted while Heun-Filippov runs"),
    mutation("short-ladder-constants-unvouched", "hierarchy/core/extrapolation.py",
             "            if n >= 3:  # unless it stopped changing", "            if False:  # unless it stopped changing",
             ["tests/test_extrapolation.py::test_three_equal_degrees_are_settled_even_below_four_"
              "degrees"],
             "a fixed teacher's words unvouched on a three-degree ladder: shaded from t = 0"),
    mutation("network-square-root-eigenvectors", "hierarchy/models/network/quadrature.py",
             "[:, None, :]) @ np.swapaxes(vectors, -1, -2)", "[:, None, :])",
             ["tests/test_network_field.py::test_quadrature_fields_are_continuous_in_the_"
              "covariance_at_a_repeated_eigenvalue"],
             "the root V sqrt(w), which jumps with C at ties, for the symmetric V sqrt(w) V^T"),
    mutation("network-qmc-error-tripled", "hierarchy/models/network/quadrature.py",
             "return reps.std(axis=0, ddof=1) / np.sqrt(len(reps))",
             "return reps.std(axis=0, ddof=1) / np.sqrt(len(reps)) * 3",
             ["tests/test_error_estimates.py::test_qmc_standard_error_is_calibrated_against_"
              "relu_closed_forms"],
             "QMC standard error 3x too large"),
    # ---- round 17: a mixture's E[d nu] where the students' covariance is singular
    mutation("mixture-null-directions-dropped", "hierarchy/models/network/joint_field.py",
             "        out = out + derivative @ weights", "        out = out",
             ["tests/test_network_mixture_regression.py::test_the_field_is_continuous_where_the_students_become_dependent",
              "tests/test_network_mixture_regression.py::test_the_regression_and_the_mean_derivative_agree_where_both_apply"],
             "the regression's term along the near-null directions dropped (the old cut-off)"),
    mutation("mixture-mean-derivative-one-sided", "hierarchy/models/network/joint_field.py",
             "shifts = np.array([1.0, -1.0, 2.0, -2.0]) * step",
             "shifts = np.array([1.0, 0.0, 2.0, 0.0]) * step",
             ["tests/test_network_mixture_regression.py::test_the_regression_and_the_mean_derivative_agree_where_both_apply"],
             "the mean derivative's differences taken one-sided with the central formula"),
    mutation("mixture-mean-derivative-richardson-sign", "hierarchy/models/network/joint_field.py",
             "return ((4 * fine - coarse) / 3).T", "return ((4 * fine + coarse) / 3).T",
             ["tests/test_network_mixture_regression.py::test_the_mean_derivative_of_a_cubic_is_exact_and_bounded",
              "tests/test_network_mixture_regression.py::test_the_regression_and_the_mean_derivative_agree_where_both_apply"],
             "Richardson's combination with the wrong sign"),
    mutation("mixture-null-weights-transposed", "hierarchy/models/network/joint_field.py",
             "    weights = whitened[:, ~kept].T @ c[:K, K:]",
             "    weights = -(whitened[:, ~kept].T @ c[:K, K:])",
             ["tests/test_network_mixture_regression.py::test_the_regression_and_the_mean_derivative_agree_where_both_apply"],
             "the null directions' weights v . C_lambda,nu with the wrong sign"),
    # ---- round 17: the structured field where C is nearly singular
    mutation("structured-null-part-dropped", "hierarchy/models/network/structured.py",
             "            a = a + expectations.null_part", "            a = a",
             ["tests/test_network_structured_singular.py::test_the_regression_and_the_lifts_agree_where_both_apply",
              "tests/test_network_structured_singular.py::test_the_field_is_smooth_where_an_eigenvalue_crosses_a_cut_off"],
             "A's terms along the near-null eigenvectors of C dropped (the old cut-off)"),
    mutation("structured-explicit-inverse", "hierarchy/models/network/structured.py",
             "a = vectors @ ((vectors.T @ expectations.eta_b) / values[:, None])",
             "a = ((vectors / values) @ vectors.T) @ expectations.eta_b",
             ["tests/test_network_structured_singular.py::test_the_field_is_smooth_where_an_eigenvalue_crosses_a_cut_off"],
             "C^+ B by the explicit inverse (rounding eps / e in every entry of A)"),
    mutation("structured-lift-not-extrapolated", "hierarchy/models/network/structured.py",
             "terms.append((vector, 3 * h[0] - 3 * h[1] + h[2], error))",
             "terms.append((vector, h[0], error))",
             ["tests/test_network_structured_singular.py::test_the_regression_and_the_lifts_agree_where_both_apply"],
             "the lifted covariances' h taken at the first lift, not extrapolated to 0"),
    mutation("structured-lift-error-dropped", "hierarchy/models/network/structured.py",
             "error = np.abs(h[0] - 2 * h[1] + h[2]) + 7 * quadrature / (variance + delta)",
             "error = 0.0 * h[0]",
             ["tests/test_network_structured_singular.py::test_the_field_is_smooth_where_an_eigenvalue_crosses_a_cut_off",
              "tests/test_network_structured_singular.py::test_the_regression_and_the_lifts_agree_where_both_apply"],
             "the lifted term's stated error dropped"),
    # ---- round 17: the command's end
    mutation("end-process-kills-live-threads", "hierarchy/cli/main.py",
             "    if any(t is not threading.current_thread() and not t.daemon and t.is_alive()",
             "    if False and any(t is not threading.current_thread() and not t.daemon",
             ["tests/test_cli_process_end.py::test_a_live_thread_is_joined_by_the_usual_exit"],
             "os._exit with a non-daemon thread still running (a Dask worker killed)"),
    mutation("end-process-skips-atexit", "hierarchy/cli/main.py",
             "        atexit._run_exitfuncs()\n", "        pass\n",
             ["tests/test_cli_process_end.py::test_the_output_is_flushed_the_atexit_handlers_run_and_the_status_kept"],
             "os._exit without running the atexit handlers"),
    mutation("relu-psd-clip-in-absolute-units", "hierarchy/models/network/closed_forms.py",
             "    values, vectors = np.linalg.eigh(c / outer)", "    outer = 1.0 + 0.0 * outer\n"
             "    values, vectors = np.linalg.eigh(c / outer)",
             ["tests/test_network_small_student.py::test_the_clipping_keeps_a_tiny_fields_"
              "correlations"],
             "the relu closed forms' PSD clip in absolute units (a tiny student's correlations "
             "scrambled)"),
    mutation("factor-kinked-field-against-row-scale", "templates/_gauss_levels.c.j2",
             "floor_f = pass ? 1e-13 * C[f * d + f] : tol;", "floor_f = tol;",
             ["tests/test_network_dead_unit.py"],
             "a kinked field of tiny variance ended by the row's largest variance (a dead relu "
             "unit made a constant)"),
    mutation("relu-angle-determinant-rounded", "hierarchy/models/network/closed_forms.py",
             "    return (p1 - p2) + (e1 - e2)", "    return caa * cbb - cab * cab",
             ["tests/test_network_relu_ties.py::test_the_angle_is_that_of_the_given_numbers_near_a_tie"],
             "the relu forms' determinant of two rounded products (eps / t of the angle lost)"),
    mutation("relu-angle-from-rounded-rho-compiled", "templates/network_field.pyx.j2",
             "    return atan2(sqrt(det if det > 0.0 else 0.0), cab)",
             "    return atan2(sqrt(1.0 - (cab / sqrt(caa * cbb)) ** 2), cab / sqrt(caa * cbb))",
             ["tests/test_network_relu_ties.py::test_the_compiled_forms_agree_with_numpy_near_a_"
              "tie"],
             "the compiled relu forms' angle from a rounded rho (arccos), as before"),
    mutation("structured-split-in-absolute-units", "hierarchy/models/network/structured.py",
             "    scale = np.sqrt(np.where(diagonal > 0, diagonal, 1.0))\n    values, vectors",
             "    scale = np.ones_like(diagonal)\n    values, vectors",
             ["tests/test_network_structured_singular.py::test_a_dead_relu_unit_is_not_a_near_"
              "null_direction"],
             "the structured split in absolute units (a dead relu unit lifted, off by 6e-3)"),
    mutation("mixture-split-in-absolute-units", "hierarchy/models/network/joint_field.py",
             "    scale = np.sqrt(np.where(diagonal > 0, diagonal, 1.0))\n    variances, vectors",
             "    scale = np.ones_like(diagonal)\n    variances, vectors",
             ["tests/test_network_dead_unit.py::test_a_dead_relu_unit_in_a_mixture_is_not_a_"
              "near_null_direction"],
             "the mixture's regression split in absolute units (a dead relu unit shifted)"),
    mutation("kinked-ties-unstated-engine", "hierarchy/models/network/engine.py",
             "            c, [bool(self.kinked[i]) for i in ids], merged, values, errors)\n",
             "            c, [bool(self.kinked[i]) for i in ids], -np.ones_like(merged), values,"
             " errors)\n",
             ["tests/test_network_merged_fields.py::test_near_equal_relu_students_state_what_the_"
              "merge_drops"],
             "two nearly equal relu students merged by the factor, 1.1e-8 off under a stated 4e-10"),
    mutation("kinked-ties-unstated-joint", "hierarchy/models/network/joint.py",
             "            covariances, [bool(kinks) for kinks in self.spec.kinks], merged, values,"
             " errors)\n",
             "            covariances, [bool(kinks) for kinks in self.spec.kinks],"
             " -np.ones_like(merged), values, errors)\n",
             ["tests/test_network_merged_fields.py::test_near_equal_relu_students_state_what_the_"
              "merge_drops"],
             "the joint engine's merge of nearly equal relu students, 2.5e-10 off under 1.3e-11"),
    mutation("smooth-merge-unstated", "hierarchy/models/network/merged_fields.py",
             "    for steps in (True, False):\n", "    for steps in (True,):\n",
             ["tests/test_network_merged_fields.py::test_a_shrinking_student_beside_a_steep_"
              "one_states_what_the_merge_drops"],
             "a shrinking tanh student beside a steep one merged, 1.2e-11 off under 2e-13"),
    mutation("kinked-merge-measured-linearly", "hierarchy/models/network/merged_fields.py",
             "            scale = np.sqrt(r) / (np.sqrt(r + LIFT) - np.sqrt(r))\n",
             "            scale = r / LIFT\n",
             ["tests/test_network_merged_fields.py::test_near_equal_relu_students_state_what_"
              "the_merge_drops"],
             "a kinked merge's dropped part scaled as a smooth one's (O(v), not O(sqrt v))"),
    mutation("merged-residual-in-absolute-units", "templates/_gauss_levels.c.j2",
             "(kinked[f] ? C[f * d + f] : scale)", "scale",
             ["tests/test_network_merged_fields.py::test_merged_residuals_follow_the_"
              "determinant_ratio"],
             "the factor reports a kinked field's merged residual in the row's largest "
             "variance, not its own"),
    # ---- the check of an extrapolation against the one without the two newest degrees
    mutation("extrapolation-no-older-estimate-check", "hierarchy/core/extrapolation.py",
             "LEFT_OUT = (2,)", "LEFT_OUT = ()",
             ["tests/test_extrapolation.py::test_a_rate_of_period_three_is_caught_by_the_"
              "estimate_without_the_two_newest_terms",
              "tests/test_study_extrapolation.py::test_no_certified_point_of_the_long_study_is_"
              "ten_times_off_its_claim"],
             "a rate of period three certified 137 times off its claim"),
    mutation("extrapolation-older-estimate-uncapped", "hierarchy/core/extrapolation.py",
             "distance = np.fmin(np.abs(estimate - older), step)",
             "distance = np.abs(estimate - older)",
             ["tests/test_extrapolation.py::test_the_check_without_the_two_newest_terms_never_"
              "exceeds_the_last_step"],
             "an older estimate cruder than the last degree sets the error"),
    mutation("extrapolation-older-estimate-from-five-terms", "hierarchy/core/extrapolation.py",
             "MIN_OLDER_TERMS = 7", "MIN_OLDER_TERMS = 4",
             ["tests/test_extrapolation.py::test_the_check_without_the_two_newest_terms_never_"
              "exceeds_the_last_step",
              "tests/test_long_horizons.py::test_the_empty_config_is_valid"],
             "the default config's degrees 2..8 checked against a five-term estimate: beyond "
             "its horizon from t = 0.035"),
    # ---- the network form of a hand-built mixture (show --as-network): the TOML it prints
    mutation("toml-keys-never-quoted", "hierarchy/config/documents.py",
             'return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)',
             "return key",
             ["tests/test_as_network.py::test_toml_text_writes_infinities_and_dotted_keys"],
             "a statistics key Q1.1 written bare: TOML reads it as a dotted table"),
    # ---- an extrapolation's claim never below an earlier output time's
    mutation("extrapolation-claims-may-dip", "hierarchy/core/extrapolation.py",
             "    return estimate, _not_below_earlier(error)", "    return estimate, error",
             ["tests/test_extrapolation.py::test_a_claim_that_dips_at_one_time_is_raised_to_"
              "the_earlier_claims"],
             "q12 of the Figure 1 model on degrees 2..8 certified 31 times off its claim at "
             "t = 0.75"),
    mutation("extrapolation-claims-raised-by-infinities", "hierarchy/core/extrapolation.py",
             "floor = np.maximum.accumulate(np.where(finite, error, 0.0), axis=0)",
             "floor = np.maximum.accumulate(np.where(np.isnan(error), np.inf, error), axis=0)",
             ["tests/test_extrapolation.py::test_points_reached_by_fewer_than_four_degrees_give_"
              "the_last_value_unvouched",
              "tests/test_extrapolation.py::test_raising_claims_to_the_earlier_ones_never_moves_"
              "the_validity_horizon"],
             "a time too few degrees reached makes every later claim infinite"),
    mutation("extrapolation-settled-short-ladder-claims-zero", "hierarchy/core/extrapolation.py",
             "_input_floor(last[-1], last, rtol), np.inf)", "0.0, np.inf)",
             ["tests/test_extrapolation.py::test_three_equal_degrees_are_settled_even_below_"
              "four_degrees"],
             "a settled word of three degrees claimed exact: rounding errors over a claim of 0"),
    # ---- the trace moments' memo of half-products
    mutation("trace-memo-cleared-when-full", "hierarchy/models/attention/moments.py",
             "            memo.popitem(last=False)", "            memo.clear()",
             ["tests/test_trace_moments.py::test_the_least_recently_used_half_products_go_first"],
             "the old memo: cleared when full, three d x d products a long untied word"),
)


def check_edits(mutations, root):
    """``{name: message}`` for mutations whose snippets are missing or repeated in ``root``."""
    problems = {}
    for item in mutations:
        for edit in item.edits:
            path = Path(root) / edit.path
            text = path.read_text() if path.is_file() else None
            count = 0 if text is None else text.count(edit.original)
            if count != 1:
                where = "file missing" if text is None else (
                    "snippet not found" if count == 0 else f"snippet found {count} times")
                problems[item.name] = f"{edit.path}: {where} (the list drifted from the source)"
                break
    return problems


def make_copy(root, folder):
    """Copy the checkout into ``folder``; the templates also inside the copied package."""
    for name in COPIED:
        source = Path(root) / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=IGNORED)
        elif source.is_file():
            shutil.copy2(source, folder / name)
    shutil.copytree(Path(root) / "templates", folder / "hierarchy" / "templates", ignore=IGNORED)


def environment(copy, cache):
    """The environment of a test run in ``copy`` with its own kernel cache."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy) + os.pathsep + env.get("PYTHONPATH", "")
    env["HIERARCHY_GENERATED"] = str(cache)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def check_isolation(copy, env):
    """Raise unless the package and its templates are imported from ``copy``."""
    probe = ("import hierarchy, importlib.resources as r; print(hierarchy.__file__); "
             "print(r.files('hierarchy.templates') / 'gmm_field.pyx.j2')")
    out = subprocess.run([sys.executable, "-c", probe], cwd=copy, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    if not all(Path(p).resolve().is_relative_to(Path(copy).resolve()) for p in out):
        raise RuntimeError(f"the copy is not what gets imported: {out}")


def run_tests(copy, env, cache, tests, timeout):
    """``(passed, first failing test or reason)`` of one pytest run in the copy."""
    shutil.rmtree(Path(cache) / ".index", ignore_errors=True)
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "--no-header",
               "-p", "no:cacheprovider", *tests]
    try:
        done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout} s"
    if done.returncode == 0:
        return True, ""
    if done.returncode == 5:   # nothing collected (e.g. only `slow` tests): no test vouched
        return None, "no test collected by the selection"
    found = re.search(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.MULTILINE)
    if found:
        return False, found.group(1)
    tail = (done.stdout + done.stderr).strip().splitlines()
    return False, f"pytest exit {done.returncode}: {tail[-1] if tail else 'no output'}"


def apply(copy, item):
    """Apply ``item`` to the copy; return the original texts to restore."""
    saved = {}
    for edit in item.edits:
        targets = [edit.path]
        if edit.path.startswith("templates/"):   # the copy imports the package's templates
            targets.append("hierarchy/" + edit.path)
        for relative in targets:
            path = copy / relative
            text = path.read_text()
            saved.setdefault(relative, text)
            path.write_text(text.replace(edit.original, edit.new, 1))
    return saved


def restore(copy, saved):
    for relative, text in saved.items():
        (copy / relative).write_text(text)


def check(mutations, root=ROOT, timeout=TIMEOUT_S, out=print, baseline=True):
    """Run every mutation; print one line each and the summary. Returns ``(caught, total)``."""
    problems = check_edits(mutations, root)
    caught = 0
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as tmp:
        copy, cache = Path(tmp) / "repo", Path(tmp) / "kernels"
        copy.mkdir()
        cache.mkdir()
        make_copy(root, copy)
        env = environment(copy, cache)
        check_isolation(copy, env)
        runnable = [m for m in mutations if m.name not in problems]
        if baseline and runnable:
            selection = sorted({t for m in runnable for t in m.tests})
            ok, why = run_tests(copy, env, cache, selection, timeout * 2)
            if not ok:
                out(f"baseline: the unmutated tests fail ({why}); nothing can be vouched for")
                out(f"0 of {len(mutations)} caught")
                return 0, len(mutations)
        for item in mutations:
            if item.name in problems:
                out(f"{item.name}: ERROR {problems[item.name]}")
                continue
            start = time.perf_counter()
            saved = apply(copy, item)
            try:
                ok, why = run_tests(copy, env, cache, item.tests, timeout)
            finally:
                restore(copy, saved)
            seconds = time.perf_counter() - start
            if ok is False:
                caught += 1
                out(f"{item.name}: caught by {why} ({seconds:.0f} s)")
            else:
                reason = f" ({why})" if why else ""
                out(f"{item.name}: NOT caught{reason} ({seconds:.0f} s)")
    out(f"{caught} of {len(mutations)} caught")
    return caught, len(mutations)


def describe(item):
    """The ``--list`` lines of one mutation."""
    lines = [f"{item.name}: {item.description}"]
    for edit in item.edits:
        lines.append(f"    {edit.path}: {edit.original!r} -> {edit.new!r}")
    lines.append(f"    tests: {' '.join(item.tests)}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the mutations only")
    parser.add_argument("-k", dest="select", default="",
                        help="only the mutations whose name contains this text (several texts "
                             "separated by commas: any of them)")
    parser.add_argument("--timeout", type=int, default=TIMEOUT_S,
                        help="seconds per test run (default %(default)s)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if any(text in m.name for text in args.select.split(","))]
    if not chosen:
        print(f"-k: no mutation name contains {args.select!r}", file=sys.stderr)
        return 2
    if args.list:
        for item in chosen:
            print(describe(item))
        print(f"{len(chosen)} mutations")
        return 0
    start = time.perf_counter()
    caught, total = check(chosen, timeout=args.timeout)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0 if caught == total else 1


if __name__ == "__main__":
    sys.exit(main())
