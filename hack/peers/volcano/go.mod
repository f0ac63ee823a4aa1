// Volcano's released CRDs and examples (see hack/peer-crds.sh).
module batchsched.local/hack/peers/volcano

go 1.26.0

require volcano.sh/volcano v1.15.1
