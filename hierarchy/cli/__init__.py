"""hierarchy.cli.main."""
