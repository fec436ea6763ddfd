"""cudaresolve: read the truth about a CUDA host and its wheels, then resolve against it."""

__version__ = "0.1.0"
