#!/usr/bin/env bash
# Makes sure the released CRDs of the schedulers batchsched stands in for are at hand
# for the integration tests, and prints the directory holding them as the last line of
# standard output; all progress goes to standard error, as with hack/envtest.sh.
#
# Each peer is a directory under hack/peers/: its go.mod pins the peer's Go module (the
# released source, checked against go.sum), and its `crds` file lists the CRD files in
# that module, as globs. The Go toolchain downloads the module into its module cache,
# and the files are copied byte for byte (defaults, enums and validation as a user's
# cluster has them) into
#   ${BATCHSCHED_PEERS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/batchsched/peers}/<stamp>/<peer>/crds/
# beside a link `<peer>/source` to the module's directory (for its documented examples).
# tests/support/peers.py reads this layout.
#
# To move a peer to another release: set its version in hack/peers/<peer>/go.mod, run
# `go mod download -json MODULE` there (it rewrites go.sum) and check the `crds` globs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
peers_dir="$here/peers"

tool=peer-crds
if [[ "${CI:-}" == true ]]; then
    fail_hint="CI=true, so the integration tests cannot be skipped."
else
    fail_hint="to run only the non-integration tests, set BATCHSCHED_SKIP_INTEGRATION=1."
fi
# shellcheck source=lib/gobuild.sh
source "$here/lib/gobuild.sh"

cache_root="${BATCHSCHED_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched/peers}"

# A changed pin or file list must not be served from a stale cache.
stamp="$(cd "$peers_dir" && cat ./*/go.mod ./*/go.sum ./*/crds | sha256sum | cut -d' ' -f1)"
dest="$cache_root/$stamp"

if [[ -f "$dest/.complete" ]]; then
    printf '%s\n' "$dest" >&3
    exit 0
fi

command -v go >/dev/null || fail "no Go toolchain on PATH; the peers' CRDs come from their Go modules"
gobuild_lock
if [[ -f "$dest/.complete" ]]; then
    printf '%s\n' "$dest" >&3
    exit 0
fi

work="$(mktemp -d "$cache_root/.peers.XXXXXX")"
trap 'rm -rf "$work"' EXIT
for peer_mod in "$peers_dir"/*/; do
    peer="$(basename "$peer_mod")"
    module="$(awk '$1 == "require" { print $2; exit }' "$peer_mod/go.mod")"
    [[ -n "$module" ]] || fail "$peer_mod/go.mod requires no module"
    source_dir="$(
        cd "$peer_mod" &&
            GOFLAGS=-mod=readonly go mod download -json "$module" |
            awk -F'"' '$2 == "Dir" { print $4 }'
    )"
    [[ -d "$source_dir" ]] || fail "cannot download $module for $peer (go mod download in $peer_mod)"
    mkdir -p "$work/$peer/crds"
    ln -s "$source_dir" "$work/$peer/source"
    while read -r pattern; do
        [[ -n "$pattern" ]] || continue
        matched=0
        for file in "$source_dir"/$pattern; do
            [[ -f "$file" ]] || continue
            # Named after their place in the module, as two files may share a base name.
            cp "$file" "$work/$peer/crds/$(printf '%s' "${file#"$source_dir"/}" | tr / _)"
            matched=1
        done
        ((matched)) || fail "$module has no file matching $pattern (hack/peers/$peer/crds)"
    done <"$peer_mod/crds"
    log "$peer: $(ls "$work/$peer/crds" | wc -l) CRD files from $module $(awk '$1 == "require" { print $3 }' "$peer_mod/go.mod")"
done
touch "$work/.complete"
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
printf '%s\n' "$dest" >&3
