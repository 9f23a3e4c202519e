"""The ``network`` family: two-layer networks (soft committee machines) seen through their
order parameters ``Q``, ``R`` (and ``v``), with the ODE derived, not hand-written.

Modules, one idea each:

- :mod:`.model` config tables -> :class:`~.model.Network`, validation, the state labels;
- :mod:`.activations` the activation and loss tables (sympy);
- :mod:`.gradients` the per-sample derivatives (sympy and numpy), shared by ODE and SGD;
- :mod:`.derivation` the drift and corrector as expectations, expanded into a term table;
- :mod:`.closed_forms` the Gaussian expectations with closed forms (erf, relu, Wick);
- :mod:`.quadrature` Gauss-Hermite and QMC quadrature, with its error;
- :mod:`.kernel` the compiled term-table field (``templates/network_field.pyx.j2``);
- :mod:`.field` the System (labels, index, rhs, eg, drift and corrector);
- :mod:`.display` ``hierarchy show --config`` as text or latex;
- :mod:`.family` the :class:`~hierarchy.models.base.ModelFamily` instance ``NETWORK``.
"""
