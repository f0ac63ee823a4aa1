#!/usr/bin/env bash
# Makes sure Volcano's scheduler (vc-scheduler) exists for the topology placement-quality
# bench (bench/topology_volcano.py) and prints the directory holding it as the last line
# of standard output; all progress goes to standard error, as with hack/envtest.sh.
#
# The bench runs it on the same API server as `batchsched run`, with HyperNodes and
# PodGroups asking networkTopology. It is built from the Go module pinned in
# hack/vc-scheduler/go.mod: the release vc-controller-manager is built from (v1.14.1,
# the newest whose volcano.sh/apis a module serves; see that go.mod), whose scheduler
# has the network-topology-aware plugin and reads HyperNodes and networkTopology
# (HyperNodes came in v1.12). Cached beside the controller (hack/lib/volcano.sh).
#
# To move to another release: as hack/vc-controller-manager.sh says, in
# hack/vc-scheduler/go.mod.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

tool=vc-scheduler
fail_hint="the Volcano comparison of bench/topology_volcano.py needs it; nothing else does."
# shellcheck source=lib/gobuild.sh
source "$here/lib/gobuild.sh"
# shellcheck source=lib/volcano.sh
source "$here/lib/volcano.sh"
build_volcano vc-scheduler "$here/vc-scheduler" volcano.sh/volcano/cmd/scheduler .stamp-vc-scheduler
