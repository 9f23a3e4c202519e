"""``python -m hierarchy``: the same command line as the ``hierarchy`` script."""
from hierarchy.cli.main import main  # light: the heavy imports happen inside main()

raise SystemExit(main())
