#!/usr/bin/env bash
# Makes sure a helm binary exists for rendering charts/batchsched (hack/render-manifests.sh
# and the chart tests) and prints its path as the last line of standard output; all
# progress goes to standard error, as with hack/envtest.sh.
#
# There is no release download on our machines, so helm is built from the Go module
# pinned in hack/helm/go.mod and cached outside the repository:
#   ${BATCHSCHED_HELM_CACHE:-${XDG_CACHE_HOME:-~/.cache}/batchsched/helm}/<helm-version>/helm
# The version and the default Kubernetes version of `helm template`
# (.Capabilities.KubeVersion) are stamped in as helm's own Makefile stamps them, so the
# rendered manifests do not depend on who built the binary.
#
# To move to another release: in hack/helm/go.mod set helm.sh/helm/v3 to v3.X.Y, run
# `go mod tidy` there, then hack/render-manifests.sh (the tests compare manifests/).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
helm_mod="$here/helm"

tool=helm
if [[ "${CI:-}" == true ]]; then
    fail_hint="CI=true, so the chart tests cannot be skipped."
else
    fail_hint="to run only the non-integration tests, set BATCHSCHED_SKIP_INTEGRATION=1."
fi
# shellcheck source=lib/gobuild.sh
source "$here/lib/gobuild.sh"

helm_version="$(required_version "$helm_mod" helm.sh/helm/v3)"
client_go="$(required_version "$helm_mod" k8s.io/client-go)"
[[ -n "$helm_version" && -n "$client_go" ]] || fail "cannot read the pinned versions from $helm_mod/go.mod"

# helm's Makefile: client-go v0.N.x means Kubernetes 1.N.
k8s_minor="${client_go#v0.}"
k8s_minor="${k8s_minor%%.*}"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

cache_root="${BATCHSCHED_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched/helm}"
dest="$cache_root/$helm_version"

# A changed pin or build setting must not be served from a stale cache.
stamp="$(cat "$helm_mod/go.mod" "$helm_mod/go.sum"; printf '%s\n' "$ldflags")"
stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"

is_current() { [[ -x "$dest/helm" && "$(cat "$dest/.stamp" 2>/dev/null)" == "$stamp" ]]; }

# Checked once before the lock, so that the common case takes no lock at all.
if is_current; then
    printf '%s\n' "$dest/helm" >&3
    exit 0
fi

gobuild_lock

if is_current; then
    log "helm $helm_version cached in $dest"
    printf '%s\n' "$dest/helm" >&3
    exit 0
fi

gobuild_workdir
build helm "$helm_mod" helm.sh/helm/v3/cmd/helm "$ldflags"
mkdir -p "$dest"
mv -f "$work/helm" "$dest/"
printf '%s\n' "$stamp" >"$dest/.stamp"
log "built helm $helm_version into $dest"
printf '%s\n' "$dest/helm" >&3
