#!/bin/bash
# scripts/lab/guest/ubuntu-profile.sh BIN OUT [reproduced|kernel] — run as root in the lab VM
# before the setting ubuntu-profile-user (reproduced, the default) or ubuntu-kernel-profile-user
# (kernel: Ubuntu 24.04's own kernel): does `acp-bash doctor`'s own advice for Ubuntu work, as written?
#   1. Ubuntu's restriction is reproduced on BIN (ubuntu-userns.sh), or turned on by Ubuntu's kernel
#      itself (ubuntu-kernel.sh), and `BIN doctor` runs as the desktop user dev: it must name the
#      restriction and print a profile and its install lines.
#   2. The reproduction is unloaded (the kernel's own restriction stays on, as on Ubuntu), and the
#      install lines doctor printed run verbatim (as root:
#      `sudo` is a function that runs its arguments), which writes and loads
#      /etc/apparmor.d/acp-bash for BIN's real path.
#   3. BIN must then run confined by that profile (its label `acp-bash`).
# The suite then runs as dev (lab run_setting); the lab unloads the profile afterwards.
# Why the reproduction cannot stay loaded beside the profile, and how this differs from Ubuntu:
# notes/2026-12-06-platform-lab.md ("Ubuntu's restriction").
# Writes OUT/ubuntu-profile.txt (what happened, step by step); exit 0 only when every step held.
set -euo pipefail
bin=${1:?usage: ubuntu-profile.sh BIN OUT [reproduced|kernel]} out=${2:?usage: ubuntu-profile.sh BIN OUT [reproduced|kernel]}
how=${3:-reproduced}
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
mkdir -p "$out"
log=$out/ubuntu-profile.txt
: > "$log"
note() { printf '%s\n' "$*" | tee -a "$log" >&2; }
fail() { note "FAILED: $*"; exit 1; }
real=$(readlink -f "$bin")

note "1. Ubuntu's restriction ($how) on $real; doctor as dev"
case $how in
  reproduced) bash "$here/ubuntu-userns.sh" "$real" >> "$log" 2>&1 || fail "could not reproduce the restriction" ;;
  kernel) bash "$here/ubuntu-kernel.sh" on "$out" >> "$log" 2>&1 || fail "could not turn Ubuntu's kernel's restriction on (ubuntu-kernel.txt)" ;;
  *) fail "unknown restriction $how" ;;
esac
doctor=$(runuser -u dev -- timeout 120 "$real" doctor 2>&1 || true)
printf '%s\n' "$doctor" > "$out/ubuntu-profile-doctor.txt"
if [[ $how == reproduced ]]; then
  apparmor_parser -R /etc/apparmor.d/acp-bash-lab-ubuntu-userns && rm -f /etc/apparmor.d/acp-bash-lab-ubuntu-userns
fi
grep -q "Ubuntu's AppArmor restriction" <<< "$doctor" || fail "doctor did not name Ubuntu's restriction (ubuntu-profile-doctor.txt)"
install=$(grep -E "^ *printf '%s\\\\n' .*\| sudo tee /etc/apparmor.d/acp-bash >/dev/null$" <<< "$doctor" | head -1)
load=$(grep -E "^ *sudo apparmor_parser -r /etc/apparmor.d/acp-bash$" <<< "$doctor" | head -1)
[[ -n $install && -n $load ]] || fail "doctor printed no install and load lines (ubuntu-profile-doctor.txt)"
note "doctor's lines:"; note "$install"; note "$load"

note "2. $([[ $how == reproduced ]] && echo 'the reproduction unloaded' || echo "the kernel's restriction still on"); doctor's lines run as written"
rm -f /etc/apparmor.d/acp-bash
bash -c 'sudo() { "$@"; }; eval "$1"; eval "$2"' _ "$install" "$load" >> "$log" 2>&1 || fail "doctor's lines failed"
cat /etc/apparmor.d/acp-bash >> "$log"

note "3. BIN runs confined by it"
grep -E '^acp-bash ' /sys/kernel/security/apparmor/profiles | tee -a "$log" >&2 || fail "no profile acp-bash loaded"
# the served agent's own label, as a client starts it (stdin a pipe that stays open)
label=$(runuser -u dev -- bash -c '
  sleep 60 | "$1" serve > /dev/null 2>&1 & pid=$!
  for _ in $(seq 100); do [[ $(readlink /proc/$pid/exe) == "$1" ]] && break; sleep 0.1; done
  cat /proc/$pid/attr/apparmor/current 2>/dev/null || cat /proc/$pid/attr/current
  kill $pid' _ "$real" 2>&1 || true)
note "the served agent's label: $label"
[[ $label == "acp-bash (unconfined)" ]] || fail "acp-bash serve does not run under its profile"
note "every step held"
