// scheduler-plugins' released CRDs (scheduling.x-k8s.io) and examples (see hack/peer-crds.sh).
module batchsched.local/hack/peers/scheduler-plugins

go 1.26.0

require sigs.k8s.io/scheduler-plugins v0.34.7
