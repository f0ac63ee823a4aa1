#!/usr/bin/env bash
# Makes sure a kube-scheduler binary exists for the conformance run (bench/parity.py)
# and prints the directory holding it as the last line of standard output; all
# progress goes to standard error, as with hack/envtest.sh.
#
# It is built from hack/envtest/kube-scheduler/go.mod, pinned to the release the
# API server is built from (hack/envtest/kube-apiserver/go.mod), into the same cache
# directory, so one KUBEBUILDER_ASSETS directory then serves both. `make test` does
# not build it: only the conformance run needs it.
set -euo pipefail

tool=kube-scheduler
fail_hint="the conformance run (bench/parity.py) needs it; nothing else does."
# shellcheck source=lib/gobuild.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/gobuild.sh"

build_release_component kube-scheduler
