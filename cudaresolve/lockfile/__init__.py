"""The lock files: one model (`model`) and its files (`pylock`: PEP 751's pylock.toml, pip's
constraints and hashed requirements files, and the PEP 751 file-name rule), and writing a
command's files all together (`files`).

The resolver builds a `Lock`, this room reads and writes it, output/ renders it. It may import the
host facts (to validate a lock's hosts), errors and packaging; nothing of resolve/, output/ or the
command line.
"""
