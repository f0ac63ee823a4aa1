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
# cached outside the repository (hack/lib/volcano.sh says where).
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

# shellcheck source=lib/volcano.sh
source "$here/lib/volcano.sh"
build_volcano vc-controller-manager "$volcano_mod" volcano.sh/volcano/cmd/controller-manager .stamp
