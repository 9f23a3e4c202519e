"""hierarchy.config.loader."""
