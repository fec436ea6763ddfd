"""The lock files: one model (`model`), the grammar of its values (`fields`), PEP 751's pylock.toml
(`pylock`: the file-name rule, the writer and the validating reader), pip's constraints and hashed
requirements files (`pip`), and writing a command's files all together (`files`).

The resolver builds a `Lock`, this room reads and writes it, output/ renders it. It may import the
host facts (to validate a lock's hosts), errors and packaging; nothing of resolve/, output/ or the
command line.
"""
