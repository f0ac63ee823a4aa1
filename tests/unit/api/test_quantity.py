"""Quantity parsing: every form the API server accepts, and clear errors for the rest."""

from decimal import Decimal

import pytest

from batchsched.api.errors import InvalidObject
from batchsched.api.quantity import format_quantity, parse_quantity
from batchsched.api.resources import parse_resource_list, to_units

WHERE = "Pod default/p.spec.containers[0].resources.requests.cpu"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", Decimal(1)),
        (" 2 ", Decimal(2)),
        (3, Decimal(3)),
        (0.5, Decimal("0.5")),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("+1", Decimal(1)),
        ("250u", Decimal("0.00025")),
        ("7n", Decimal("7e-9")),
        ("2k", Decimal(2000)),
        ("3M", Decimal(3_000_000)),
        ("1G", Decimal(10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("2E", Decimal(2 * 10**18)),
        ("1Ki", Decimal(1024)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("128Mi", Decimal(128 * 2**20)),
        ("1Ti", Decimal(2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("5e-1", Decimal("0.5")),
        ("2e+2", Decimal(200)),
        ("0", Decimal(0)),
    ],
)
def test_valid_quantities(raw: object, expected: Decimal) -> None:
    assert parse_quantity(raw, where=WHERE) == expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("-1", "'-1' is negative"),
        (-2, "-2 is negative"),
        ("-500m", "'-500m' is negative"),
        ("", "'' is not a quantity"),
        ("abc", "'abc' is not a quantity"),
        ("12Qi", "'12Qi' is not a quantity"),
        ("1 Gi", "'1 Gi' is not a quantity"),
        ("Gi", "'Gi' is not a quantity"),
        ("1.2.3", "'1.2.3' is not a quantity"),
        ("1e", "'1e' is not a quantity"),
        ("1e3.5", "'1e3.5' is not a quantity"),
        ("1e3m", "'1e3m' is not a quantity"),
        ("2E1Gi", "'2E1Gi' is not a quantity"),
        ("1-", "'1-' is not a quantity"),
        ("inf", "'inf' is not a quantity"),
        (float("inf"), "inf is not a finite quantity"),
        (float("nan"), "nan is not a finite quantity"),
        (True, "True is not a quantity"),
        (None, "None is not a quantity"),
        ([1], "[1] is not a quantity"),
    ],
)
def test_malformed_quantities_name_the_field(raw: object, problem: str) -> None:
    with pytest.raises(InvalidObject) as error:
        parse_quantity(raw, where=WHERE)
    assert str(error.value) == f"{WHERE}: {problem}"


@pytest.mark.parametrize(
    ("name", "raw", "units"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1.5", 1500),
        ("cpu", 2, 2000),
        # Finer than a millicore rounds up, as the API server does.
        ("cpu", "100u", 1),
        ("memory", "1Gi", 2**30),
        ("memory", "1.5k", 1500),
        ("memory", "1m", 1),
        ("nvidia.com/gpu", "4", 4),
        ("memory", "8Pi", 2**53),
    ],
)
def test_core_units(name: str, raw: str | int, units: int) -> None:
    assert to_units(name, raw, where=WHERE) == units


def test_resource_list_names_the_resource_in_errors() -> None:
    with pytest.raises(InvalidObject, match=r"^Node n\.status\.allocatable\.memory: 'lots' "):
        parse_resource_list({"cpu": "4", "memory": "lots"}, where="Node n.status.allocatable")
    with pytest.raises(InvalidObject, match="expected a map of resource quantities, got '4'"):
        parse_resource_list("4", where="Node n.status.allocatable")


@pytest.mark.parametrize(("name", "raw"), [("memory", "1e30"), ("memory", "9Pi"), ("cpu", "1e13")])
def test_amounts_beyond_int64_headroom_are_refused(name: str, raw: str) -> None:
    with pytest.raises(InvalidObject) as error:
        to_units(name, raw, where=WHERE)
    assert str(error.value) == f"{WHERE}: {raw!r} is too large"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal(0), "0"),
        (Decimal(7), "7"),
        (Decimal(2**30), "1Gi"),
        (Decimal(3 * 2**20), "3Mi"),
        (Decimal(5000), "5k"),
        (Decimal(2 * 10**9), "2G"),
        (Decimal(1500), "1500"),
        (Decimal("0.5"), "500m"),
        (Decimal("0.0025"), "2500u"),
        (Decimal("1e-9"), "1n"),
        (Decimal("1.5e-10"), "1n"),
    ],
)
def test_a_quantity_is_written_in_kubernetes_form_and_reads_back(
    value: Decimal, expected: str
) -> None:
    written = format_quantity(value)
    assert written == expected
    if value >= Decimal("1e-9"):
        assert parse_quantity(written, where=WHERE) == value
