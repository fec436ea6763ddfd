"""Choosing versions and CUDA builds for one or more hosts: the requirements asked (`requirements`,
`inputs`), the candidates and what runs where (`candidates`, `fit`, `needs`, `conda`), the
resolvelib provider, the resolver that judges each set with the doctor's checks (`resolver`,
`planned`), and its answer as records (`lock`, `reasons`, `causes`); `check` and `plan` judge and
compare a lock. Pure logic over values: no file, terminal or environment variable is read here
beyond the index it is given.

May import: packaging, resolvelib, the value types, host facts, binary/, env/, checks/ (the judge),
index/, knowledge/. Nothing of lockfile/, output/, integrations/ or commands/.
"""
