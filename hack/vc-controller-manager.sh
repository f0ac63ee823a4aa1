#!/usr/bin/env bash
# Makes sure Volcano's vc-controller-manager exists for the Volcano Job integration
# tests (tests/integration/test_volcano_jobs.py) and prints the directory holding it as
# the last line of standard output; all progress goes to standard error, as with
# hack/envtest.sh.
#
# Volcano users submit Volcano Jobs, and it is Volcano's job controller that turns one
# into a PodGroup and, once the scheduler has moved that PodGroup to Inqueue, into pods.
# There is no release download on our machines, so the controller is built from the Go
# module pinned in hack/vc-controller-manager/go.mod (why v1.14.1: see that file) and
# cached outside the repository:
#   ${BATCHSCHED_VOLCANO_CACHE:-${XDG_CACHE_HOME:-~/.cache}/batchsched/volcano}/<version>/
# The version is stamped in as Volcano's Makefile.def stamps it.
#
# To move to another release: in hack/vc-controller-manager/go.mod set volcano.sh/volcano
# and volcano.sh/apis, copy that release's replace block (all but volcano.sh/apis), and
# run `go mod tidy` there.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
volcano_mod="$here/vc-controller-manager"

tool=vc-controller-manager
if [[ "${CI:-}" == true ]]; then
    fail_hint="CI=true, so the Volcano Job tests cannot be skipped."
else
    fail_hint="to run only the non-integration tests, set BATCHSCHED_SKIP_INTEGRATION=1."
fi
# shellcheck source=lib/gobuild.sh
source "$here/lib/gobuild.sh"

volcano_version="$(required_version "$volcano_mod" volcano.sh/volcano)"
[[ -n "$volcano_version" ]] || fail "cannot read the pinned version from $volcano_mod/go.mod"

ldflags="-s -w -X volcano.sh/volcano/pkg/version.Version=$volcano_version"

cache_root="${BATCHSCHED_VOLCANO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched/volcano}"
dest="$cache_root/$volcano_version"

# A changed pin or build setting must not be served from a stale cache.
stamp="$(cat "$volcano_mod/go.mod" "$volcano_mod/go.sum"; printf '%s\n' "$ldflags")"
stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"

is_current() { [[ -x "$dest/vc-controller-manager" && "$(cat "$dest/.stamp" 2>/dev/null)" == "$stamp" ]]; }

# Checked once before the lock, so that the common case takes no lock at all.
if is_current; then
    printf '%s\n' "$dest" >&3
    exit 0
fi

gobuild_lock

if is_current; then
    log "vc-controller-manager $volcano_version cached in $dest"
    printf '%s\n' "$dest" >&3
    exit 0
fi

gobuild_workdir
build vc-controller-manager "$volcano_mod" volcano.sh/volcano/cmd/controller-manager "$ldflags"
mkdir -p "$dest"
mv -f "$work/vc-controller-manager" "$dest/"
printf '%s\n' "$stamp" >"$dest/.stamp"
log "cache $(du -sh "$dest" | cut -f1) in $dest"
printf '%s\n' "$dest" >&3
