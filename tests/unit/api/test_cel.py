"""DRA device selectors evaluated as kube-scheduler evaluates them.

The first table is `testcases` of k8s.io/dynamic-resource-allocation@v0.36.2 cel/compile_test.go,
case by case (name kept), in 1.36's default environment (DRAConsumableCapacity on,
DRAListTypeAttributes off); the expectation is the Go test's (`expectMatch`, or the substring of
`expectCompileError`/`expectMatchError`). The second is the quantity and semver library tests
of k8s.io/apiserver@v0.36.2 pkg/cel/library (quantity_test.go, semver_test.go). The third holds
the selectors drivers and users write, with expectations from those semantics.
"""

import pickle
from decimal import Decimal

import pytest

from batchsched.api.cel import (
    CelError,
    Device,
    ErrorKind,
    Selector,
    SelectorCache,
    Version,
    compile_selector,
)
from batchsched.api.celfuncs import parse_signed_quantity

DRIVER = "dra.example.com"
Outcome = bool | tuple[ErrorKind, str]


def version(text: str) -> Version:
    parsed = Version.parse(text)
    assert isinstance(parsed, Version), parsed
    return parsed


def device(
    driver: str = DRIVER,
    attributes: dict[str, bool | int | str | Version] | None = None,
    capacity: dict[str, str] | None = None,
    allow_multiple_allocations: bool = False,
    generation: int = 1,
) -> Device:
    amounts = {name: _parse(text) for name, text in (capacity or {}).items()}
    return Device(
        driver=driver,
        pool="pool",
        name="dev-0",
        generation=generation,
        attributes=attributes or {},
        capacity=amounts,
        allow_multiple_allocations=allow_multiple_allocations,
    )


def _parse(text: str) -> Decimal:
    value = parse_signed_quantity(text)
    assert isinstance(value, Decimal), value
    return value


def outcome(expression: str, on: Device) -> Outcome:
    compiled = compile_selector(expression)
    result = compiled if isinstance(compiled, CelError) else compiled.matches(on)
    if isinstance(result, CelError):
        assert result.expression == expression
        return (result.kind, result.message)
    return result


def check(expression: str, on: Device, expected: Outcome) -> None:
    actual = outcome(expression, on)
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple), actual
        assert actual[0] == expected[0], actual
        assert expected[1] in actual[1], actual
    else:
        assert actual is expected


COMPILE, RUNTIME = ErrorKind.COMPILE, ErrorKind.RUNTIME
ALL_KINDS: dict[str, bool | int | str | Version] = {
    "bool": True,
    "int": 1,
    "string": "fish",
    "version": version("1.0.0"),
}

