"""Other tools cudaresolve works through or inside: the target's own pip (`pip`: run, never
imported) and the conda plugin (`conda`: loaded by conda only).

May import: env/, index/config, bounded, and for the plugin the command line (cli.main) and its
edge (commands/host_options, commands/result_cache); nothing below imports them.
"""
