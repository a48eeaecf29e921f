"""Read a PNG with the standard library only (zlib + struct), enough to tell a rendered page
from a blank one: `Image.read(path)` gives its pixels as RGB(A) tuples per row.

Only what Chromium's screenshots use: 8-bit truecolour (type 2) or truecolour with alpha
(type 6), not interlaced, any of the five row filters (it mixes them, row by row). Anything
else is refused with ValueError rather than misread.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {2: 3, 6: 4}


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _add_bytes(x: bytes, y: bytes) -> bytes:
    """Bytewise (x + y) mod 256, on whole rows at once (no carry crosses a byte)."""
    n = len(x)
    low = int.from_bytes(b"\x7f" * n, "big")
    high = int.from_bytes(b"\x80" * n, "big")
    a, b = int.from_bytes(x, "big"), int.from_bytes(y, "big")
    return (((a & low) + (b & low)) ^ ((a ^ b) & high)).to_bytes(n, "big")


def unfilter_row(kind: int, row: bytes, prev: bytes, bpp: int) -> bytes:
    """PNG §9.2: undo one row's filter, given the previous row already reconstructed."""
    if kind == 0:
        return row
    if kind == 2:
        return _add_bytes(row, prev)
    if kind == 1:
        out = bytearray(len(row))
        for c in range(bpp):
            out[c::bpp] = bytes(v & 0xFF for v in itertools.accumulate(row[c::bpp]))
        return bytes(out)
    if kind not in (3, 4):
        raise ValueError(f"unknown PNG filter type {kind}")
    out = bytearray(row)
    for i in range(len(out)):
        left = out[i - bpp] if i >= bpp else 0
        if kind == 3:
            out[i] = (out[i] + ((left + prev[i]) >> 1)) & 0xFF
        else:
            upper_left = prev[i - bpp] if i >= bpp else 0
            out[i] = (out[i] + _paeth(left, prev[i], upper_left)) & 0xFF
    return bytes(out)


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    channels: int
    rows: tuple[bytes, ...]  # reconstructed scanlines, `width * channels` bytes each

    @classmethod
    def read(cls, path: Path) -> Image:
        return cls.decode(path.read_bytes())

    @classmethod
    def decode(cls, data: bytes) -> Image:
        if not data.startswith(SIGNATURE):
            raise ValueError("not a PNG file")
        pos, idat, header = len(SIGNATURE), bytearray(), None
        while pos + 8 <= len(data):
            (length,) = struct.unpack(">I", data[pos : pos + 4])
            kind = data[pos + 4 : pos + 8]
            chunk = data[pos + 8 : pos + 8 + length]
            pos += 12 + length
            if kind == b"IHDR":
                header = struct.unpack(">IIBBBBB", chunk)
            elif kind == b"IDAT":
                idat += chunk
            elif kind == b"IEND":
                break
        if header is None:
            raise ValueError("PNG without IHDR")
        width, height, depth, colour, _, _, interlace = header
        if depth != 8 or colour not in _CHANNELS or interlace != 0:
            raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}")
        channels = _CHANNELS[colour]
        stride = width * channels
        raw = zlib.decompress(bytes(idat))
        if len(raw) != height * (stride + 1):
            raise ValueError("PNG image data has the wrong length")
        rows: list[bytes] = []
        prev = bytes(stride)
        for y in range(height):
            start = y * (stride + 1)
            prev = unfilter_row(raw[start], raw[start + 1 : start + 1 + stride], prev, channels)
            rows.append(prev)
        return cls(width, height, channels, tuple(rows))

    def pixels(self, y: int) -> list[bytes]:
        row, n = self.rows[y], self.channels
        return [row[i : i + n] for i in range(0, len(row), n)]

    def colours(self) -> Counter[bytes]:
        """How many pixels have each colour."""
        counts: Counter[bytes] = Counter()
        for y in range(self.height):
            counts.update(self.pixels(y))
        return counts

    def rows_with_ink(self) -> int:
        """Rows with more than one colour in them: text, rules, boxes (a blank page has none)."""
        n = self.channels
        return sum(1 for row in self.rows if row != row[:n] * self.width)


def encode(
    width: int, rows: list[bytes], channels: int = 3, filters: list[int] | None = None
) -> bytes:
    """A PNG of `rows` (each `width * channels` bytes), row y filtered with `filters[y]`:
    for testing the reader against every filter type."""
    stride, bpp = width * channels, channels
    out = bytearray()
    prev = bytes(stride)
    for y, row in enumerate(rows):
        kind = filters[y] if filters else 0
        filtered = bytearray(stride)
        for i in range(stride):
            left = row[i - bpp] if i >= bpp else 0
            up, upper_left = prev[i], prev[i - bpp] if i >= bpp else 0
            predictor = (
                0,
                left,
                up,
                (left + up) >> 1,
                _paeth(left, up, upper_left),
            )[kind]
            filtered[i] = (row[i] - predictor) & 0xFF
        out += bytes([kind]) + filtered
        prev = row

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    colour = {3: 2, 4: 6}[channels]
    ihdr = struct.pack(">IIBBBBB", width, len(rows), 8, colour, 0, 0, 0)
    return (
        SIGNATURE
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(bytes(out)))
        + chunk(b"IEND", b"")
    )
