#!/usr/bin/env bash
# Makes sure a kube-controller-manager binary exists for the integration tests that
# need controllers (the Job controller, garbage collection, PodGroup protection) and
# prints the directory holding it as the last line of standard output; all progress
# goes to standard error, as with hack/envtest.sh.
#
# It is built from hack/envtest/kube-controller-manager/go.mod, pinned to the release
# the API server is built from (hack/envtest/kube-apiserver/go.mod), into the same
# cache directory, so one KUBEBUILDER_ASSETS directory serves both. `make test`
# builds it after hack/envtest.sh.
set -euo pipefail

tool=kube-controller-manager
if [[ "${CI:-}" == true ]]; then
    fail_hint="CI=true, so the integration tests cannot be skipped."
else
    fail_hint="to run only the non-integration tests, set BATCHSCHED_SKIP_INTEGRATION=1."
fi
# shellcheck source=lib/gobuild.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/gobuild.sh"

build_release_component kube-controller-manager
