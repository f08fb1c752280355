"""JavaScript ``Date`` semantics: ``Date.now()``, ``new Date(x).getTime()``, ``toISOString()``.

Pi stores entry timestamps as ``toISOString()`` strings and message timestamps as epoch
milliseconds; wherever the reference turns one into the other we must produce the same number
or string as V8 (spec 11 section 5).

- :func:`date_parse` is ``Date.parse(s)``: the ECMAScript date-time string format
  (``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, ``±YYYYYY-...``, optional ``THH:mm``, ``:ss``,
  ``.fraction``, ``Z`` or ``±HH:mm``), plus the V8 leniencies that show up in practice
  (lower-case ``t``/``z``, a space instead of ``T``, ``±HHmm`` offsets, ``Z`` after a bare
  date; the space and the bare-date ``Z`` go through V8's legacy parser, which reads years
  0-99 as 2000-2049 / 1950-1999). Date-only forms are UTC, date-time forms without an offset
  are local time. Invalid input gives ``NaN``. Other legacy formats V8 accepts
  (``"Thu, 01 Jan 1970 00:00:00 GMT"``, ``"2025/01/02"``, ...) are not emulated: ``NaN``.
- :func:`date_value` is ``new Date(value).getTime()`` for any JSON value.
- :func:`to_iso_string` is ``new Date(ms).toISOString()``.

Valid results are returned as ``int``; ``NaN`` is ``float("nan")``.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from .values import to_string

__all__ = [
    "MAX_TIME_MS",
    "date_parse",
    "date_value",
    "now_ms",
    "time_clip",
    "to_iso_string",
    "to_js_string",
]

to_js_string = to_string
"""JS ``String(value)`` (kept here for callers of :mod:`pi_condense.js.time`)."""

MAX_TIME_MS = 8_640_000_000_000_000
"""Largest absolute time value a JS ``Date`` can hold (ms since the epoch)."""

_MS_PER_DAY = 86_400_000
_NAN = float("nan")

_ISO_RE = re.compile(
    r"(?P<year>[0-9]{4}|[+-][0-9]{6})"
    r"(?:-(?P<month>[0-9]{2})(?:-(?P<day>[0-9]{2}))?)?"
    r"(?:(?P<sep>[Tt ])(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?)?)?"
    r"(?P<zone>[Zz]|[+-][0-9]{2}:?[0-9]{2})?",
    re.ASCII,
)

# What toISOString() writes (every entry timestamp Pi stores): no optional part to resolve.
_CANONICAL_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z", re.ASCII
)


def now_ms() -> int:
    """``Date.now()``: the current time as integer epoch milliseconds."""
    return time.time_ns() // 1_000_000


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (``day`` may overflow the month)."""
    y = year - (1 if month <= 2 else 0)
    era = y // 400
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468 + (day - 1)


def _civil_from_days(days: int) -> tuple[int, int, int]:
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def time_clip(value: float) -> float:
    """ECMAScript ``TimeClip``: NaN outside +-8.64e15, else truncated toward zero."""
    if not math.isfinite(value) or abs(value) > MAX_TIME_MS:
        return _NAN
    return int(value)


def _local_offset_ms(utc_guess_ms: int) -> int:
    """Offset (ms) of the local time zone at the given wall-clock time, as V8 applies it."""
    seconds = utc_guess_ms // 1000
    try:
        first = time.localtime(seconds).tm_gmtoff
        # Re-evaluate at the UTC instant the first guess points to (DST transitions).
        return int(time.localtime(seconds - first).tm_gmtoff) * 1000
    except (OverflowError, OSError, ValueError):
        return 0


def _is_legacy_form(separator: str | None, zone: str | None) -> bool:
    """Spellings V8 hands to its legacy parser: a space separator, or ``Z`` after a bare date."""
    return separator == " " or (separator is None and zone is not None)


# The canonical texts parsed lately and their values, and the last time value printed and
# its text: a replay reads each entry's timestamp several times, and writes it in a row.
_parsed: dict[str, float] = {}
_PARSED_MAX = 4096
_last_printed: tuple[int, str] = (-1, "1969-12-31T23:59:59.999Z")
_dates: dict[int, str] = {}
"""``YYYY-MM-DD`` (or ``±YYYYYY-MM-DD``) of a day since the epoch, as printed."""


