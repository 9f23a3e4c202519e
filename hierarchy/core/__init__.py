"""hierarchy.core."""
