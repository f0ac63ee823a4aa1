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
# etcd that release's hack/lib/etcd.sh names; then run `go mod tidy` in both.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
apiserver_mod="$here/envtest/kube-apiserver"
etcd_mod="$here/envtest/etcd"

# Only the final directory may reach stdout: callers capture it with $(...).
exec 3>&1 1>&2

log() { printf 'envtest: %s\n' "$*"; }

fail() {
    printf 'envtest: error: %s\n' "$*"
    if [[ "${CI:-}" == true ]]; then
        printf 'envtest: CI=true, so the integration tests cannot be skipped.\n'
    else
        printf 'envtest: to run only the non-integration tests, set BATCHSCHED_SKIP_INTEGRATION=1.\n'
    fi
    exit 1
}

has_binaries() { [[ -x "$1/kube-apiserver" && -x "$1/etcd" ]]; }

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
    if has_binaries "$KUBEBUILDER_ASSETS"; then
        log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
        printf '%s\n' "$KUBEBUILDER_ASSETS" >&3
        exit 0
    fi
    log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks kube-apiserver or etcd; using the build cache"
fi

# The go.mod files are the single source of the pinned versions.
required_version() { awk -v m="$2" '$1 == m { print $2; exit }' "$1/go.mod"; }
k8s_version="$(required_version "$apiserver_mod" k8s.io/kubernetes)"
etcd_version="$(required_version "$etcd_mod" go.etcd.io/etcd/server/v3)"
[[ -n "$k8s_version" && -n "$etcd_version" ]] || fail "cannot read the pinned versions from $here/envtest"

k8s_minor="${k8s_version#v1.}"
k8s_minor="${k8s_minor%%.*}"
version_pkgs=(k8s.io/component-base/version k8s.io/client-go/pkg/version)
apiserver_ldflags="-s -w"
for pkg in "${version_pkgs[@]}"; do
    apiserver_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1"
    apiserver_ldflags+=" -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done
etcd_ldflags="-s -w"

cache_root="${BATCHSCHED_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched/envtest}"
dest="$cache_root/$k8s_version"

# A changed pin or build setting must not be served from a stale cache.
stamp="$(
    cat "$apiserver_mod/go.mod" "$apiserver_mod/go.sum" "$etcd_mod/go.mod" "$etcd_mod/go.sum"
    printf '%s\n%s\n' "$apiserver_ldflags" "$etcd_ldflags"
)"
stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"

is_current() { has_binaries "$dest" && [[ "$(cat "$dest/.stamp" 2>/dev/null)" == "$stamp" ]]; }

mkdir -p "$cache_root"
# Concurrent callers (parallel make, two terminals) wait for one build.
exec 9>"$cache_root/.lock"
flock 9

if is_current; then
    log "kube-apiserver $k8s_version and etcd $etcd_version cached in $dest"
    printf '%s\n' "$dest" >&3
    exit 0
fi

command -v go >/dev/null || fail "no Go toolchain on PATH; building the control plane needs go >= 1.26"

work="$(mktemp -d "$cache_root/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Prints a heartbeat while `go build -v` runs, since a cold build takes minutes.
build() {
    local name="$1" moddir="$2" pkg="$3" ldflags="$4"
    local buildlog="$work/$name.log" started=$SECONDS next_report=$((SECONDS + 15)) pid
    log "building $name from $pkg (first build takes minutes; later runs use the cache)"
    (
        cd "$moddir"
        CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false -trimpath" \
            nice -n 10 go build -v -ldflags "$ldflags" -o "$work/$name" "$pkg"
    ) >"$buildlog" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if ((SECONDS >= next_report)); then
            log "  $name: $((SECONDS - started))s, $(grep -cv '^go: downloading' "$buildlog") packages compiled"
            next_report=$((SECONDS + 15))
        fi
    done
    if ! wait "$pid"; then
        tail -n 40 "$buildlog"
        fail "building $name failed (log above)"
    fi
    log "  $name built in $((SECONDS - started))s"
}

total_start=$SECONDS
build etcd "$etcd_mod" go.etcd.io/etcd/server/v3 "$etcd_ldflags"
build kube-apiserver "$apiserver_mod" k8s.io/kubernetes/cmd/kube-apiserver "$apiserver_ldflags"

mkdir -p "$dest"
mv -f "$work/etcd" "$work/kube-apiserver" "$dest/"
printf '%s\n' "$stamp" >"$dest/.stamp"
log "built kube-apiserver $k8s_version and etcd $etcd_version in $((SECONDS - total_start))s;" \
    "cache $(du -sh "$dest" | cut -f1) in $dest"
printf '%s\n' "$dest" >&3
