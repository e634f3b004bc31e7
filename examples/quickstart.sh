#!/usr/bin/env bash
# A real plait job, offline, on the bundled example repository (fixtures/repos/example):
# a codemod replaces the deprecated unittest aliases (assertEquals, assertNotEquals) in
# every module, one task per module, three at a time; then the merged result is landed
# on main and the run's worktrees and branches are cleaned away.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
plait=${PLAIT:-}
if [ -z "$plait" ]; then
  cargo build --quiet --release --manifest-path "$root/Cargo.toml"
  plait="$root/target/release/plait"
fi

work=$(mktemp -d)
cp -R "$root/fixtures/repos/example" "$work/shop"
cd "$work/shop"
git init -q -b main
git add -A
git -c user.name=you -c user.email=you@example.com commit -q -m "shop: first commit"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step plait plan --split "'dir:src/*'" ...
"$plait" plan --split 'dir:src/*' \
  --prompt 'Replace the deprecated unittest aliases in {path}' \
  --exec 'sed -i -e "s/assertEquals(/assertEqual(/g" -e "s/assertNotEquals(/assertNotEqual(/g" $(cat "$PLAIT_OWNED")' \
  -o ../plait.toml
cat ../plait.toml

step plait run ../plait.toml -j 3
run=$("$plait" run ../plait.toml -j 3)

step plait diff "$run" merged --stat
"$plait" diff "$run" merged --stat

step plait land "$run" --into main
"$plait" land "$run" --into main
git log --oneline --graph -6

step plait clean "$run"
"$plait" clean "$run"

if grep -rq 'assertN\?o\?t\?Equals(' src; then
  echo "quick start FAILED: deprecated aliases remain" >&2
  exit 1
fi
printf '\nDone: every module was rewritten by its own agent and landed on main.\n'
printf 'The example repository is at %s\n' "$work/shop"
