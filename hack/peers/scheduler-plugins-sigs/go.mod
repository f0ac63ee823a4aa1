// scheduler-plugins' last release serving scheduling.sigs.k8s.io (see hack/peer-crds.sh).
module batchsched.local/hack/peers/scheduler-plugins-sigs

go 1.26.0

require sigs.k8s.io/scheduler-plugins v0.22.6
