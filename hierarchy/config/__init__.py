"""Configuration files: :mod:`~hierarchy.config.loader` (load, merge, validate; the entry
point), :mod:`~hierarchy.config.shared` (the ``[solve]`` output times and integrator every
family shares; the rest is the family's), :mod:`~hierarchy.config.documents` (TOML reading, merging, key names),
:mod:`~hierarchy.config.fields` (typed field readers) and :mod:`~hierarchy.config.reference`
(``docs/config.md``)."""
