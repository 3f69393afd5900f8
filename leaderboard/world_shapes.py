"""The countries' outlines a map draws, bundled with the app (never fetched at view time): Natural Earth's 1:110m
admin-0 countries (public domain, naturalearthdata.com) as the npm package ``world-atlas`` 2.0.2 ships them
(``countries-110m.json``, TopoJSON quantised to 1e5 steps, ids the ISO 3166-1 numeric codes; packaged by Mike
Bostock under the ISC licence, ``geodata/LICENSE-world-atlas``), pinned by its sha256 (``SHA256``; the file is
the package's, byte for byte: ``npm pack world-atlas@2.0.2``).

The rings are decoded from the TopoJSON arcs (delta-encoded, quantised: topojson-specification, "2.1.3 Quantized
Positions" and "2.2.4 Arc Indexes") and projected with the Equal Earth projection (Šavrič, Patterson & Jenny 2018,
"The Equal Earth map projection", IJGIS 33(3), Eqs. 1-2): equal areas, so a large country does not look larger
than it is. Antarctica is left out (no prompt is about it; it would take a fifth of the height).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pycountry

from benchmark.errors import CultureLensError

SOURCE = Path(__file__).resolve().parent / "geodata" / "countries-110m.json"
SHA256 = "2516c915867c7baf18ddec727aec46c315541a07cfb3d79a6559b05d5e94eee8"  # world-atlas 2.0.2's file
LEFT_OUT = {"010"}  # Antarctica
# Equal Earth's polynomial (Eq. 2 of Šavrič et al. 2018)
A1, A2, A3, A4 = 1.340264, -0.081106, 0.000893, 0.003796
M = math.sqrt(3) / 2
WIDTH = 960.0  # the drawing's width in SVG units; the height follows from the projection's aspect
_X_MAX = 2 * math.sqrt(3) * math.pi / (3 * A1)  # x at longitude 180 on the equator, unscaled
_Y_MAX = A1 * (math.pi / 3) + A2 * (math.pi / 3) ** 3 + A3 * (math.pi / 3) ** 7 + A4 * (math.pi / 3) ** 9  # lat 90
SOUTH = -58.0  # degrees: the map's southern edge (Tierra del Fuego), Antarctica left out


class ShapesDamaged(CultureLensError):
    """The bundled shapes file is not the pinned one: a packaging bug, never a visitor's doing."""