KUBERNETES_DRA = [
    ("true", "true", device(driver=""), True),
    ("false", "false", device(driver=""), False),
    ("syntax-error", "?!", device(driver=""), (COMPILE, "Syntax error")),
    (
        "type-error",
        "1",
        device(driver=""),
        (COMPILE, "must evaluate to bool or the unknown type, not int"),
    ),
    (
        "runtime-error-lookup-identifier",
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        device(driver=""),
        (RUNTIME, "no such key: noSuchAttr"),
    ),
    (
        "runtime-error-lookup-map",
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        device(driver=""),
        (RUNTIME, "no such key: noSuchAttr"),
    ),
    ("domain-check-negative", '"no-such-domain" in device.attributes', device(driver=""), False),
    (
        "domain-check-positive",
        '"dra.example.com" in device.attributes',
        device(driver="", attributes={"dra.example.com/something": True}),
        True,
    ),
    ("empty-driver-name", 'device.driver == ""', device(driver=""), True),
    ("real-driver-name", 'device.driver == "dra.example.com"', device(), True),
    (
        "driver-name-qualifier",
        'device.attributes["dra.example.com"].name',
        device(attributes={"name": True}),
        True,
    ),
    (
        "driver-name-qualifier-map-lookup",
        'device.attributes["dra.example.com"]["name"]',
        device(attributes={"name": True}),
        True,
    ),
    (
        "bind",
        'cel.bind(dra, device.attributes["dra.example.com"], dra.name)',
        device(attributes={"name": True}),
        True,
    ),
    (
        "qualified-attribute-name",
        'device.attributes["other.example.com"].name',
        device(attributes={"other.example.com/name": True}),
        True,
    ),
    ("bool", 'device.attributes["dra.example.com"].name', device(attributes={"name": True}), True),
    ("int", 'device.attributes["dra.example.com"].name > 0', device(attributes={"name": 1}), True),
    (
        "string",
        'device.attributes["dra.example.com"].name == "fish"',
        device(attributes={"name": "fish"}),
        True,
    ),
    (
        "includes-function-undeclared-error",
        'device.attributes["dra.example.com"].name.includes("fish")',
        device(),
        (COMPILE, "undeclared reference to 'includes'"),
    ),
    (
        "version",
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
        device(attributes={"name": version("1.0.0")}),
        True,
    ),
    (
        "version_v",
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true))'
        ' && isSemver("v1.0.0", true)',
        device(attributes={"name": version("1.0.0")}),
        True,
    ),
    (
        "quantity",
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(capacity={"name": "1Mi"}),
        True,
    ),
    (
        "check-positive",
        '"name" in device.capacity["dra.example.com"]'
        ' && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(capacity={"name": "1Mi"}),
        True,
    ),
    (
        "check-negative",
        '!("name" in device.capacity["dra.example.com"])'
        ' || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        device(driver=""),
        True,
    ),
    (
        "all",
        """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
""",
        device(attributes=ALL_KINDS, capacity={"quantity": "1Mi"}),
        True,
    ),
    (
        "many",
        'device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b'
        ' && device.attributes["dra.example.com"].c',
        device(attributes={"a": True, "b": True, "c": True}),
        True,
    ),
    (
        "check_attribute_domains",
        'device.attributes.exists_one(x, x == "dra.example.com")',
        device(attributes={"services": "some_example_value"}),
        True,
    ),
    (
        "check_attribute_ids",
        'device.attributes["dra.example.com"].exists_one(x, x == "services")',
        device(attributes={"services": "some_example_value"}),
        True,
    ),
    (
        "split_attribute",
        'device.attributes["dra.example.com"].services.split("example").size() >= 2',
        device(attributes={"services": "some_example_value"}),
        True,
    ),
    (
        "regexp_attribute",
        'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
        device(attributes={"services": "asymetric"}),
        True,
    ),
    (
        "check_capacity_domains",
        'device.capacity.exists_one(x, x == "dra.example.com")',
        device(capacity={"memory": "1Mi"}),
        True,
    ),
    (
        "check_capacity_ids",
        'device.capacity["dra.example.com"].exists_one(x, x == "memory")',
        device(capacity={"memory": "1Mi"}),
        True,
    ),
    (
        "allow_multiple_allocations",
        "device.allowMultipleAllocations == true",
        device(allow_multiple_allocations=True),
        True,
    ),
    (
        "allow_multiple_allocations_default",
        "device.allowMultipleAllocations == false",
        device(),
        True,
    ),
]


@pytest.mark.parametrize(
    ("expression", "on", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in KUBERNETES_DRA],
)
def test_kubernetes_dra_cases(expression: str, on: Device, expected: Outcome) -> None:
    check(expression, on, expected)


def test_a_list_attribute_is_the_error_kube_scheduler_gives_with_list_attributes_off() -> None:
    # compile_test.go "attribute-access-causes-match-error": DRAListTypeAttributes is off in 1.36.
    slice_device = {"name": "d", "attributes": {"names": {"strings": ["fish", "bird"]}}}
    parsed = Device.from_api(DRIVER, "pool", 1, slice_device)
    expression = 'device.attributes["dra.example.com"].names'
    check(expression, parsed, (RUNTIME, "attribute names: unsupported attribute value"))
    cached = SelectorCache().matches(expression, parsed)
    assert isinstance(cached, CelError)
    assert cached.message == "attribute names: unsupported attribute value"


