"""hierarchy.models."""
