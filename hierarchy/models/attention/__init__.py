"""hierarchy.models.attention."""
