"""Pieces every backend shares: source translation, rebinding, access analysis, lane tiles."""
