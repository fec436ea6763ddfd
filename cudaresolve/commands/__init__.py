"""The command line's face: `parser` builds argparse's parser; one module per command (`probe`,
`inspect`, `doctor`, `lock`, `install`, `pip`, `why`) turns the parsed options into typed inputs
(`options`: hosts, index settings, a lock's LockInputs) and calls one function of the pipeline,
then hands the answer to output/. Each use case's I/O edge is here, side by side: `diagnosing` (the
doctor's scan and judgement) with `result_cache` (whole doctor results), and `locking` (for the
three that lock). Each `run` returns an exit
code of errors.Exit; cli.main prints any error as one line.

May import any room: this is the edge where the environment, the terminal and the files meet the
pipeline. Nothing below imports it.
"""
