#!/usr/bin/env bash
# Run one stage of `make test` / `.ci/run` and say how long it took:
#   bash scripts/stage.sh NAME COMMAND [ARGS...]
# The line "stage NAME: N s (exit E)" is printed whatever the outcome, and appended to $STAGES_LOG when
# it is set (.ci/run prints them together at the end); the exit status is the command's.
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
line="stage ${name}: $(($(date +%s) - start)) s (exit ${rc})"
echo "$line"
if [ -n "${STAGES_LOG:-}" ]; then echo "$line" >>"$STAGES_LOG"; fi
exit "$rc"
