"""The lock files: the grammar of a lock's values (`fields`), the resolver's records as tables and
back (`reasons`), every value of a Lock through its rule before writing (`check`), PEP 751's
pylock.toml (`pylock`: the file-name rule and the validating reader; `writer`), pip's constraints
and hashed requirements files (`pip`), and writing a command's files all together (`files`).

The resolver builds a `Lock` (cudaresolve/resolve/lock.py, its answer, with the records of
resolve/reasons.py), this room reads and writes it, output/ renders it and makes the words for
people that pylock.toml carries beside the records. It may import that model, the value types, the
host facts (to validate a lock's hosts), errors and packaging; nothing else of resolve/, nothing of
output/ or the command line.
"""
