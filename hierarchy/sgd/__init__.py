"""hierarchy.sgd.run."""
