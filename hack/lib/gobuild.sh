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
