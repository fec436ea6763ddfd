"""Other tools that consume cudaresolve facts: the conda plugin, the pip wrapper.

Each may import the commands' rooms below it (host/, env/, results, output/) and the CLI; nothing
below imports them.
"""
