"""Online SGD for any model family.

- :mod:`hierarchy.sgd.simulate`: the stepping loop of one seed (:func:`simulate`) and the
  protocol a family's SGD problem follows;
- :mod:`hierarchy.sgd.engines`: the engines (compiled, numpy) and the choice between them;
- :mod:`hierarchy.sgd.divergence`: when a run has diverged;
- :mod:`hierarchy.sgd.job`: ``hierarchy sgd``, every seed of a config and its result files.

The family-specific steps live with the family (attention:
:mod:`hierarchy.models.attention.sgd_problem`).
"""
