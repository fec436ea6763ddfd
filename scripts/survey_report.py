"""The survey's figures and its list of wrong errors, from the labelled results (not part of CI)."""

from __future__ import annotations

from collections import Counter

from survey_oracles import failure_kind

# The checks whose error says a library cannot load: what a failing import proves.
LOADING = {"missing-library", "symbol-skew", "torch-abi", "plugin-host", "build-floor", "mixed-majors"}


def render(results: list[dict], chosen: dict, hosts: list[str]) -> str:
    installed = [r for r in results if r["installed"]]
    for r in installed:  # labels kept from an earlier rule: the failure's kind by today's rule (its text)
        for records in r["imports"].values():
            for record in records.values():
                kind = failure_kind(record["error"], [])
                if record.get("kind") == "python" and kind == "native":
                    record["kind"] = "native"
                    for cell in r["cells"]:
                        cell["healthy"], cell["healthy_why"] = False, "an import fails to load a shared object"
                elif record.get("kind") == "native" and kind == "no-gpu":
                    record["kind"] = "no-gpu"
    lines = [f"ranked list sha256 {chosen['sha256']}; {len(chosen['chosen'])} chosen of {chosen['asked']} asked",
             f"stacks: {len(results)} ({len(installed)} installed); hosts: {', '.join(hosts)}", ""]
    lines += ["| stack | " + " | ".join(hosts) + " |", "|---|" + "---|" * len(hosts)]
    for r in results:
        if not r["installed"]:
            lines.append(f"| {r['stack']['name']} | not installed: {r['why'][:120]} |")
            continue
        cells = []
        for cell in r["cells"]:
            c = cell["counts"] or {}
            mark = "H" if cell["healthy"] else "U"
            cells.append(f"{cell['exit']} ({c.get('error', '?')}e {c.get('warning', '?')}w) {mark}")
        lines.append(f"| {r['stack']['name']} | " + " | ".join(cells) + " |")
    errors = [(r["stack"]["name"], cell["host"], f) for r in installed for cell in r["cells"] for f in cell["findings"]
              if f["severity"] == "error"]
    by_row = Counter(f["label"] for _, _, f in errors)
    distinct: dict[tuple[str, str, str], set[str]] = {}
    for stack, _, f in errors:
        distinct.setdefault((stack, f["check"], f["subject"]), set()).add(f["label"])

    def worst(labels: set[str]) -> str:
        return "wrong" if "wrong" in labels else "needs-a-look" if "needs-a-look" in labels else "right"

    by_distinct = Counter(worst(labels) for labels in distinct.values())
    cells = [(r["stack"]["name"], cell) for r in installed for cell in r["cells"]]
    healthy_exit2 = [(s, c["host"]) for s, c in cells if c["healthy"] and c["exit"] == 2]
    failures = [(r["stack"]["name"], d, m, rec["error"]) for r in installed for d, mods in r["imports"].items()
                for m, rec in mods.items() if rec.get("kind") == "native"]
    others = [(r["stack"]["name"], d, m, rec["error"], rec.get("kind")) for r in installed for d, mods in r["imports"].items()
              for m, rec in mods.items() if rec.get("kind") in ("no-gpu", "python")]
    found = []  # per failing (stack, module) and host: an error of a loading check on its distribution
    for stack, dist, _module, _ in failures:
        result = next(r for r in installed if r["stack"]["name"] == stack)
        found.append([any(f["severity"] == "error" and f["check"] in LOADING and f["subject"].split(" ")[0] == dist
                          for f in cell["findings"]) for cell in result["cells"]])

    def ratio(a: int, b: int) -> str:
        return f"{a}/{b} = {a / b:.2f}" if b else f"{a}/0"

    warnings = Counter(f["label"] for r in installed for c in r["cells"] for f in c["findings"] if f["severity"] == "warning")
    lines += ["", "| figure | value |", "|---|---|",
              f"| stack × host cells | {len(cells)} |",
              f"| cells exit 0 / 1 / 2 / 3 | {' / '.join(str(sum(1 for _, c in cells if c['exit'] == e)) for e in (0, 1, 2, 3))} |",
              f"| healthy cells (oracles) | {sum(1 for _, c in cells if c['healthy'])} |",
              f"| healthy cells that exit 2 | {len(healthy_exit2)} |",
              f"| error rows right / wrong / needs-a-look | {by_row['right']} / {by_row['wrong']} / {by_row['needs-a-look']} |",
              f"| precision of errors, by row (right / (right + wrong)) | {ratio(by_row['right'], by_row['right'] + by_row['wrong'])} |",
              f"| distinct errors (stack, check, subject) right / wrong / needs-a-look | {by_distinct['right']} / {by_distinct['wrong']} / {by_distinct['needs-a-look']} |",
              f"| precision of errors, distinct | {ratio(by_distinct['right'], by_distinct['right'] + by_distinct['wrong'])} |",
              f"| import failures of a shared object shown by the oracle (stack, module) | {len(failures)} |",
              f"| imports failing only for want of a GPU / at Python level (not counted) | "
              f"{sum(1 for o in others if o[4] == 'no-gpu')} / {sum(1 for o in others if o[4] == 'python')} |",
              f"| recall: (failure, host) cells with a loading error on its distribution | "
              f"{ratio(sum(map(sum, found)), sum(map(len, found)))} |",
              f"| warning rows right / wrong / needs-a-look | {warnings['right']} / {warnings['wrong']} / {warnings['needs-a-look']} |",
              ""]
    lines += ["Healthy cells that exit 2:", *[f"- {s} on {h}" for s, h in healthy_exit2], ""]
    lines += ["Import failures (oracle):", *[f"- {s}: import {m} ({d}): {e[:200]} — {sum(hit)} of {len(hit)} hosts reported"
                                           for (s, d, m, e), hit in zip(failures, found)], ""]
    lines += ["Imports that fail for want of a GPU, or at Python level (not counted):",
              *[f"- {s}: import {m} ({d}), {k}: {e[:160]}" for s, d, m, e, k in others], ""]
    lines += ["Wrong errors (distinct (stack, check, subject); first host's evidence):"]
    shown = set()
    for stack, _host, f in errors:
        key = (stack, f["check"], f["subject"])
        if f["label"] == "wrong" and key not in shown:
            shown.add(key)
            hosts_of = sorted({h for s, h, g in errors if (s, g["check"], g["subject"]) == key and g["label"] == "wrong"})
            lines.append(f"- {stack} | {f['check']} | {f['subject']} | hosts {', '.join(hosts_of)} | {f['message'][:200]} | "
                         f"oracle: {f['evidence'][:200]}")
    lines += ["", "Needs a look (distinct errors):"]
    shown = set()
    for stack, _host, f in errors:
        key = (stack, f["check"], f["subject"])
        if f["label"] == "needs-a-look" and key not in shown:
            shown.add(key)
            lines.append(f"- {stack} | {f['check']} | {f['subject']} | {f['message'][:160]} | {f['evidence'][:120]}")
    return "\n".join(lines) + "\n"
