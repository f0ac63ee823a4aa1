"""The softWait clock a group's object keeps (two annotations): read from every kind of
PodGroup, an RFC 3339 time kept for the object's own uid; anything else ignored with
the reason, never an error of the group."""

from datetime import UTC, datetime

import pytest

from batchsched.api.groups import POD_GROUP_APIS, pod_group_from_object
from batchsched.api.spanclock import OWNER_ANNOTATION, SINCE_ANNOTATION, parse_rfc3339

from tests.support.objects import native_pod_group, pod_group

NOON = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-11-29T12:00:00Z", NOON),
        ("2026-11-29t12:00:00z", NOON),
        ("2026-11-29T12:00:00.25Z", NOON + 0.25),
        ("2026-11-29T12:00:00.123456789Z", NOON + 0.123456),
        ("2026-11-29T14:30:00+02:30", NOON),
        ("2026-11-29T12:00:00", None),
        ("2026-11-29", None),
        ("2026-11-29 12:00:00Z", None),
        ("2026-02-30T12:00:00Z", None),
        ("1764417600", None),
        ("", None),
    ],
)
def test_only_an_rfc_3339_time_with_its_zone_is_a_time(text: str, seconds: float | None) -> None:
    assert parse_rfc3339(text) == (None if seconds is None else pytest.approx(seconds))


def annotated(obj: dict[str, object], **annotations: object) -> dict[str, object]:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    meta["uid"] = "uid-g"
    meta["annotations"] = annotations
    return obj


@pytest.mark.parametrize("api_version", sorted(POD_GROUP_APIS))
def test_every_kind_of_group_reads_the_clock_kept_for_it(api_version: str) -> None:
    manifest = (
        native_pod_group("g", 2)
        if api_version.startswith("scheduling.k8s.io/")
        else pod_group("g", 2, api_version=api_version)
    )
    keys = {SINCE_ANNOTATION: "2026-11-29T12:00:00Z", OWNER_ANNOTATION: "uid-g"}
    group = pod_group_from_object(annotated(manifest, **keys))
    assert (group.span_since, group.stored_clock_problem) == (NOON, None)
    assert group.stored_clock == ("2026-11-29T12:00:00Z", "uid-g")


@pytest.mark.parametrize(
    ("annotations", "problem"),
    [
        ({SINCE_ANNOTATION: "soon", OWNER_ANNOTATION: "uid-g"}, "'soon' is not an RFC 3339 time"),
        ({SINCE_ANNOTATION: 1764417600, OWNER_ANNOTATION: "uid-g"}, "1764417600 is not an RFC"),
        ({SINCE_ANNOTATION: "2026-11-29T12:00:00Z", OWNER_ANNOTATION: "x"}, "soft-wait-owner='x'"),
        ({OWNER_ANNOTATION: "uid-g"}, "None is not an RFC 3339 time"),
    ],
)
def test_a_clock_that_cannot_be_used_is_ignored_and_says_why(
    annotations: dict[str, object], problem: str
) -> None:
    """The group itself stays valid: a bad clock never stops its gang being scheduled."""
    group = pod_group_from_object(annotated(pod_group("g", 2), **annotations))
    assert group.error is None and group.span_since is None
    assert group.stored_clock_problem is not None
    assert group.stored_clock_problem.startswith(
        f"PodGroup default/g annotation {SINCE_ANNOTATION}="
    )
    assert problem in group.stored_clock_problem