@dataclass(frozen=True)
class Country:
    """One country's outline: ISO 3166-1 numeric code (``id``, None for the few Natural Earth units without one:
    Kosovo, Somaliland, N. Cyprus), its alpha-2 code where ISO has one, Natural Earth's short name, and its rings
    (projected, in units of a drawing ``WIDTH`` wide and ``height()`` high; a ring past the antimeridian twice,
    once on each side: ``outline`` clips them)."""

    id: str | None
    alpha_2: str | None
    name: str
    rings: tuple[tuple[tuple[float, float], ...], ...]

    @property
    def path(self) -> str:
        """The rings as an SVG path."""
        return "".join("M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in ring) + "Z" for ring in self.rings)


def equal_earth(longitude: float, latitude: float) -> tuple[float, float]:
    """(x, y) of a point in degrees on the Equal Earth projection of the unit sphere (Eqs. 1-2, Šavrič et al.)."""
    theta = math.asin(M * math.sin(math.radians(latitude)))
    t2 = theta * theta
    t6 = t2 * t2 * t2
    x = 2 * math.sqrt(3) * math.radians(longitude) * math.cos(theta) / (3 * (9 * A4 * t6 * t2 + 7 * A3 * t6
                                                                          + 3 * A2 * t2 + A1))
    y = theta * (A1 + A2 * t2 + t6 * (A3 + A4 * t2))
    return x, y


def _scale() -> float:
    return WIDTH / (2 * _X_MAX)


def height() -> float:
    """The drawing's height: from latitude 90 (the north's top) to ``SOUTH``."""
    return (_Y_MAX - equal_earth(0, SOUTH)[1]) * _scale()


def to_svg(longitude: float, latitude: float) -> tuple[float, float]:
    """A point in degrees as SVG coordinates of the drawing (y down, origin top left)."""
    x, y = equal_earth(longitude, latitude)
    return (x + _X_MAX) * _scale(), (_Y_MAX - y) * _scale()


def _arcs(topology: dict) -> list[list[tuple[float, float]]]:
    """Every arc as (longitude, latitude) points: delta-decoded, then de-quantised by the topology's transform."""
    (sx, sy), (tx, ty) = topology["transform"]["scale"], topology["transform"]["translate"]
    out = []
    for arc in topology["arcs"]:
        x = y = 0
        points = []
        for dx, dy in arc:
            x, y = x + dx, y + dy
            points.append((x * sx + tx, y * sy + ty))
        out.append(points)
    return out


def _ring(indexes: list[int], arcs: list[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """A ring from its arc indexes: a negative index ~i is arc i reversed; each arc after the first drops its
    first point (the previous arc's last)."""
    points: list[tuple[float, float]] = []
    for index in indexes:
        arc = arcs[index] if index >= 0 else arcs[~index][::-1]
        points.extend(arc if not points else arc[1:])
    return points


def _unwrapped(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A ring whose longitudes never jump by more than 180 degrees from one point to the next: a ring that crosses
    the antimeridian (Fiji, Russia's east, the Aleutians) goes on past 180 (or -180) instead of across the map."""
    out, shift = [], 0.0
    for i, (lon, lat) in enumerate(points):
        if i and abs(lon + shift - out[-1][0]) > 180:
            shift += 360 if out[-1][0] > lon + shift else -360
        out.append((lon + shift, lat))
    return out


def _rings(polygons: list[list[list[int]]], arcs) -> tuple[tuple[tuple[float, float], ...], ...]:
    """A country's rings, projected; a ring that runs past the antimeridian again on the other side (``outline``
    clips both to the map)."""
    parts = []
    for polygon in polygons:
        for ring in polygon:
            ring_points = _unwrapped(_ring(ring, arcs))
            longitudes = [lon for lon, _ in ring_points]
            for offset in [0.0] + ([-360.0] if max(longitudes) > 180 else []) + ([360.0] if min(longitudes) < -180
                                                                                  else []):
                parts.append(tuple(to_svg(lon + offset, max(lat, SOUTH)) for lon, lat in ring_points))
    return tuple(parts)


@functools.lru_cache(maxsize=1)
def outline() -> tuple[tuple[float, float], ...]:
    """The map's edge (the meridians -180 and 180 from the north pole to ``SOUTH``), projected: what the countries
    are clipped to."""
    steps = [90 - i * (90 - SOUTH) / 60 for i in range(61)]
    return tuple([to_svg(180, lat) for lat in steps] + [to_svg(-180, lat) for lat in reversed(steps)])


def outline_path() -> str:
    """``outline`` as an SVG path."""
    return "M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in outline()) + "Z"


@functools.lru_cache(maxsize=1)
def countries() -> tuple[Country, ...]:
    """Every country of the bundled file but those ``LEFT_OUT``, in the file's order; read once. The file's sha256
    is checked first (``ShapesDamaged``)."""
    data = SOURCE.read_bytes()
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise ShapesDamaged(f"{SOURCE.name} is not world-atlas 2.0.2's countries-110m.json (sha256 differs): "
                            "reinstall the package")
    topology = json.loads(data)
    arcs = _arcs(topology)
    out = []
    for geometry in topology["objects"]["countries"]["geometries"]:
        code = geometry.get("id")
        if code in LEFT_OUT or geometry["type"] not in ("Polygon", "MultiPolygon"):
            continue
        polygons = [geometry["arcs"]] if geometry["type"] == "Polygon" else geometry["arcs"]
        known = pycountry.countries.get(numeric=code) if code else None
        out.append(Country(code, known.alpha_2 if known else None, geometry["properties"]["name"],
                           _rings(polygons, arcs)))
    return tuple(out)


def by_alpha_2() -> dict[str, Country]:
    """The bundled countries by ISO 3166-1 alpha-2 code (those that have one)."""
    return {c.alpha_2: c for c in countries() if c.alpha_2}
