"""The embedded simulator: an in-memory cluster driven by the same core as the operator."""
