#!/usr/bin/env bash
# Writes manifests/ from charts/batchsched: `helm template` with the chart's default
# values, release "batchsched" in namespace batchsched-system, plus the Namespace object
# itself (namespace.create=true), so that `kubectl apply -f crds/ -f manifests/` needs
# no Helm. One file per template, named as the template; manifests/dashboards/ is not
# rendered and is left alone. Run it after editing the chart; the chart tests fail
# while manifests/ differs from what it writes.
#
#   hack/render-manifests.sh            write manifests/
#   hack/render-manifests.sh DIR        write into DIR instead (the tests compare it)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$repo/manifests}"
helm="$(bash "$repo/hack/helm.sh")"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# crds/ in the chart is a link to the repository's crds/; helm says so on every run.
"$helm" template batchsched "$repo/charts/batchsched" --namespace batchsched-system \
    --set namespace.create=true --output-dir "$work" >/dev/null 2> >(grep -v 'found symbolic link' >&2)

mkdir -p "$out"
rm -f "$out"/*.yaml
for file in "$work"/batchsched/templates/*.yaml; do
    {
        printf '# Rendered from charts/batchsched/templates/%s by hack/render-manifests.sh:\n' \
            "$(basename "$file")"
        printf '# edit the chart and run it again, not this file.\n'
        # helm opens each document with "---" and a "# Source:" line.
        grep -v -e '^# Source: ' "$file" | sed '1{/^---$/d}'
    } >"$out/$(basename "$file")"
done
echo "rendered charts/batchsched into $out:" $(cd "$out" && ls ./*.yaml | sed 's|^\./||') >&2
