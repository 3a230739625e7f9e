#!/bin/bash
# scripts/lab/guest/ubuntu-kernel.sh on OUT | off — run as root in the lab VM booted with Ubuntu
# 24.04's own kernel (lab start --variant kernels --kernel ubuntu2404): Ubuntu's unprivileged
# user-namespace restriction, by the kernel that implements it, not a reproduction of it.
#
# on:  as Ubuntu 24.04 ships it: the profile `unprivileged_userns` loaded in enforce mode (Debian
#      13's apparmor package ships the same profile, in complain mode) and the sysctl
#      kernel.apparmor_restrict_unprivileged_userns=1. Then, as the desktop user dev, proves it is
#      Ubuntu's restriction as users meet it: `unshare -U` succeeds (the kernel moves the task into
#      `unprivileged_userns`), and `unshare -Ur` fails one step later, at the uid_map write, with
#      EPERM. Writes OUT/ubuntu-kernel.txt; exit 0 only when both held.
# off: the sysctl back to 0 and Debian's own complain-mode profile reloaded.
set -euo pipefail
what=${1:?usage: ubuntu-kernel.sh on OUT | off}
sysctl=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
stock=/etc/apparmor.d/unprivileged_userns
ours=/etc/apparmor.d/acp-bash-lab-unprivileged-userns-enforced

if [[ $what == off ]]; then
  [[ -f $sysctl ]] && echo 0 > "$sysctl"
  if [[ -f $ours ]]; then rm -f "$ours"; apparmor_parser -r -W "$stock"; fi
  exit 0
fi
out=${2:?usage: ubuntu-kernel.sh on OUT}
mkdir -p "$out"
log=$out/ubuntu-kernel.txt
: > "$log"
note() { printf '%s\n' "$*" | tee -a "$log" >&2; }
fail() { note "FAILED: $*"; exit 1; }

note "kernel $(uname -r)"
[[ -f $sysctl ]] || fail "no $sysctl: this kernel has no Ubuntu restriction (boot ubuntu2404)"
[[ -f $stock ]] || fail "no $stock (apparmor >= 4.0 ships it)"
# `profile unprivileged_userns flags=(complain) {` -> `profile unprivileged_userns {`, as Ubuntu's
sed -E 's|^profile unprivileged_userns flags=\([^)]*\) \{|profile unprivileged_userns {|' "$stock" > "$ours"
grep -q '^profile unprivileged_userns {' "$ours" || fail "unexpected $stock: $(head -c 2000 "$stock")"
apparmor_parser -r -W "$ours"
grep -E '^unprivileged_userns ' /sys/kernel/security/apparmor/profiles | tee -a "$log" >&2
echo 1 > "$sysctl"
note "kernel.apparmor_restrict_unprivileged_userns = $(cat "$sysctl")"

# Ubuntu's two steps, as dev: the namespace is made; the uid_map write then fails
runuser -u dev -- unshare -U true >> "$log" 2>&1 || fail "as dev, unshare -U failed: the restriction refuses the namespace itself"
note "as dev, unshare -U: made"
if runuser -u dev -- unshare -Ur true >> "$log" 2>&1; then fail "as dev, unshare -Ur succeeded: no restriction"; fi
grep -q 'uid_map: Operation not permitted' "$log" || fail "as dev, unshare -Ur failed otherwise than at the uid_map write"
note "as dev, unshare -Ur: the uid_map write refused (EPERM)"
note "Ubuntu's restriction is on"