def test_a_device_from_the_api_keeps_every_kind_of_value() -> None:
    slice_device = {
        "name": "gpu-0",
        "attributes": {
            "model": {"string": "A100"},
            "index": {"int": 3},
            "mig": {"bool": False},
            "driverVersion": {"version": "1.2.3"},
            "other.example.com/x": {"int": 1},
        },
        "capacity": {"memory": {"value": "40Gi"}},
        "allowMultipleAllocations": True,
    }
    parsed = Device.from_api(DRIVER, "pool", 7, slice_device)
    assert parsed.unusable == ""
    assert parsed.key == (DRIVER, "pool", "gpu-0")
    assert parsed.attributes["driverVersion"] == version("1.2.3")
    assert parsed.capacity["memory"] == Decimal(40 * 2**30)
    check(
        'cel.bind(a, device.attributes["dra.example.com"], a.model == "A100" && !a.mig'
        ' && a.index == 3) && device.attributes["other.example.com"].x == 1'
        " && device.allowMultipleAllocations",
        parsed,
        True,
    )


def test_a_bad_version_attribute_is_blang_semvers_error() -> None:
    parsed = Device.from_api(
        DRIVER, "pool", 1, {"name": "d", "attributes": {"v": {"version": "1.0"}}}
    )
    assert parsed.unusable == (
        "attribute v: parse semantic version: No Major.Minor.Patch elements found"
    )


NOWHERE = device(driver="")

