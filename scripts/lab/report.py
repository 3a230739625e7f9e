#!/usr/bin/env python3
"""scripts/lab/report.py RESULTS EXPECTED [--check | --write-expected]

Reads what scripts/lab/guest/suite.sh left in RESULTS/<setting>/ and prints the layer x setting
table. Cells: holds, missing, HANGS (killed by the lab's timeout), fails, - (not observed).

Rows:
- "binary runs": `acp-bash --version` exits 0.
- "a command runs": `acp-bash run -- 'echo …'` prints its output and exits 0.
- one row per layer `acp-bash doctor` prints ([works] -> holds, [missing] -> missing), and
  "per-session zygote" (doctor's "Per-session sandbox: in use"),
  and "network allowlist (workspace mode)" (its "Network in workspace mode" section: [holds] or
  [missing]; "-" where doctor prints none, as with --network full).
- "tests: <module>": the integration tests of that module, run in that setting: holds when every
  one passed (a test that skips for lack of a layer passes; the skip count is shown under the
  table: "holds" with most tests skipped proves little more than "no hang"), fails when
  any failed, HANGS when any had not finished when the lab's timeout killed the run.

--check compares with EXPECTED (setting<TAB>row<TAB>cell lines; cell `flaky` accepts holds and
fails) and exits 1 when a cell expected
to hold does not, when a cell now HANGS that was not expected to, or when an expected row or
setting was not observed at all. Cells better than expected are listed, not failed: update the file.
--write-expected rewrites EXPECTED from these results (review the diff before committing it).
"""

import os
import re
import sys

HANG_CODES = {"124", "137"}


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def cmd_cell(d, name, ok=lambda text: True):
    rc = read(os.path.join(d, name + ".rc")).strip()
    if rc == "":
        return "-"
    if rc in HANG_CODES:
        return "HANGS"
    return "holds" if rc == "0" and ok(read(os.path.join(d, name + ".txt"))) else "fails"


LAYER = re.compile(r"^  \[(works|missing)\] +([^(:]*[^(: ])")
# doctor's "Network in workspace mode:" section: the allowlist's state, one row
ALLOWLIST = re.compile(r"^  \[(holds|missing)\] ")
ALLOWLIST_ROW = "network allowlist (workspace mode)"


