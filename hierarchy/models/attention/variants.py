"""The three attention-indexed parameterizations as data.

Everything that distinguishes tied ``S = W Wᵀ``, untied ``S = U Vᵀ`` and direct ``S`` is a
row of :data:`VARIANTS`; the modules of this family read it instead of comparing strings.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Variant:
    """One parameterization of the attention family.

    Attributes
    ----------
    name : str
        ``[model] parameterization`` value.
    letter_kinds : tuple of str
        Letter-name prefixes per index (tied ``""``; untied ``M, Mt, A, B``; direct
        ``S, St``).
    transposed_kind : tuple of int
        ``transposed_kind[c]`` is the kind of the transpose of a kind-``c`` letter.
    time_factor : float
        Hierarchy time per SGD step is ``time_factor · α / d`` (tied 4, else 1).
    time_variable : str
        Name of the hierarchy's time (``t``; untied ``tau``).
    matrices_per_index : int
        Model matrices per index (untied: the pair ``U_k, V_k``).
    """

    name: str
    letter_kinds: tuple
    transposed_kind: tuple
    time_factor: float
    time_variable: str
    matrices_per_index: int


VARIANTS = {
    "tied": Variant("tied", ("",), (0,), 4.0, "t", 1),
    "untied": Variant("untied", ("M", "Mt", "A", "B"), (1, 0, 2, 3), 1.0, "tau", 2),
    "direct": Variant("direct", ("S", "St"), (1, 0), 1.0, "t", 1),
}
PARAMETERIZATIONS = tuple(VARIANTS)
TIME_FACTOR = {name: v.time_factor for name, v in VARIANTS.items()}
TIME_VARIABLE = {name: v.time_variable for name, v in VARIANTS.items()}
