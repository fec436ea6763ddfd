"""Other tools that consume cudaresolve facts: the conda plugin, wheel-variant providers (roadmap step 3)."""
