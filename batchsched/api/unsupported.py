"""What a pod asks for that the core does not honour yet, or that holds it back.

A pod asking for any of it waits with a message naming the field instead of being
placed as if it had not asked: a placement that breaks a stated constraint is worse
than a pod that waits and says why.
"""

from collections.abc import Mapping

from batchsched.api.meta import mapping, sequence

# kube-scheduler's PodScheduled condition for a pod with scheduling gates left.
GATED_REASON = "SchedulingGated"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"

# Spec fields the core ignores, each checked only when it holds something.
UNSUPPORTED_SPEC_FIELDS = ("resourceClaims",)
# In-tree disk sources, which kube-scheduler keeps apart (VolumeRestrictions) and counts
# against CSI attach limits by translating them to their CSI drivers. Claims are
# honoured (plugins/volumefilters.py); inline CSI volumes constrain no node.
NODE_BOUND_VOLUMES = (
    "awsElasticBlockStore",
    "gcePersistentDisk",
    "azureDisk",
    "cinder",
    "vsphereVolume",
    "portworxVolume",
    "rbd",
    "iscsi",
)


def spec_blocker(spec: Mapping[str, object], *, where: str) -> str | None:
    """Why a pod with this spec may not be placed whatever the cluster holds, or None.

    Scheduling gates come first: kube-scheduler does not look at a gated pod at all.
    """
    if sequence(spec.get("schedulingGates"), where=f"{where}.spec.schedulingGates"):
        return GATED_MESSAGE
    for name in UNSUPPORTED_SPEC_FIELDS:
        if spec.get(name):
            return not_supported(f"spec.{name}")
    return None


def volume_blocker(spec: Mapping[str, object], *, where: str) -> str | None:
    """The first volume whose source constrains the node, named by its place in the spec."""
    for index, raw in enumerate(sequence(spec.get("volumes"), where=f"{where}.spec.volumes")):
        volume = mapping(raw, where=f"{where}.spec.volumes[{index}]")
        for source in NODE_BOUND_VOLUMES:
            if volume.get(source) is not None:
                return not_supported(f"spec.volumes[{index}].{source}")
    return None


def not_supported(field: str) -> str:
    return f"{field} is not supported yet"
