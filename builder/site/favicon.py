"""The site's icon: the header's brand mark, as SVG and as a real favicon.ico.

Every page links ``static/favicon.svg`` and ``favicon.ico``. The SVG is a
shipped static file, ``templates/static/favicon.svg``, which a test holds to
:func:`svg` (a site's static files are all shipped ones, byte for byte); the
build writes ``favicon.ico`` from :func:`ico` at the site's root, where a
browser asks for it when a page names no icon. Without it every page view
cost a 404.

The mark is the header's (``.brand-mark`` in style.css): a disc in three
sectors, as ``conic-gradient(from 200deg, accent 0 50%, plan 50% 75%,
theory 75%)``, inside a white ring and an accent border. The ICO holds 16×16
and 32×32 images (32-bit BMP with alpha, which every browser reads), drawn
here with 4×4 supersampling: no image library, the same bytes every build.
"""

from __future__ import annotations

import functools
import math
import struct

from builder.site.page import key_of

__all__ = ["ICO_KEY", "ico", "svg"]

_ACCENT = (0x33, 0x46, 0xB8)
_PLAN = (0x0B, 0x5C, 0x60)
_THEORY = (0x66, 0x4F, 0x00)
_WHITE = (0xFF, 0xFF, 0xFF)
# Sectors as (start, end) in degrees, 0 = up, clockwise (CSS conic-gradient).
_SECTORS = ((200.0, 380.0, _ACCENT), (20.0, 110.0, _PLAN), (110.0, 200.0, _THEORY))
# Radii in units of the icon's half-width: border, white ring, pie.
_OUTER, _RING, _PIE = 1.0, 0.84, 0.68

ICO_KEY = key_of("favicon.ico")
"""The page key of ``favicon.ico`` (:class:`builder.site.page.Page`): a constant,
since :func:`ico` reads nothing of the pool, the build or the clock. Its bytes
depend on this module's code and constants and on Python's ``math`` alone, and a
build store made by other code or another Python is discarded whole
(:func:`builder.buildcache.code_digest`), so a build that finds this key in the
store keeps the last build's file (:func:`builder.site.assemble._write_pages`)
instead of drawing it again, which every build did: :func:`ico` is cached per
process, and a ``dreampool build`` is one process. Were the icon ever to depend
on the pool (its title, a colour in pool.yaml), that would go in the key."""


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _point(r: float, degrees: float) -> str:
    a = math.radians(degrees)
    return f"{16 + 16 * r * math.sin(a):.3f} {16 - 16 * r * math.cos(a):.3f}"


@functools.cache
def svg() -> bytes:
    """``static/favicon.svg``: the mark on a 32×32 view box."""
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">',
        f'<circle cx="16" cy="16" r="{16 * _OUTER:g}" fill="{_hex(_ACCENT)}"/>',
        f'<circle cx="16" cy="16" r="{16 * _RING:g}" fill="{_hex(_WHITE)}"/>',
    ]
    for start, end, rgb in _SECTORS:
        large = 1 if end - start > 180 else 0
        parts.append(
            f'<path d="M16 16 L{_point(_PIE, start)} '
            f'A{16 * _PIE:g} {16 * _PIE:g} 0 {large} 1 {_point(_PIE, end)} Z" '
            f'fill="{_hex(rgb)}"/>'
        )
    parts.append("</svg>\n")
    return "\n".join(parts).encode()


def _colour(x: float, y: float) -> tuple[int, int, int] | None:
    """The mark's colour at (x, y), in units of the half-width from the centre."""
    r = math.hypot(x, y)
    if r > _OUTER:
        return None
    if r > _RING:
        return _ACCENT
    if r > _PIE:
        return _WHITE
    angle = math.degrees(math.atan2(x, -y)) % 360  # 0 = up, clockwise
    for start, end, rgb in _SECTORS:
        if start <= angle < end or start <= angle + 360 < end:
            return rgb
    return _ACCENT


def _bmp(size: int, samples: int = 4) -> bytes:
    """One ICO image: BITMAPINFOHEADER, BGRA rows bottom-up, an all-clear AND mask."""
    rows = []
    for row in range(size - 1, -1, -1):  # bottom-up
        line = bytearray()
        for col in range(size):
            totals, hits = [0, 0, 0], 0
            for sy in range(samples):
                for sx in range(samples):
                    x = ((col + (sx + 0.5) / samples) / size) * 2 - 1
                    y = ((row + (sy + 0.5) / samples) / size) * 2 - 1
                    rgb = _colour(x, y)
                    if rgb is not None:
                        hits += 1
                        totals = [t + c for t, c in zip(totals, rgb, strict=True)]
            n = samples * samples
            red, green, blue = (round(t / hits) if hits else 0 for t in totals)
            line += bytes((blue, green, red, round(255 * hits / n)))
        rows.append(bytes(line))
    mask_row = ((size + 31) // 32) * 4  # 1 bit a pixel, rows padded to 32 bits
    header = struct.pack("<IiiHHIIiiII", 40, size, 2 * size, 1, 32, 0, 0, 0, 0, 0, 0)
    return header + b"".join(rows) + bytes(mask_row * size)


@functools.cache
def ico() -> bytes:
    """``favicon.ico``: the mark at 16×16 and 32×32.

    Drawn once per process (0.06 s CPU; 0.21 s under a profiler), and not at
    all by a build that keeps the last one's file: see :data:`ICO_KEY`."""
    images = [(size, _bmp(size)) for size in (16, 32)]
    out = struct.pack("<HHH", 0, 1, len(images))
    offset = 6 + 16 * len(images)
    for size, data in images:
        out += struct.pack("<BBBBHHII", size, size, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
    return out + b"".join(data for _, data in images)
