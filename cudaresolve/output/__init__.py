"""Rendering facts and findings for people (tables) and machines (JSON)."""
