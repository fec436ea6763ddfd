"""Does this build run on this host? One pure function per rule (rules.py) over a build's facts and a
host, each returning one frozen record (records.py) or None. The doctor wraps a verdict in a finding
(checks/), the resolver in a rejection (resolve/), `lock --check` calls the same rules as the lock,
and output/verdicts.py words each record once for all three.

May import: the value types (arch, versions), compat, host facts and knowledge/; nothing that
judges an environment or a lock.
"""
