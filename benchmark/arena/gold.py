"""The gold battles' reference items, from the datasets whose images are real photographs of named artifacts:
CUBE-CSpace's artifacts as the relevance knowledge base holds them (each entity's country and category, its Commons
images) and the iconic references (each work's country and kind, its Wikidata / Commons images).

An item is one real image of one named artifact: ``name``, ``culture`` (its country), ``group`` (what it is matched
within: the CUBE concept, or the iconic reference's kind), ``image`` (a reference the app serves: ``kb:<sha256>``,
``iconic:<prompt_id>:<n>``) and ``source``. ``matchmaking.gold_battle`` sets an item against one of the same group
from another culture. Items without a country, and images shared by several entities (which artifact would they
show?), are left out.
"""

from __future__ import annotations

import pandas as pd

from benchmark.arena.matchmaking import GOLD_COLUMNS


def from_knowledge_base(entities: pd.DataFrame, images: pd.DataFrame) -> pd.DataFrame:
    """Items from a relevance knowledge base's tables (``entities.parquet``: entity_id, name, country, category;
    ``images.parquet``: image_sha256, entity_ids): one per image of exactly one entity that has a country."""
    if not {"country", "category"} <= set(entities.columns):
        return pd.DataFrame(columns=list(GOLD_COLUMNS))
    single = images[[len(ids) == 1 for ids in images["entity_ids"]]]
    rows = pd.DataFrame({"entity_id": [ids[0] for ids in single["entity_ids"]],
                         "image": "kb:" + single["image_sha256"].astype(str)})
    joined = rows.merge(entities[["entity_id", "name", "country", "category"]], on="entity_id")
    joined = joined[joined["country"].notna() & (joined["country"] != "") & joined["category"].notna()]
    return pd.DataFrame({"name": joined["name"], "culture": joined["country"], "group": joined["category"],
                         "image": joined["image"], "source": "CUBE-CSpace"}).reset_index(drop=True)


def from_iconic_references(references: pd.DataFrame) -> pd.DataFrame:
    """Items from the iconic references' rows (prompt_id, title, country, kind, and ``images``: how many reference
    images the row holds): one per image of a work that has a country."""
    rows = [{"name": row.title, "culture": row.country, "group": row.kind, "image": f"iconic:{row.prompt_id}:{n}",
             "source": "iconic references"}
            for row in references.itertuples() if pd.notna(row.country) and row.country
            for n in range(int(row.images))]
    return pd.DataFrame(rows, columns=list(GOLD_COLUMNS))
