"""The knowledge tables (TOML), shipped inside the package as cudaresolve.data; read them through cudaresolve.knowledge."""