KUBERNETES_LIBRARIES = [
    (
        'quantity("10Mo") == quantity("10")',
        (RUNTIME, "quantities must match the regular expression"),
    ),
    ('quantity("10Mm") == quantity("10")', (RUNTIME, "unable to parse quantity's suffix")),
    ('isQuantity("20")', True),
    ('isQuantity("20M")', True),
    ('isQuantity("20Mi")', True),
    ('isQuantity("20Mo")', False),
    ('isQuantity("10Mm")', False),
    ('isQuantity(" 1") || isQuantity("--1") || isQuantity("")', False),
    ('sign(quantity("-1.5Ki")) == -1 && quantity("+2").asInteger() == 2', True),
    # quantity.go declares sign() a global overload, not a member one.
    ('quantity("1").sign() == 1', (COMPILE, "'sign'")),
    ("isQuantity([1, 2, 3])", (COMPILE, "found no matching overload for 'isQuantity'")),
    ('quantity("200M") == quantity("200M")', True),
    ('quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True),
    (
        'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M")'
        ' && quantity("0.002G") == quantity("2000k")',
        True,
    ),
    ('quantity("200M") == quantity("0.3G")', False),
    ('quantity("-0") == quantity("0.0") && quantity("1").sub(1) == quantity("0")', True),
    ('quantity("50M").isLessThan(quantity("50Mi"))', True),
    ('quantity("50M").isLessThan(quantity("100M"))', True),
    ('quantity("100M").isLessThan(quantity("50M"))', False),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ('quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
    ('quantity("50M").isGreaterThan(quantity("100M"))', False),
    ('quantity("200M").compareTo(quantity("0.2G")) == 0', True),
    ('quantity("50M").compareTo(quantity("50Mi")) == -1', True),
    ('quantity("50Mi").compareTo(quantity("50M")) == 1', True),
    ('quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ('quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ('quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ('quantity("50k").sub(20) == quantity("49980")', True),
    ('quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980', True),
    ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() == 20', True),
    ('quantity("50k").asInteger() == 50000', True),
    (
        'quantity("9999999999999999999999999999999999999G").asInteger() == 0',
        (RUNTIME, "cannot convert value to integer"),
    ),
    ('quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ('quantity("50").isInteger()', True),
    ('quantity("50.703k").asApproximateFloat() == 50703.0', True),
    ('semver("1.2.3") == semver("1.2.3")', True),
    ('semver("v1.0") == semver("1.0.0")', (RUNTIME, "No Major.Minor.Patch elements found")),
    ('isSemver("1.2.3-beta.1+build.1")', True),
    ('isSemver("")', False),
    ('isSemver("v1.0.0")', False),
    ('isSemver(" 1.0.0")', False),
    ('isSemver("1. 0.0")', False),
    ('isSemver("1.0.0 ")', False),
    ('isSemver("01.01.01")', False),
    ('isSemver("1")', False),
    ('isSemver("1.1")', False),
    ('isSemver("", true)', False),
    ('isSemver(" 1.0.0", true)', False),
    ('isSemver("1. 0.0", true)', False),
    ('isSemver("1.0.0 ", true)', False),
    ('isSemver("v1.0.0", true)', True),
    ('isSemver("01.01.01", true)', True),
    ('isSemver("1", true)', True),
    ('isSemver("1.1", true)', True),
    ("isSemver([1, 2, 3])", (COMPILE, "found no matching overload for 'isSemver'")),
    ('semver("v01.01", true) == semver("1.1.0")', True),
    ('semver("1.2.3") == semver("1.0.0")', False),
    ('semver("1.0.0").isLessThan(semver("1.2.3"))', True),
    ('semver("1.0.0").isLessThan(semver("1.0.0"))', False),
    ('semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
    ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ('semver("1.2.3").compareTo(semver("1.2.3")) == 0', True),
    ('semver("1.0.0").compareTo(semver("1.2.3")) == -1', True),
    ('semver("1.2.3").compareTo(semver("1.0.0")) == 1', True),
    ('semver("1.2.3").major() == 1', True),
    ('semver("1.2.3").minor() == 2', True),
    ('semver("1.2.3").patch() == 3', True),
]


@pytest.mark.parametrize(("expression", "expected"), KUBERNETES_LIBRARIES)
def test_kubernetes_quantity_and_semver_libraries(expression: str, expected: Outcome) -> None:
    check(expression, NOWHERE, expected)


# Kubernetes' Lists library (library/lists.go: isSorted, sum, min, max), cel-go's Sets
# extension and optional types, all in the base environment DRA's selectors compile in; each
# one the API server accepts (tests/integration/test_cel_selectors.py).
LISTS_SETS_OPTIONALS = [
    ("[1, 2, 3].isSorted()", True),
    ("[2, 1].isSorted()", False),
    ("[1, 2, 3].sum() == 6", True),
    ("[1.5, 2.0].sum() == 3.5", True),
    ("[].sum() == 0", True),
    ("[3, 1, 2].min() == 1", True),
    ("[3, 1, 2].max() == 3", True),
    ("[].min() == 0", (RUNTIME, "min called on empty list")),
    ("[].max() == 0", (RUNTIME, "max called on empty list")),
    ("sets.contains([1, 2, 3], [3, 1])", True),
    ("sets.contains([1, 2], [3])", False),
    ("sets.equivalent([1, 2], [2, 1, 1])", True),
    ("sets.intersects([1, 2], [5, 2])", True),
    ("sets.intersects([1], [2])", False),
    ("optional.of(1).hasValue()", True),
    ('{"a": 1}[?"b"].orValue(7) == 7', True),
]


@pytest.mark.parametrize(("expression", "expected"), LISTS_SETS_OPTIONALS)
def test_lists_sets_and_optionals(expression: str, expected: Outcome) -> None:
    check(expression, NOWHERE, expected)


GPU = device(
    driver="gpu.example.com",
    attributes={
        "model": "A100",
        "index": 3,
        "mig": False,
        "driverVersion": version("535.104.5"),
        "dra.example.com/memory": 40,
        "pcieRoot": "pci0000:00",
    },
    capacity={"memory": "40Gi", "dra.example.com/cores": "108"},
)

WRITTEN = [
    ('device.driver == "gpu.example.com"', True),
    ('device.attributes["gpu.example.com"].model == "A100"', True),
    ('device.attributes["dra.example.com"].memory >= 40', True),
    (
        '!device.attributes["gpu.example.com"].mig'
        ' && device.attributes["gpu.example.com"].index < 8',
        True,
    ),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("80Gi")) >= 0', False),
    ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("39Gi"))', True),
    ('device.capacity["dra.example.com"].cores.asInteger() > 100', True),
    ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("535.0.0"))', True),
    ('device.attributes["gpu.example.com"].driverVersion.major() == 535', True),
    ('device.attributes["gpu.example.com"].driverVersion == semver("535.104.5")', True),
    ('device.attributes["gpu.example.com"].model.lowerAscii().startsWith("a1")', True),
    ('device.attributes["gpu.example.com"].pcieRoot.substring(0, 7) == "pci0000"', True),
    ('device.attributes["gpu.example.com"].model.matches("^(A|H)100$")', True),
    ('"%s-%d".format([string(device.attributes["gpu.example.com"].model), 3]) == "A100-3"', True),
    (
        'cel.bind(g, device.attributes["gpu.example.com"], g.model == "A100" && g.index == 3)',
        True,
    ),
    ('has(device.attributes["gpu.example.com"].model)', True),
    ('has(device.attributes["gpu.example.com"].uuid)', False),
    ('has(device.attributes["nvidia.com"].uuid)', False),
    ('"uuid" in device.attributes["gpu.example.com"]', False),
    # DRA's outer maps find every domain, and cel-go's has() asks them (refQualify).
    ("has(device.attributes.nvidia) && has(device.capacity.nvidia)", True),
    ('has(device.attributes.nvidia.uuid) || "has(device.attributes.x)" == ""', False),
    ('"nvidia.com" in device.attributes', False),
    ('device.attributes.all(d, d.endsWith(".com"))', True),
    ('device.attributes["gpu.example.com"].exists(k, k == "mig")', True),
    ('device.attributes["nvidia.com"].size() == 0', True),
    ('device.attributes["gpu.example.com"].uuid == "x"', (RUNTIME, "no such key: uuid")),
    ('device.attributes["nvidia.com"].model == "A100"', (RUNTIME, "no such key: model")),
    (
        'device.driver == "other" && device.attributes["nvidia.com"].model == "A100"',
        False,
    ),
    ('device.attributes["gpu.example.com"].model > 3', (RUNTIME, "no such overload")),
    (
        'device.attributes["gpu.example.com"].index',
        (RUNTIME, "of type int could not be converted to bool"),
    ),
    ('device.attributes["gpu.example.com"].model = "A100"', (COMPILE, "Syntax error")),
    ('device.attributes["gpu.example.com"].model == "A100" &&', (COMPILE, "compilation failed")),
    ("nosuch(device)", (COMPILE, "undeclared reference to 'nosuch'")),
    # Kubernetes' typed `device` refuses this when the claim is created; here `device` is dyn,
    # so the map it yields is refused when evaluated.
    ("device.attributes.model", (RUNTIME, "of type map<dyn, dyn> could not be converted to bool")),
    ('device.attributes["gpu.example.com"].?uuid.orValue("none") == "none"', True),
    ('device.attributes[?"nvidia.com"].hasValue()', False),
    ('ip(device.attributes["gpu.example.com"].model)', (COMPILE, "undeclared reference to 'ip'")),
    # A string that mentions the map stays as written.
    ('device.attributes["gpu.example.com"].model != "device.attributes[\\"x\\"]"', True),
]


@pytest.mark.parametrize(("expression", "expected"), WRITTEN)
def test_selectors_drivers_and_users_write(expression: str, expected: Outcome) -> None:
    check(expression, GPU, expected)


def test_an_overlong_selector_is_a_compile_error_naming_it() -> None:
    expression = "true && " * 1300 + "true"
    compiled = compile_selector(expression)
    assert isinstance(compiled, CelError)
    assert compiled.kind is ErrorKind.COMPILE
    assert compiled.expression == expression


def test_errors_read_as_kube_scheduler_words_them() -> None:
    compiled = compile_selector('device.attributes["gpu.example.com"].uuid == "x"')
    assert isinstance(compiled, Selector)
    error = compiled.matches(GPU)
    assert isinstance(error, CelError)
    assert error.describe("claim default/train", 0) == (
        "claim default/train: selector #0: CEL runtime error: no such key: uuid"
    )
    bad = compile_selector("1")
    assert isinstance(bad, CelError)
    assert bad.describe("class gpu", 2) == (
        "class gpu: selector #2: CEL compile error:"
        " must evaluate to bool or the unknown type, not int"
    )


class TestCache:
    EXPRESSION = 'device.attributes["gpu.example.com"].model == "A100"'

    def test_a_result_is_evaluated_once_per_device_generation(self) -> None:
        cache = SelectorCache()
        assert cache.matches(self.EXPRESSION, GPU) is True
        assert cache.matches(self.EXPRESSION, GPU) is True
        assert (cache.hits, cache.misses) == (1, 1)

    def test_a_new_generation_is_evaluated_again(self) -> None:
        cache = SelectorCache()
        assert cache.matches(self.EXPRESSION, GPU) is True
        changed = device(driver="gpu.example.com", attributes={"model": "H100"}, generation=2)
        assert cache.matches(self.EXPRESSION, changed) is False
        assert cache.matches(self.EXPRESSION, changed) is False
        assert (cache.hits, cache.misses) == (1, 2)

    def test_devices_and_expressions_are_kept_apart(self) -> None:
        cache = SelectorCache()
        other = Device(
            driver="gpu.example.com",
            pool="pool",
            name="dev-1",
            generation=1,
            attributes={"model": "H100"},
            capacity={},
        )
        assert cache.matches(self.EXPRESSION, GPU) is True
        assert cache.matches(self.EXPRESSION, other) is False
        assert cache.matches('device.driver == "gpu.example.com"', other) is True
        assert (cache.hits, cache.misses) == (0, 3)

    def test_errors_are_cached_as_values(self) -> None:
        cache = SelectorCache()
        first = cache.matches("?!", GPU)
        assert isinstance(first, CelError)
        assert first.kind is ErrorKind.COMPILE
        assert cache.matches("?!", GPU) == first
        missing = 'device.attributes["gpu.example.com"].uuid == "x"'
        runtime = cache.matches(missing, GPU)
        assert isinstance(runtime, CelError)
        assert cache.matches(missing, GPU) == runtime
        assert (cache.hits, cache.misses) == (2, 2)

    def test_a_forgotten_device_is_evaluated_again(self) -> None:
        cache = SelectorCache()
        cache.matches(self.EXPRESSION, GPU)
        cache.forget(GPU.key)
        cache.matches(self.EXPRESSION, GPU)
        assert (cache.hits, cache.misses) == (0, 2)

    def test_a_selector_is_compiled_once(self) -> None:
        cache = SelectorCache()
        assert cache.compile(self.EXPRESSION) is cache.compile(self.EXPRESSION)

    def test_results_travel_from_a_child_process_and_merge(self) -> None:
        # Sessions may run in a forked child: its cache comes back pickled, results only.
        child = SelectorCache()
        assert child.matches(self.EXPRESSION, GPU) is True
        assert child.matches("?!", GPU) == child.matches("?!", GPU)
        back = pickle.loads(pickle.dumps(child))
        parent = SelectorCache()
        parent.update(back)
        assert parent.matches(self.EXPRESSION, GPU) is True
        assert (parent.hits, parent.misses) == (1, 0)
        # A result answers only for its own generation, whichever cache computed it.
        newer = device(driver="gpu.example.com", attributes={"model": "H100"}, generation=2)
        assert parent.matches(self.EXPRESSION, newer) is False
        parent.update(back)
        assert parent.matches(self.EXPRESSION, newer) is False
        assert parent.matches(self.EXPRESSION, GPU) is True

    def test_a_selector_pickles_as_its_text(self) -> None:
        compiled = compile_selector(self.EXPRESSION)
        assert isinstance(compiled, Selector)
        again = pickle.loads(pickle.dumps(compiled))
        assert isinstance(again, Selector)
        assert again.expression == self.EXPRESSION
        assert again.matches(GPU) is True