def setting_rows(d):
    rows = {}
    notes = {}
    rows["binary runs"] = cmd_cell(d, "version")
    # ubuntu-profile-user: doctor's AppArmor advice under Ubuntu's restriction, followed as
    # written (guest/ubuntu-profile.sh); without it the suite would prove nothing about it
    profile = read(os.path.join(d, "ubuntu-profile.txt"), None)
    if profile is not None:
        rows["doctor's AppArmor profile, installed as written"] = (
            "holds" if profile.rstrip().endswith("every step held") else "fails"
        )
    # ubuntu-kernel-*: Ubuntu 24.04's own kernel with its restriction on (guest/ubuntu-kernel.sh):
    # `unshare -U` made, `unshare -Ur` refused at the uid_map write, as dev
    restricted = read(os.path.join(d, "ubuntu-kernel.txt"), None)
    if restricted is not None:
        rows["Ubuntu's restriction, by Ubuntu's kernel"] = (
            "holds" if restricted.rstrip().endswith("Ubuntu's restriction is on") else "fails"
        )
    rows["a command runs"] = cmd_cell(d, "run", lambda t: "lab-run-ok" in t)
    doctor_rc = read(os.path.join(d, "doctor.rc")).strip()
    doctor = read(os.path.join(d, "doctor.txt"))
    if doctor_rc in HANG_CODES:
        rows["doctor"] = "HANGS"
    elif doctor_rc == "":
        rows["doctor"] = "-"
    else:
        rows["doctor"] = "holds" if "sandbox layers on this machine" in doctor else "fails"
        section = ""
        for line in doctor.splitlines():
            if line and not line.startswith(" "):
                section = line
            if section.startswith("Network in workspace mode"):
                # its own row, whichever way doctor words it ([holds] the proxy's rules, or
                # [missing] "the allowlist is not enforced here: why")
                m = ALLOWLIST.match(line)
                if m:
                    rows[ALLOWLIST_ROW] = "holds" if m.group(1) == "holds" else "missing"
                continue
            m = LAYER.match(line)
            if m:
                rows[m.group(2)] = "holds" if m.group(1) == "works" else "missing"
        if "Per-session sandbox:" in doctor:
            rows["per-session zygote"] = (
                "missing" if "Per-session sandbox: not in use" in doctor else "holds"
            )

    listed = [
        line[: -len(": test")]
        for line in read(os.path.join(d, "list.txt")).splitlines()
        if line.endswith(": test")
    ]
    results = {}
    module_rc = {}
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        m = re.match(r"tests(?:-(.+))?\.txt$", f)
        if not m:
            continue
        if m.group(1):
            module_rc[m.group(1)] = read(os.path.join(d, f"tests-{m.group(1)}.rc")).strip()
        text = read(os.path.join(d, f))
        for t in re.finditer(r"^test (\S+) \.\.\. (ok|FAILED|ignored)", text, re.M):
            results[t.group(1)] = t.group(2)
    skipped = read(os.path.join(d, "skipped.txt"))
    modules = {}
    for name in listed:
        parts = name.split("::")  # as suite.sh groups them
        modules.setdefault("::".join(parts[:2]) if len(parts) > 2 else parts[0], []).append(name)
    for module, names in sorted(modules.items()):
        failed = [n for n in names if results.get(n) == "FAILED"]
        unfinished = [n for n in names if n not in results]
        skips = sum(1 for n in names if n in skipped)
        row = "tests: " + module
        # (one run for every module: what suite.sh wrote before it ran them one by one)
        tests_rc = module_rc.get(module, read(os.path.join(d, "tests.rc")).strip())
        if tests_rc == "" and not any(n in results for n in names):
            rows[row] = "-"  # not run (a partial run): not observed
            continue
        if tests_rc == "":  # cut while it ran (a partial run): what it showed until then
            rows[row] = "fails" if failed else "-"
            passed = sum(1 for n in names if results.get(n) == "ok")
            notes[row] = f"cut: {passed} passed, {len(failed)} failed, {len(unfinished)} not reached"
            continue
        if unfinished and tests_rc in HANG_CODES:
            rows[row] = "HANGS"
            notes[row] = f"{len(unfinished)}/{len(names)} unfinished"
        elif failed or unfinished:
            rows[row] = "fails"
            notes[row] = f"{len(failed)}/{len(names)} failed" + (
                f", {len(unfinished)} without a result" if unfinished else ""
            )
        else:
            rows[row] = "holds"
            notes[row] = f"{len(names)} passed" + (f", {skips} skipped" if skips else "")
    if not listed:
        rows["tests"] = "HANGS" if read(os.path.join(d, "list.rc")).strip() in HANG_CODES else "fails"
    return rows, notes


def load_expected(path):
    expected = {}
    for line in read(path).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        setting, row, cell = line.split("\t")
        expected[(setting, row)] = cell
    return expected


