"""The model families: :mod:`~hierarchy.models.base` states the contract
(:class:`~hierarchy.models.base.ModelFamily`); each family is one folder, registered by one
line in :data:`hierarchy.core.registry.FAMILIES`:

- :mod:`~hierarchy.models.attention`: attention-indexed models (tied, untied, direct);
- :mod:`~hierarchy.models.summary`: spiked PCA (summary-statistics effective dynamics);
- :mod:`~hierarchy.models.gmm`: the binary and XOR Gaussian-mixture classifiers.
"""
