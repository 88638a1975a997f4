"""Byte counts as people read them (decimal units, as the Hub and ``du --si`` show them).

>>> human_size(0), human_size(999), human_size(12_345), human_size(1_600_000_000)
('0 B', '999 B', '12.3 kB', '1.6 GB')
"""


def human_size(count: float) -> str:
    """``count`` bytes in B, kB, MB or GB, one decimal above bytes."""
    for unit in ("B", "kB", "MB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"
