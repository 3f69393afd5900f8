"""A world map as inline SVG (no script, no request to any host): each country of ``world_shapes`` filled by its
cell, a ``<title>`` on each for the hover text (and screen readers), and its legend as HTML below it; countries
without data hatched grey and named so in the legend. Colours are read by colour-blind visitors too: values on
viridis (perceptually uniform, monotone in lightness: van der Walt & Smith's matplotlib colormap, sampled at 9
stops), differences on a diverging blue-orange scale (ColorBrewer's PuOr family with blue in place of purple, no
red-green contrast), a tie (an interval that holds 0) dotted on the scale's neutral middle."""

from __future__ import annotations

import html
from dataclasses import dataclass

from leaderboard import world_shapes

# viridis at 0, 1/8, ..., 1 (matplotlib's _viridis_data, rounded to 8-bit)
VIRIDIS = ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725")
# blue (the second model better) through a neutral light grey to orange (the first model better)
BLUE_ORANGE = ("#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f2f2f2", "#fee0b6", "#fdb863", "#e08214", "#b35806")
NO_DATA = "url(#cl-no-data)"
TIE = "url(#cl-tie)"


@dataclass(frozen=True)
class Cell:
    """What one country shows: its ``fill`` (a colour, ``TIE``), and ``title``, the hover text (plain text)."""

    fill: str
    title: str


@dataclass(frozen=True)
class Legend:
    """The legend's scale: its colours (``VIRIDIS`` or ``BLUE_ORANGE``), the text at its two ends and a caption;
    ``tie``: whether the map marks ties (a swatch says so)."""

    colours: tuple[str, ...]
    low: str
    high: str
    caption: str
    tie: bool = False


def colour(position: float, colours: tuple[str, ...]) -> str:
    """The colour at ``position`` (0 to 1, clipped) of a scale of evenly spaced stops, interpolated in sRGB."""
    position = min(max(float(position), 0.0), 1.0) * (len(colours) - 1)
    i = min(int(position), len(colours) - 2)
    share = position - i
    a, b = (tuple(int(c[k:k + 2], 16) for k in (1, 3, 5)) for c in (colours[i], colours[i + 1]))
    return "#" + "".join(f"{round(x + (y - x) * share):02x}" for x, y in zip(a, b))


_DEFS = """<defs>
<pattern id="cl-no-data" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
<rect width="6" height="6" fill="#e5e5e5"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9a9a9a" stroke-width="1.6"/>
</pattern>
<clipPath id="cl-edge"><path d="%s"/></clipPath>
<pattern id="cl-tie" width="5" height="5" patternUnits="userSpaceOnUse">
<rect width="5" height="5" fill="#f2f2f2"/><circle cx="2.5" cy="2.5" r="1.1" fill="#555"/>
</pattern>
</defs>"""


def svg(cells: dict[str, Cell], label: str) -> str:
    """The map: every bundled country, those in ``cells`` (by ISO alpha-2 code) filled and titled by their cell,
    the others hatched with the title "<name>: no data". ``label``: what the map shows, said to screen readers (the
    table beside it says the rest)."""
    width, height = world_shapes.WIDTH, world_shapes.height()
    shapes = []
    for country in world_shapes.countries():
        cell = cells.get(country.alpha_2 or "")
        fill, title = (cell.fill, cell.title) if cell else (NO_DATA, f"{country.name}: no data")
        shapes.append(f'<path d="{country.path}" fill="{fill}" data-country="{html.escape(country.alpha_2 or "")}">'
                      f"<title>{html.escape(title)}</title></path>")
    edge = world_shapes.outline_path()
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
            f'aria-label="{html.escape(label)}" class="cl-map" style="width:100%;height:auto">{_DEFS % edge}'
            f'<path d="{edge}" fill="#f7fbff"/><g stroke="#ffffff" stroke-width="0.5" clip-path="url(#cl-edge)">'
            f"{''.join(shapes)}</g></svg>")


# The legend's swatches as CSS, drawn as the SVG patterns are: grey hatching, dots on light grey.
_SWATCH_CSS = {NO_DATA: "background: repeating-linear-gradient(45deg, #9a9a9a 0 1.6px, #e5e5e5 1.6px 6px)",
               TIE: "background: radial-gradient(circle, #555 1.1px, #f2f2f2 1.3px) 0 0 / 5px 5px"}


def legend_html(legend: Legend) -> str:
    """The legend under the map, as HTML (its text stays readable at any width): the scale as a gradient with its
    two ends and caption, then the swatches: no data, and a tie when the map marks ties."""
    gradient = ", ".join(legend.colours)
    swatches = [(NO_DATA, "no data")] + ([(TIE, "no difference (the interval holds 0)")] if legend.tie else [])
    items = "".join(f'<span class="cl-swatch"><i style="{_SWATCH_CSS[fill]}"></i>{html.escape(text)}</span>'
                    for fill, text in swatches)
    return (f'<div class="cl-legend"><div class="cl-scale"><i style="background: linear-gradient(to right, '
            f'{gradient})"></i><span>{html.escape(legend.low)}</span><span>{html.escape(legend.caption)}</span>'
            f'<span>{html.escape(legend.high)}</span></div>{items}</div>')
