"""hierarchy.study.run."""
