"""Kubernetes resource quantities ("500m", "1.5Gi", "2e3") as exact decimals.

Parsing happens once, when an object enters the cache; everything after works on integers.
"""

import math
from decimal import Decimal, InvalidOperation

from batchsched.api.errors import InvalidObject

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def parse_quantity(value: object, *, where: str) -> Decimal:
    """Return the quantity's exact value; `where` names the field for the error message."""
    if isinstance(value, bool):
        raise InvalidObject(f"{where}: {value!r} is not a quantity")
    if isinstance(value, int | float):
        number = Decimal(str(value))
    elif isinstance(value, str):
        number = _parse_text(value.strip(), where=where)
    else:
        raise InvalidObject(f"{where}: {value!r} is not a quantity")
    if not number.is_finite():
        raise InvalidObject(f"{where}: {value!r} is not a finite quantity")
    if number < 0:
        raise InvalidObject(f"{where}: {value!r} is negative")
    return number


def _parse_text(text: str, *, where: str) -> Decimal:
    suffix = ""
    for candidate in (*_BINARY, *_DECIMAL):
        if candidate and text.endswith(candidate):
            suffix = candidate
            break
    digits = text[: len(text) - len(suffix)] if suffix else text
    # An exponent and a suffix never go together ("1e3m" is refused, as the API server does).
    if suffix and ("e" in digits or "E" in digits):
        raise InvalidObject(f"{where}: {text!r} is not a quantity")
    # "1e3" is a decimal exponent, but "1E" alone is the exa suffix.
    if not suffix and ("e" in digits or "E" in digits):
        mantissa, _, exponent = digits.replace("E", "e").partition("e")
        if not exponent.lstrip("+-").isdigit():
            raise InvalidObject(f"{where}: {text!r} is not a quantity")
        digits = f"{mantissa}e{exponent}"
    if not digits or digits[-1] in "eE+-" or any(c not in "0123456789.+-eE" for c in digits):
        raise InvalidObject(f"{where}: {text!r} is not a quantity")
    try:
        number = Decimal(digits)
    except InvalidOperation:
        raise InvalidObject(f"{where}: {text!r} is not a quantity") from None
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def format_quantity(value: Decimal) -> str:
    """The quantity in Kubernetes' form: a whole number with the largest suffix that
    keeps it whole, binary or decimal, whichever is shorter (binary on a tie);
    fractions in the smallest of m, u, n that makes them whole (rounded up past nano,
    as the API server rounds)."""
    if value == value.to_integral_value():
        whole = int(value)
        forms = []
        decimal = {k: int(v) for k, v in _DECIMAL.items() if v >= 1000}
        for factors in (_BINARY, decimal):
            for suffix, factor in reversed(factors.items()):
                if whole and whole % factor == 0:
                    forms.append(f"{whole // factor}{suffix}")
                    break
        return min([*forms, str(whole)], key=len)
    for suffix in ("m", "u"):
        scaled = value / _DECIMAL[suffix]
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return f"{math.ceil(value / _DECIMAL['n'])}n"


def ceil_int(value: Decimal) -> int:
    """Round up, as the API server does when a quantity is read as a whole number."""
    return math.ceil(value)
