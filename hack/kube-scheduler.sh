#!/usr/bin/env bash
# Makes sure a kube-scheduler binary exists for the conformance run (bench/parity.py)
# and prints the directory holding it as the last line of standard output; all
# progress goes to standard error, as with hack/envtest.sh.
#
# It is built from hack/envtest/kube-scheduler/go.mod, pinned to the release the
# API server is built from (hack/envtest/kube-apiserver/go.mod), into the same cache
# directory, so one KUBEBUILDER_ASSETS directory then serves both. `make test` does
# not build it: only the conformance run needs it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
scheduler_mod="$here/envtest/kube-scheduler"
apiserver_mod="$here/envtest/kube-apiserver"

tool=kube-scheduler
fail_hint="the conformance run (bench/parity.py) needs it; nothing else does."
# shellcheck source=lib/gobuild.sh
source "$here/lib/gobuild.sh"

k8s_version="$(required_version "$scheduler_mod" k8s.io/kubernetes)"
[[ -n "$k8s_version" ]] || fail "cannot read the pinned version from $scheduler_mod/go.mod"
apiserver_version="$(required_version "$apiserver_mod" k8s.io/kubernetes)"
[[ "$k8s_version" == "$apiserver_version" ]] ||
    fail "kube-scheduler is pinned to $k8s_version but kube-apiserver to $apiserver_version"

gobuild_init "$k8s_version"

# Its own stamp, so that building it never invalidates the control plane's cache.
stamp="$(
    cat "$scheduler_mod/go.mod" "$scheduler_mod/go.sum"
    printf '%s\n' "$k8s_ldflags"
)"
stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"
stamp_file="$dest/.stamp-kube-scheduler"

is_current() { [[ -x "$dest/kube-scheduler" && "$(cat "$stamp_file" 2>/dev/null)" == "$stamp" ]]; }

gobuild_lock

if is_current; then
    log "kube-scheduler $k8s_version cached in $dest"
    printf '%s\n' "$dest" >&3
    exit 0
fi

gobuild_workdir
build kube-scheduler "$scheduler_mod" k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
mkdir -p "$dest"
mv -f "$work/kube-scheduler" "$dest/"
printf '%s\n' "$stamp" >"$stamp_file"
log "built kube-scheduler $k8s_version into $dest"
printf '%s\n' "$dest" >&3
