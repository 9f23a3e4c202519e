"""hierarchy.ode."""
