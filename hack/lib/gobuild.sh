# Shared by the hack/*.sh scripts that build binaries from Go modules pinned under hack/
# into a cache directory per release (gobuild_init sets one up for Kubernetes' own).
# Sourced, not run. The caller sets `tool` (the prefix of its messages) and `fail_hint`
# (what to tell the user when a build cannot be made), then calls gobuild_init or sets
# `cache_root` and `dest` itself.

# Only the final directory may reach stdout: callers capture it with $(...).
exec 3>&1 1>&2

log() { printf '%s: %s\n' "$tool" "$*"; }

fail() {
    printf '%s: error: %s\n' "$tool" "$*"
    printf '%s: %s\n' "$tool" "$fail_hint"
    exit 1
}

# The go.mod files are the single source of the pinned versions.
required_version() { awk -v m="$2" '$1 == m { print $2; exit }' "$1/go.mod"; }

# Sets k8s_ldflags (the release stamped into the version packages, as Kubernetes' own
# build stamps it), cache_root and dest (the release's cache directory).
gobuild_init() {
    local k8s_version="$1" k8s_minor pkg
    k8s_minor="${k8s_version#v1.}"
    k8s_minor="${k8s_minor%%.*}"
    k8s_ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1"
        k8s_ldflags+=" -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
    done
    cache_root="${BATCHSCHED_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched/envtest}"
    dest="$cache_root/$k8s_version"
}

# Waits for any other build into the cache (parallel make, two terminals) to finish.
gobuild_lock() {
    mkdir -p "$cache_root"
    exec 9>"$cache_root/.lock"
    flock 9
}

# Makes the scratch directory `work`, deleted on exit, that builds write into.
gobuild_workdir() {
    command -v go >/dev/null || fail "no Go toolchain on PATH; building needs go >= 1.26"
    work="$(mktemp -d "$cache_root/.build.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
}

# build NAME MODULE-DIR PACKAGE LDFLAGS: builds $work/NAME, printing a heartbeat while
# `go build -v` runs, since a cold build takes minutes.
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

# build_release_component NAME: builds k8s.io/kubernetes/cmd/NAME from
# hack/envtest/NAME/go.mod, which must pin the release kube-apiserver is built from,
# into that release's cache directory with a stamp of its own (so building it never
# invalidates the control plane's cache), and prints the directory on the caller's
# standard output. One KUBEBUILDER_ASSETS directory then serves every binary.
build_release_component() {
    local name="$1" here stamp stamp_file version apiserver_version
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    local mod="$here/envtest/$name"
    version="$(required_version "$mod" k8s.io/kubernetes)"
    [[ -n "$version" ]] || fail "cannot read the pinned version from $mod/go.mod"
    apiserver_version="$(required_version "$here/envtest/kube-apiserver" k8s.io/kubernetes)"
    [[ "$version" == "$apiserver_version" ]] ||
        fail "$name is pinned to $version but kube-apiserver to $apiserver_version"

    gobuild_init "$version"
    stamp="$(
        cat "$mod/go.mod" "$mod/go.sum"
        printf '%s\n' "$k8s_ldflags"
    )"
    stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"
    stamp_file="$dest/.stamp-$name"

    gobuild_lock
    if [[ -x "$dest/$name" && "$(cat "$stamp_file" 2>/dev/null)" == "$stamp" ]]; then
        log "$name $version cached in $dest"
    else
        gobuild_workdir
        build "$name" "$mod" "k8s.io/kubernetes/cmd/$name" "$k8s_ldflags"
        mkdir -p "$dest"
        mv -f "$work/$name" "$dest/"
        printf '%s\n' "$stamp" >"$stamp_file"
        log "built $name $version into $dest; cache now $(du -sh "$dest" | cut -f1)"
    fi
    printf '%s\n' "$dest" >&3
}
