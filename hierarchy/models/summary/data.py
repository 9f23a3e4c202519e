"""Data laws: what the expectations of a loss need to know about the data.

The only law so far is the spiked tensor of seed 001, section 3 (contract B.1):
``Y = lambda v^{(x)k} + W`` with ``v`` a unit vector (``v = e_1`` in simulations) and ``W`` a
k-tensor of i.i.d. ``N(0, 1)`` entries, **not** symmetrised. Every loss of this family is
affine in the Gaussian field ``Z(x) = <Y, x^{(x)k}>``, whose law at fixed ``x`` depends on
``x`` only through ``m = <x, v>`` and ``q = |x|^2`` (the reduction lemma, A.7.3).
"""

import dataclasses

from hierarchy.models.summary.symbols import m, pairing, q, snr


@dataclasses.dataclass(frozen=True)
class SpikedTensor:
    """The spiked k-tensor law ``Y = lambda v^{(x)k} + W``.

    Parameters
    ----------
    order : int
        The tensor order ``k >= 2`` (``k = 2``: spiked matrix).
    """

    order: int

    def field_mean(self):
        """``E <Y, x^{(x)k}> = lambda <v, x>^k = lambda m^k``."""
        return snr * m**self.order

    def field_kernel(self):
        """``Cov(<W, x^{(x)k}>, <W, y^{(x)k}>) = <x^{(x)k}, y^{(x)k}> = s^k``, ``s = <x, y>``."""
        return pairing**self.order

    def power_norm(self):
        """``|x^{(x)k}|^2 = q^k``."""
        return q**self.order


#: ``[model] data`` value -> data law class
DATA_LAWS = {"spiked-tensor": SpikedTensor}
