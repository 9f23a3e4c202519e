"""``python -m hierarchy``: the same command line as the ``hierarchy`` script."""
from .cli import main

raise SystemExit(main())
