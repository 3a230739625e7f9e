#!/bin/bash
# scripts/lab/guest/ubuntu-userns.sh ATTACH — run as root in the lab VM: reproduce Ubuntu 24.04's
# unprivileged user-namespace restriction for the programs ATTACH names (an AppArmor attachment
# pattern, e.g. `/work/acp-bash/target/debug/{acp-bash,deps/it-*}`).
#
# On Ubuntu (kernel.apparmor_restrict_unprivileged_userns=1) the kernel moves an unconfined,
# unprivileged task that creates a user namespace into the profile `unprivileged_userns`, which
# denies every capability: the uid_map write, setgroups and mounts in the new namespace fail
# (EPERM). Debian 13's kernel has no such sysctl, but its apparmor package ships that very profile
# (in complain mode, unused). Here it is loaded in enforce mode, unchanged but for its attachment:
# the named programs run confined by it from exec on. How that differs from Ubuntu is written in
# notes/2026-12-06-platform-lab.md ("Ubuntu's restriction").
set -euo pipefail
attach=${1:?usage: ubuntu-userns.sh ATTACH-PATTERN}
stock=/etc/apparmor.d/unprivileged_userns
ours=/etc/apparmor.d/acp-bash-lab-ubuntu-userns
[[ $(cat /sys/module/apparmor/parameters/enabled 2>/dev/null) == Y ]] || { echo "AppArmor is off in this kernel" >&2; exit 2; }
[[ -f $stock ]] || { echo "no $stock (apparmor >= 4.0 ships it)" >&2; exit 2; }
# `profile unprivileged_userns flags=(complain) {` -> `profile unprivileged_userns ATTACH {`
sed -E "s|^profile unprivileged_userns( flags=\([^)]*\))? \{|profile unprivileged_userns $attach {|" "$stock" > "$ours"
grep -q "^profile unprivileged_userns $attach {" "$ours" || { echo "unexpected $stock:" >&2; cat "$stock" >&2; exit 2; }
apparmor_parser -r -W "$ours"
grep -E '^unprivileged_userns ' /sys/kernel/security/apparmor/profiles
