"""What a model builder pastes into a model card or a paper: a badge (SVG, shields.io's flat style: "CultureLens |
rank 3 of 12 · suite v1 · 2026-03-03") and a card (PNG, 1200 x 630: the overall standing, the profile per track and
the map), each naming the protocol it ranks under and the date of the newest result the ranking rests on. Pure
drawing: the numbers come from ``model_profile``."""

from __future__ import annotations

import html
import io

import pandas as pd
from PIL import Image, ImageDraw, ImageFont

from leaderboard import choropleth, world_shapes
from leaderboard.model_profile import Standing

LEFT = "CultureLens"
CHAR_WIDTH = 6.5  # px per character of Verdana 11px, as shields.io sizes its text (a generous average)
CARD = (1200, 630)


def badge_text(standing: Standing | None, protocol: str) -> str:
    """The badge's right half: 'rank 3 of 12 · suite v1 · 2026-03-03', 'not ranked · suite v1' for a model the
    overall ranking lists apart or does not hold."""
    if standing is None:
        return f"not ranked · {protocol}"
    return " · ".join(part for part in (standing.short, protocol, standing.date) if part)


def badge_svg(model: str, standing: Standing | None, protocol: str) -> str:
    """The badge as a standalone SVG document: grey 'CultureLens', then the standing on blue (green for rank 1, grey
    when not ranked); its <title> says the whole in a sentence, for screen readers and hover."""
    right = badge_text(standing, protocol)
    colour = "#9f9f9f" if standing is None or standing.rank is None else ("#44cc11" if standing.rank == 1
                                                                          else "#007ec6")
    left_w, right_w = round(len(LEFT) * CHAR_WIDTH + 12), round(len(right) * CHAR_WIDTH + 12)
    width = left_w + right_w
    title = html.escape(f"{model} on the CultureLens leaderboard: {right}")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" aria-label="{title}">'
            f"<title>{title}</title>"
            f'<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/>'
            f'<stop offset="1" stop-opacity=".1"/></linearGradient>'
            f'<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>'
            f'<g clip-path="url(#r)"><rect width="{left_w}" height="20" fill="#555"/>'
            f'<rect x="{left_w}" width="{right_w}" height="20" fill="{colour}"/>'
            f'<rect width="{width}" height="20" fill="url(#s)"/></g>'
            f'<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
            f'font-size="11"><text x="{left_w / 2:.1f}" y="14">{LEFT}</text>'
            f'<text x="{left_w + right_w / 2:.1f}" y="14">{html.escape(right)}</text></g></svg>')


def _font(size: int) -> ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _rgb(fill: str) -> tuple[int, int, int]:
    """A cell's fill as a colour (the patterns as their base: no data light grey, a tie the neutral middle)."""
    if fill == choropleth.NO_DATA:
        return (0xe5, 0xe5, 0xe5)
    if fill == choropleth.TIE:
        return (0xc8, 0xc8, 0xc8)
    return tuple(int(fill[k:k + 2], 16) for k in (1, 3, 5))


def _draw_map(cells: dict[str, choropleth.Cell], size: tuple[int, int]) -> Image.Image:
    """The map's countries filled as the SVG fills them, drawn at ``size`` and cut to the map's edge."""
    scale = min(size[0] / world_shapes.WIDTH, size[1] / world_shapes.height())
    layer = Image.new("RGB", size, "#ffffff")
    draw = ImageDraw.Draw(layer)
    for country in world_shapes.countries():
        cell = cells.get(country.alpha_2 or "")
        fill = _rgb(cell.fill if cell else choropleth.NO_DATA)
        for ring in country.rings:
            if len(ring) > 2:
                draw.polygon([(x * scale, y * scale) for x, y in ring], fill=fill, outline="#ffffff")
    edge = Image.new("L", size, 0)
    ImageDraw.Draw(edge).polygon([(x * scale, y * scale) for x, y in world_shapes.outline()], fill=255)
    return Image.composite(layer, Image.new("RGB", size, "#ffffff"), edge)


def card_png(model: str, standing: Standing | None, protocol: str, profile: pd.DataFrame,
             cells: dict[str, choropleth.Cell], map_label: str) -> bytes:
    """The card: the model's name, its overall standing with the protocol and date, its profile per track (rank,
    score, win rate) and its map (``map_label`` says what it shows)."""
    card = Image.new("RGB", CARD, "#ffffff")
    draw = ImageDraw.Draw(card)
    draw.rectangle([0, 0, CARD[0], 70], fill="#1f2937")
    draw.text((30, 18), f"CultureLens · {model}"[:70], font=_font(30), fill="#ffffff")
    headline = badge_text(standing, protocol)
    if standing is not None and standing.win_rate is not None:
        headline += f" · mean win rate {standing.win_rate:.2f}"
    draw.text((30, 88), headline, font=_font(24), fill="#111827")
    y = 136
    draw.text((30, y), "Track", font=_font(18), fill="#6b7280")
    draw.text((250, y), "Rank", font=_font(18), fill="#6b7280")
    draw.text((330, y), "Score", font=_font(18), fill="#6b7280")
    draw.text((420, y), "Win rate", font=_font(18), fill="#6b7280")
    for _, row in profile.head(6).iterrows():
        y += 34
        # n/a, not a dash: the default font has no en dash
        rank = "n/a" if pd.isna(row["Rank"]) else f"{int(row['Rank'])} of {int(row['Models ranked'])}"
        draw.text((30, y), str(row["Track"]).split(" (")[0][:22], font=_font(18), fill="#111827")
        draw.text((250, y), rank, font=_font(18), fill="#111827")
        draw.text((330, y), "n/a" if pd.isna(row["Score"]) else f"{row['Score']:.3f}", font=_font(18),
                  fill="#111827")
        draw.text((420, y), "n/a" if pd.isna(row["Win rate"]) else f"{row['Win rate']:.2f}", font=_font(18),
                  fill="#111827")
    if cells:
        shown = _draw_map(cells, (620, 330))
        card.paste(shown, (560, 130))
        draw.text((560, 470), map_label[:60], font=_font(16), fill="#374151")
    draw.text((30, 590), "cultural competence of text-to-image models · " + protocol, font=_font(16), fill="#6b7280")
    out = io.BytesIO()
    card.save(out, format="PNG", optimize=True)
    return out.getvalue()
