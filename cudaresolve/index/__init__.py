"""Package index access: what the indexes pip would use offer, and the core metadata and binary
facts of wheels, read without installing them (and, where the index allows, without downloading them).

One concept per module: `config` (which indexes, as the target's pip sees them), `http` (one
session, retries, the transport policy), `limits` (every bound on what an index sends), `cache`
(what was fetched, keyed so it is never fetched twice, checked when read back), `pages` (project pages: files, hashes, yanked, requires-python), `tags` (which wheels fit
the target), `metadata` (core metadata: PEP 658, range reads, full download), `wheel_facts` (ELF
facts of a wheel: the knowledge table, else the wheel itself).
"""
