"""``python -m hierarchy``: the same command line as the ``hierarchy`` script."""
from hierarchy.cli.main import main

raise SystemExit(main())