def date_parse(text: str) -> float:
    """``Date.parse(text)`` (see the module docstring for the accepted forms)."""
    if type(text) is str:
        known = _parsed.get(text)
        if known is not None:
            return known
    canonical = _CANONICAL_RE.fullmatch(text)
    if canonical is None:
        return _date_parse_any(text)
    year, month, day, hour, minute, second, millis = map(int, canonical.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and minute <= 59 and second <= 59):
        return _NAN
    if hour > 24 or (hour == 24 and (minute or second or millis)):
        return _NAN
    days = _days_from_civil(year, month, day)
    # A 4-digit year is well inside TimeClip's range: the int is its own TimeClip.
    value = days * _MS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000 + millis
    if type(text) is str:
        if len(_parsed) >= _PARSED_MAX:
            _parsed.clear()
        _parsed[text] = value
    return value


def _date_parse_any(text: str) -> float:
    """:func:`date_parse` of any form (the canonical one included)."""
    m = _ISO_RE.fullmatch(text)
    if m is None:
        return _NAN
    year_text = m.group("year")
    if year_text == "-000000":
        return _NAN
    year = int(year_text)
    month = int(m.group("month") or 1)
    day = int(m.group("day") or 1)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return _NAN
    hour_text = m.group("hour")
    zone = m.group("zone")
    hour = int(hour_text or 0)
    minute = int(m.group("minute") or 0)
    second = int(m.group("second") or 0)
    fraction = m.group("fraction") or ""
    millis = int((fraction + "00")[:3]) if fraction else 0
    if minute > 59 or second > 59:
        return _NAN
    if hour > 24 or (hour == 24 and (minute or second or fraction.strip("0"))):
        return _NAN
    if _is_legacy_form(m.group("sep"), zone) and len(year_text) == 4 and year < 100:
        # V8 parses these spellings with its legacy parser, which reads 2-digit-style years.
        year += 2000 if year < 50 else 1900
    days = _days_from_civil(year, month, day)
    value = days * _MS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000 + millis
    if hour_text is None and zone is not None and zone not in ("Z", "z"):
        return _NAN
    if zone is None:
        if hour_text is not None:
            value -= _local_offset_ms(value)
    elif zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        off_h, off_m = int(digits[:2]), int(digits[2:])
        if off_h > 23 or off_m > 59:
            return _NAN
        value -= sign * (off_h * 60 + off_m) * 60_000
    return time_clip(value)


def date_value(value: Any) -> float:
    """``new Date(value).getTime()`` for a JSON value (``None`` = ``null``)."""
    if isinstance(value, str):
        return date_parse(value)
    if value is None:
        return 0
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, (int, float)):
        return time_clip(float(value))
    return date_parse(to_string(value))


def to_iso_string(ms: float) -> str:
    """``new Date(ms).toISOString()``: ``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC.

    Years outside 0..9999 use the expanded ``±YYYYYY`` form. Raises ``ValueError`` (JS
    ``RangeError``) for an invalid time value.
    """
    global _last_printed
    if type(ms) is int and -MAX_TIME_MS <= ms <= MAX_TIME_MS:
        total = ms  # exact as a double (below 2**53): what time_clip would give
    else:
        clipped = time_clip(float(ms))
        if math.isnan(clipped):
            raise ValueError(f"invalid time value: {ms!r}")
        total = int(clipped)
    last = _last_printed
    if last[0] == total:
        return last[1]
    days, rem = divmod(total, _MS_PER_DAY)
    date = _dates.get(days)
    if date is None:
        if len(_dates) >= 4096:
            _dates.clear()
        year, month, day = _civil_from_days(days)
        sign = "-" if year < 0 else "+"
        year_text = f"{year:04d}" if 0 <= year <= 9999 else f"{sign}{abs(year):06d}"
        date = _dates[days] = f"{year_text}-{month:02d}-{day:02d}"
    seconds, millis = divmod(rem, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{date}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"
    _last_printed = (total, text)
    return text
