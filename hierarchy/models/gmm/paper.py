"""Paper-as-printed forms where seed 001 disagrees with the derivation (contract E.1).

The package implements the derived forms; these records say what was printed instead.
"""

#: printed form -> derived form (the one implemented), with where it is used
PAPER_AS_PRINTED = {
    "binary-diffusive-drift": {
        "printed": "dv~_i = [alpha(m~_i - v~_i) + a_i (alpha - 2 alpha^2) S] dt + ...",
        "derived": "dv~_i = [alpha(m~_i - v~_i) - a_i alpha (1 - 2 alpha) S] dt + ...",
        "where": "hierarchy.models.gmm.diffusion.linear_drift (Prop. 4.3)"},
    "xor-diffusive-drift": {
        "printed": "f contains - a_i (alpha - 4 alpha^2) S (a + sign in the drift)",
        "derived": "drift - a_i alpha (1 - 4 alpha) S_group(i)",
        "where": "Prop. 5.3; the Jacobian of hierarchy.models.gmm.field"},
    "binary-mu-noise": {
        "printed": "Z_{1,mu}, Z_{2,mu} i.i.d.",
        "derived": "one shared zeta = <mu, Z> for both neurons",
        "where": "hierarchy.models.gmm.functionals (reduced law)"},
    "xor-fixed-point-constant": {
        "printed": "logit(-4 alpha)",
        "derived": "C_alpha = -logit(4 alpha) = log((1 - 4 alpha) / (4 alpha))",
        "where": "hierarchy.models.gmm.fixed_points.partition_sets (class sums)"},
    "xor-realisation": {
        "printed": "W3 = W4 = nu, v_i = c",
        "derived": "W3 = -W4 = nu and v3 = v4 = -c",
        "where": "Sec. 5 footnote (not used in code)"},
}