def main():
    results, expected_path = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    settings = sorted(
        s for s in os.listdir(results) if os.path.isdir(os.path.join(results, s))
    ) if os.path.isdir(results) else []
    observed = {}
    notes = {}
    order = []
    for s in settings:
        rows, n = setting_rows(os.path.join(results, s))
        for row, cell in rows.items():
            observed[(s, row)] = cell
            if row not in order:
                order.append(row)
        for row, note in n.items():
            notes[(s, row)] = note
    expected = load_expected(expected_path)
    # LAB_SETTINGS (space-separated): check only those settings' rows (`lab ci-host`).
    only = os.environ.get("LAB_SETTINGS", "").split()
    if only:
        expected = {k: v for k, v in expected.items() if k[0] in only}
    if mode == "--check":
        for (s, row) in expected:
            if row not in order:
                order.append(row)
        for s in sorted({s for (s, _) in expected}):
            if s not in settings:
                settings.append(s)

    width = max([len(r) for r in order] + [5])
    cw = max([len(s) for s in settings] + [8])
    print(f"{'layer / test module':<{width}}  " + "  ".join(f"{s:<{cw}}" for s in settings))
    for row in order:
        cells = []
        for s in settings:
            cell = observed.get((s, row), "-")
            exp = expected.get((s, row))
            mark = "" if exp is None or exp == cell else f" (exp {exp})"
            cells.append(f"{cell + mark:<{cw}}")
        print(f"{row:<{width}}  " + "  ".join(cells))
    print()
    for s in settings:
        info = read(os.path.join(results, s, "setting.txt")).split("\n")[0]
        detail = "; ".join(
            f"{row[len('tests: '):]}: {notes[(s2, row)]}"
            for (s2, row) in sorted(notes)
            if s2 == s and (observed.get((s2, row)) != "holds" or "skipped" in notes[(s2, row)] or "cut" in notes[(s2, row)])
        )
        print(f"{s}: {info}" + (f"; {detail}" if detail else ""))

    if mode == "--write-expected":
        kept = load_expected(expected_path)
        observed_settings = {s for (s, _) in observed}
        with open(expected_path, "w", encoding="utf-8") as f:
            f.write(HEADER)
            f.write(
                f"# Observed with commit {os.environ.get('LAB_COMMIT', '?')}: what main shows today, known\n"
                "# bugs included:\n"
                "# cells that are not `holds` are today's state, not a goal.\n"
            )
            for s in settings:
                for row in order:
                    if observed.get((s, row), "-") != "-":
                        f.write(f"{s}\t{row}\t{observed[(s, row)]}\n")
            # the settings this run did not observe keep their lines (a run of some settings,
            # such as CI's under TCG, rewrites only theirs)
            for (s, row), cell in kept.items():
                if s not in observed_settings:
                    f.write(f"{s}\t{row}\t{cell}\n")
        print(f"\nwrote {expected_path}: review it with `git diff {expected_path}`")
        return 0
    if mode == "--check":
        bad, better = [], []
        for (s, row), exp in sorted(expected.items()):
            got = observed.get((s, row))
            if got is None:
                bad.append(f"{s} / {row}: expected {exp}, not observed at all")
            elif got == "-" and exp != "-":
                bad.append(f"{s} / {row}: expected {exp}, not observed")
            elif exp == "flaky":
                if got == "HANGS":
                    bad.append(f"{s} / {row}: HANGS (expected flaky)")
            elif exp == "holds" and got != "holds":
                bad.append(f"{s} / {row}: expected to hold, {got}")
            elif got == "HANGS" and exp != "HANGS":
                bad.append(f"{s} / {row}: HANGS (expected {exp})")
            elif got == "holds" and exp != "holds":
                better.append(f"{s} / {row}: holds (expected {exp})")
        new = [f"{s} / {r}: {c}" for (s, r), c in sorted(observed.items()) if (s, r) not in expected and c != "-"]
        # A setting nobody wrote expectations for, or a test module that fails where nothing was
        # expected, is a failure, never a line in a list: silence would let a new setting fail.
        expected_settings = {s for (s, _) in expected}
        for s in sorted({s for (s, _) in observed} - expected_settings):
            bad.append(f"{s}: observed, but expected.tsv has no row for it (scripts/lab/ci --update-expected)")
        for (s, r), c in sorted(observed.items()):
            if (s, r) not in expected and s in expected_settings and r.startswith("tests: ") and c not in ("holds", "-"):
                bad.append(f"{s} / {r}: {c}, and nothing was expected")
        for title, lines in (("better than expected", better), ("not in the expectations", new)):
            if lines:
                print(f"\n{title} (update {expected_path}: scripts/lab/ci --update-expected):")
                print("\n".join("  " + line for line in lines))
        if bad:
            print(f"\nPLATFORM LAB FAILED ({len(bad)}):")
            print("\n".join("  " + line for line in bad))
            print(f"results: {results}")
            return 1
        print("\nplatform lab: every expectation met")
    return 0


HEADER = """\
# The platform lab's expectations: setting<TAB>row<TAB>cell (holds / missing / HANGS / fails).
# scripts/lab/ci fails when a cell written here as `holds` does not hold, when a cell HANGS that
# is not written as HANGS, or when a setting or row written here is not observed. `flaky` (set by
# hand, with the reason in a comment) accepts holds or fails, never HANGS.
# Regenerate from a run (then review `git diff`): scripts/lab/ci --update-expected
"""

if __name__ == "__main__":
    sys.exit(main())
