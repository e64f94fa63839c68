"""A span of seconds in the words of a message ("0.5s", "2.5s", "30s", "15 min").

A limit a message names is often a caller's own bound, or what is left of it, and can be
under a second: printed with `:.0f` it read "did not answer within 0s", and with `:.1f`
a bound of 0.25 s read "0.2s". Past two minutes a span reads in minutes ("15 min", not
"900s"), as the watcher's push backoff has always logged its waits. Kept in a module of
its own, importing nothing, so the client's lightest commands can word their refusals
with it.
"""

from __future__ import annotations


def seconds_text(seconds: float) -> str:
    """`seconds` with the precision a reader needs: minutes (and any whole seconds left
    over, "2 min 30s") from two minutes, whole seconds from 10 s, a tenth under that,
    three significant digits under one second (never rounded to "0s" while above zero),
    each without trailing zeros."""
    whole = round(seconds)
    if whole >= 120:
        minutes, left = divmod(whole, 60)
        return f"{minutes} min {left}s" if left else f"{minutes} min"
    if seconds >= 10:
        return f"{seconds:.0f}s"
    if seconds >= 1:
        return f"{round(seconds, 1):g}s"
    return f"{float(f'{seconds:.3g}'):g}s"
