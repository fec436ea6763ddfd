"""Choosing variants for a host: the resolvelib provider, candidates and locks (roadmap step 2)."""
