#!/usr/bin/env bash
# Makes sure kube-apiserver and etcd binaries exist for the integration tests and
# prints the directory holding them as the last line of standard output; all
# progress goes to standard error (contract: `make test` and CI call this).
#
# There is no container engine and no release download on our machines, so the
# binaries are built from the Go modules pinned in hack/envtest/*/go.mod, the way
# Kubernetes builds its own test binaries, and cached outside the repository:
#   ${BATCHSCHED_ENVTEST_CACHE:-${XDG_CACHE_HOME:-~/.cache}/batchsched/envtest}/<k8s-version>/
# A KUBEBUILDER_ASSETS directory that already holds both binaries wins and
# nothing is built.
#
# To move to another release: in envtest/kube-apiserver/go.mod set k8s.io/kubernetes
# to v1.X.Y and every k8s.io/* replacement to v0.X.Y; in envtest/etcd/go.mod set the
# etcd that release's hack/lib/etcd.sh names; then run `go mod tidy` in both (and
# update envtest/kube-scheduler/go.mod and envtest/kube-controller-manager/go.mod the
# same way, for hack/kube-scheduler.sh and hack/kube-controller-manager.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
apiserver_mod="$here/envtest/kube-apiserver"
etcd_mod="$here/envtest/etcd"

tool=envtest
if [[ "${CI:-}" == true ]]; then
    fail_hint="CI=true, so the integration tests cannot be skipped."
else
    fail_hint="to run only the non-integration tests, set BATCHSCHED_SKIP_INTEGRATION=1."
fi
# shellcheck source=lib/gobuild.sh
source "$here/lib/gobuild.sh"

has_binaries() { [[ -x "$1/kube-apiserver" && -x "$1/etcd" ]]; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
    if has_binaries "$KUBEBUILDER_ASSETS"; then
        log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
        printf '%s\n' "$KUBEBUILDER_ASSETS" >&3
        exit 0
    fi
    log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks kube-apiserver or etcd; using the build cache"
fi

k8s_version="$(required_version "$apiserver_mod" k8s.io/kubernetes)"
etcd_version="$(required_version "$etcd_mod" go.etcd.io/etcd/server/v3)"
[[ -n "$k8s_version" && -n "$etcd_version" ]] || fail "cannot read the pinned versions from $here/envtest"

gobuild_init "$k8s_version"
apiserver_ldflags="$k8s_ldflags"
etcd_ldflags="-s -w"

# A changed pin or build setting must not be served from a stale cache.
stamp="$(
    cat "$apiserver_mod/go.mod" "$apiserver_mod/go.sum" "$etcd_mod/go.mod" "$etcd_mod/go.sum"
    printf '%s\n%s\n' "$apiserver_ldflags" "$etcd_ldflags"
)"
stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"

is_current() { has_binaries "$dest" && [[ "$(cat "$dest/.stamp" 2>/dev/null)" == "$stamp" ]]; }

gobuild_lock

if is_current; then
    log "kube-apiserver $k8s_version and etcd $etcd_version cached in $dest"
    printf '%s\n' "$dest" >&3
    exit 0
fi

gobuild_workdir

total_start=$SECONDS
build etcd "$etcd_mod" go.etcd.io/etcd/server/v3 "$etcd_ldflags"
build kube-apiserver "$apiserver_mod" k8s.io/kubernetes/cmd/kube-apiserver "$apiserver_ldflags"

mkdir -p "$dest"
mv -f "$work/etcd" "$work/kube-apiserver" "$dest/"
printf '%s\n' "$stamp" >"$dest/.stamp"
log "built kube-apiserver $k8s_version and etcd $etcd_version in $((SECONDS - total_start))s;" \
    "cache $(du -sh "$dest" | cut -f1) in $dest"
printf '%s\n' "$dest" >&3
