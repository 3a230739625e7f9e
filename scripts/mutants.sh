#!/usr/bin/env bash
# Mutation testing of the security- and protocol-critical files with cargo-mutants.
#
#   scripts/mutants.sh              # every file below, in order of importance
#   scripts/mutants.sh env markers  # only these (names from the list below)
#   MUTANTS_IN_PLACE=1 scripts/mutants.sh
#                                   # mutate this tree itself (a spare git worktree with a built
#                                   # target/): no copy of target/ per file, one build at a time
#
# Each file is mutated on its own and judged by the tests that cover it: the library's unit
# tests and the `it` binary, both narrowed to the file's modules, so that a mutant costs one
# incremental build and a few seconds of tests. Results go to mutants.out/<name>/ (outcomes.json,
# caught.txt, missed.txt, timeout.txt, unviable.txt); summarise them in notes/mutants.md with the
# date and the commit. CPU is scarce: one job, under nice. Needs `cargo install cargo-mutants`.
set -euo pipefail
cd "$(dirname "$0")/.."

# name | file | test filters, space-separated (each matches lib unit tests `module::tests::…`
# and `it` tests by substring)
targets=(
  "env|src/exec/env.rs|exec::env cli::defaults sandbox::secrets"
  "markers|src/tool/markers.rs|tool:: present:: exec::engine"
  "chunk|src/exec/chunk.rs|exec::chunk exec::engine"
  "capture|src/exec/capture.rs|exec::capture exec::large_output exec::engine cli::defaults"
  "stream|src/acp/stream.rs|acp::stream acp::tool_call cli::defaults"
  "ansi|src/present/ansi.rs|ansi tool::"
  "bridge|src/acp/bridge.rs|bridge present:: acp::transcripts acp::modes acp::plain_clients acp::tool_call"
  "stateless|src/exec/stateless.rs|exec::stateless"
  "ruleset|src/sandbox/linux/landlock.rs|sandbox::linux::landlock sandbox::fs"
  "cgroup|src/sandbox/linux/cgroup.rs|sandbox::hostile::cgroups_made_ahead sandbox::hostile::a_commands_processes_are_all_in_its_own_cgroups"
  "spare|src/sandbox/linux/child/spare.rs|sandbox::zygote"
)

if ! cargo mutants --version >/dev/null 2>&1; then
  echo "cargo-mutants is missing: cargo install --locked cargo-mutants" >&2
  exit 2
fi

wanted=("$@")
for target in "${targets[@]}"; do
  IFS='|' read -r name file filters <<<"$target"
  read -r -a filter <<<"$filters"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " =~ " $name " ]]; then
    continue
  fi
  echo "== $name: $file (tests matching ${filter[*]})"
  # --baseline skip: the unmutated tree is known green (run the suite first);
  # --timeout: a mutant that makes a test hang counts as caught by timeout (the narrowed
  # tests take seconds; 60 s is ample).
  mkdir -p "mutants.out/$name"
  if [ -n "${MUTANTS_IN_PLACE:-}" ]; then where=(--in-place); else where=(--jobs 1); fi
  nice -n 10 cargo mutants \
    --file "$file" \
    "${where[@]}" \
    --baseline skip \
    --timeout "${MUTANTS_TIMEOUT:-60}" \
    --build-timeout "${MUTANTS_BUILD_TIMEOUT:-1200}" \
    --output "mutants.out/$name" \
    -- --lib --test it -- "${filter[@]}" || true
  for outcome in caught missed timeout unviable; do
    f="mutants.out/$name/mutants.out/$outcome.txt"
    printf '  %-9s %s\n' "$outcome" "$( [ -f "$f" ] && wc -l <"$f" || echo 0)"
  done
done
