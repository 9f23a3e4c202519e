"""hierarchy.jit."""
