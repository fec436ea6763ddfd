"""The CUDA knowledge base: typed, cached accessors over the TOML tables shipped as cudaresolve.data.

One module per table (toolkits, gpus, torch, cupy, components, advisories, wheel_facts, toolkit_pins,
compilers, compiler_users, own_runtime); `files` reads a data file and checks its provenance. Facts live in
data/*.toml next to their sources and confidence (docs/data.md), so a wrong fact is fixed in the data, never here. Every accessor returns frozen
dataclasses or tuples, so results can be compared and used as dict keys.
"""
