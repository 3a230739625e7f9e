#!/bin/bash
# scripts/lab/guest/suite.sh OUT REPO BIN TESTBIN FILTER TIMEOUT [HANG_GUARD [ONLY_AS_ROOT]]
#
# Runs inside a lab machine (the VM, or a container in it) as the user under test, and writes
# into OUT (a folder, created if missing):
#   facts.txt                  who and where (uid, kernel, cgroup fs, AppArmor label, seccomp)
#   version.{txt,rc}           `acp-bash --version`: does the binary run at all
#   doctor.{txt,rc}            `acp-bash doctor`
#   run.{txt,rc}               one sandboxed command through `acp-bash run`
#   list.txt                   the test binary's tests under FILTER (`--list`; FILTER is one
#                              argument, a space-separated list of libtest filters)
#   tests-MODULE.{txt,rc,secs} the test binary's run of the tests of each module that FILTER
#                              selects (TIMEOUT each), and its wall time
# BIN is the served binary the tests start (ACP_BASH_TEST_AGENT_BINARY: the release build in
# `lab ci`, not necessarily the one TESTBIN was built with).
# HANG_GUARD (seconds, default 60) becomes the tests' ACPBASH_HANG_GUARD_SECS: how long a test
# waits before it calls a run hung (the lab stretches it under QEMU's TCG).
# Every command runs under `timeout`; a command killed by it gets rc 124 (or 137 after the
# second signal), which the report shows as HANGS. Nothing here waits without a bound.
set -u
# ONLY_AS_ROOT=1: tests that run as root skip their copy as `nobody` (ACPBASH_ONLY_AS_ROOT,
# tests/it/support/sandbox.rs), where the ordinary user is a setting of its own
out=$1 repo=$2 bin=$3 testbin=$4 filter=$5 tmo=$6 guard=${7:-60} only_as_root=${8:-0}
mkdir -p "$out" || exit 2
work=$(mktemp -d /tmp/acp-bash-lab.XXXXXX) || exit 2
cd "$work" || exit 2

bounded() { # bounded NAME SECONDS CMD...: stdout+stderr to OUT/NAME.txt, exit code to OUT/NAME.rc
  local name=$1 secs=$2; shift 2
  timeout -k 10 "$secs" "$@" > "$out/$name.txt" 2>&1 < /dev/null
  echo $? > "$out/$name.rc"
}

{
  echo "id: $(id)"
  echo "kernel: $(uname -r)"
  echo "os: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}")"
  echo "cgroup fs: $(stat -fc %T /sys/fs/cgroup 2>/dev/null)"
  echo "own cgroup: $(tr '\n' ' ' < /proc/self/cgroup)"
  echo "apparmor label: $(cat /proc/self/attr/apparmor/current 2>/dev/null || cat /proc/self/attr/current 2>/dev/null || echo '?')"
  echo "uid_map: $(tr -s ' \n' ' ' < /proc/self/uid_map)"
  grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status
  echo "XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR-<unset>}"
} > "$out/facts.txt" 2>&1

bounded version 60 "$bin" --version
bounded doctor 120 "$bin" doctor
bounded run 60 "$bin" run -- 'echo lab-run-ok; id -u'
read -r -a filters <<< "$filter"
bounded list 60 "$testbin" --list "${filters[@]}"

# The tests, one run per module (`sandbox::view`, …; only the tests FILTER selected there, by
# their exact names) so that a test that hangs hides no other module's results: skipped tests are listed (not required: the table says what doctor found),
# snapshots are never written, the skip list goes to OUT. When a plain command hangs, every test
# would hang until TIMEOUT: that is recorded as such without spending it.
# a test's module: its first two path segments (`sandbox::view`), or its first where it has only
# two (`permit::doctor_lists_what_is_allowed_always` is in `permit`; report.py groups the same)
grouped=$(awk '/: test$/ { name = substr($0, 1, length($0) - 6); n = split(name, p, "::");
  print (n > 2 ? p[1] "::" p[2] : p[1]) "\t" name }' "$out/list.txt")
modules=$(cut -f1 <<< "$grouped" | sort -u)
for m in $modules; do
  if [[ $(cat "$out/run.rc") == 124 || $(cat "$out/run.rc") == 137 ]]; then
    echo "not run: \`acp-bash run\` hangs here (run.txt), so every test would" > "$out/tests-$m.txt"
    echo 124 > "$out/tests-$m.rc"
    continue
  fi
  mapfile -t names < <(awk -F'\t' -v m="$m" '$1 == m { print $2 }' <<< "$grouped")
  t0=$SECONDS
  ( cd "$repo" && ACPBASH_SKIP_LOG="$out/skipped.txt" INSTA_UPDATE=no RUST_BACKTRACE=0 \
      ACPBASH_HANG_GUARD_SECS="$guard" ACPBASH_ONLY_AS_ROOT="$only_as_root" \
      ACP_BASH_TEST_AGENT_BINARY="$bin" \
      timeout -k 10 "$tmo" "$testbin" --exact "${names[@]}" --test-threads=2 ) > "$out/tests-$m.txt" 2>&1 < /dev/null
  echo $? > "$out/tests-$m.rc"
  echo $((SECONDS - t0)) > "$out/tests-$m.secs"
done
cd / && rm -rf "$work"
exit 0
