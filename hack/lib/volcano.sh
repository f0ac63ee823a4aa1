# Builds one of Volcano's commands from a Go module pinned under hack/ into the cache
# shared by every Volcano build, and prints its directory on the caller's standard output.
# Sourced after lib/gobuild.sh, not run. There is no release download on our machines;
# the version is stamped in as Volcano's Makefile.def stamps it, and each binary keeps a
# stamp of its own, so building one never invalidates another.
#   ${BATCHSCHED_VOLCANO_CACHE:-${XDG_CACHE_HOME:-~/.cache}/batchsched/volcano}/<version>/
#
# build_volcano NAME MODULE-DIR PACKAGE STAMP-FILE
build_volcano() {
    local name="$1" mod="$2" pkg="$3" stamp_name="$4" version ldflags stamp
    version="$(required_version "$mod" volcano.sh/volcano)"
    [[ -n "$version" ]] || fail "cannot read the pinned version from $mod/go.mod"
    ldflags="-s -w -X volcano.sh/volcano/pkg/version.Version=$version"
    cache_root="${BATCHSCHED_VOLCANO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/batchsched/volcano}"
    dest="$cache_root/$version"
    # A changed pin or build setting must not be served from a stale cache.
    stamp="$(cat "$mod/go.mod" "$mod/go.sum"; printf '%s\n' "$ldflags")"
    stamp="$(printf '%s' "$stamp" | sha256sum | cut -d' ' -f1)"
    local stamp_file="$dest/$stamp_name"
    # Checked once before the lock, so that the common case takes no lock at all.
    if [[ -x "$dest/$name" && "$(cat "$stamp_file" 2>/dev/null)" == "$stamp" ]]; then
        printf '%s\n' "$dest" >&3
        return
    fi
    gobuild_lock
    if [[ -x "$dest/$name" && "$(cat "$stamp_file" 2>/dev/null)" == "$stamp" ]]; then
        log "$name $version cached in $dest"
    else
        gobuild_workdir
        build "$name" "$mod" "$pkg" "$ldflags"
        mkdir -p "$dest"
        mv -f "$work/$name" "$dest/"
        printf '%s\n' "$stamp" >"$stamp_file"
        log "cache $(du -sh "$dest" | cut -f1) in $dest"
    fi
    printf '%s\n' "$dest" >&3
}
