"""The lock files: the grammar of a lock's values (`fields`), PEP 751's pylock.toml (`pylock`: the
file-name rule, the writer and the validating reader), pip's constraints and hashed requirements
files (`pip`), and writing a command's files all together (`files`).

The resolver builds a `Lock` (cudaresolve/resolve/lock.py, its answer), this room reads and writes
it, output/ renders it. It may import that model, the host facts (to validate a lock's hosts),
errors and packaging; nothing else of resolve/, nothing of output/ or the command line.
"""
