"""The Arena tab (issue 53): a signed-in visitor says which cultures they know, is shown one battle at a time (a
prompt naming one of them, two images side by side, the models hidden), votes, sees the models revealed, and goes on
to the next battle; the rankings the votes give, overall and per culture, sit below, with what they rest on and the
votes set aside, and a button withdraws the visitor's own votes for good.

Everything below the page is ``leaderboard.arena``: the service (``Arena``), and what it draws from and serves
(``served``: the scored submissions' images, re-encoded under names that tell nothing). The voter is the app's
sign-in (``Site.who``), never a name typed on the page."""

from __future__ import annotations

import functools
import threading

import gradio as gr
import pandas as pd

from benchmark import tracks as track_registry
from benchmark.arena import REASONS, agreement, rating
from leaderboard import render, tables, world_map
from leaderboard.arena import served
from leaderboard.arena.ballots import VoteRefused
from leaderboard.arena.service import STANDINGS_SECONDS, Arena, ArenaSettings, Shown
from leaderboard.arena.tokens import TokenRefused
from leaderboard.ui.site import Site, Tab, signs_in
from leaderboard.ui.widgets import Parts, text_markdown

SIGN_IN = ("Sign in to vote in the arena: votes are counted per signed-in person, so that no one can vote as many "
           "people. The rankings below are open to everyone.")
SIGN_IN_LOCAL = "This server has no sign-in for the arena: its operator names one (`culturelens serve --user`)."
HOW = ("Choose the cultures you know well. You are shown a prompt naming one of them and two images made for it by "
       "two models, whose names stay hidden until you vote: say which image answers the prompt better for that "
       "culture, or that they are equal, or that both are wrong.")
OUTCOMES = {"a": "Left is better", "b": "Right is better", "tie": "Tie", "both_bad": "Both wrong"}
SAID = {"a": "the left image is better", "b": "the right image is better", "tie": "a tie",
        "both_bad": "both are wrong"}
AGREEMENT_COLUMNS = ["metric", "culture", "agreement", "pairs", "agreed"]
AGREEMENT_NOTE = ("### Which automatic metric agrees with the arena's voters?\nOf the decided battles (left or right "
                  "voted, not set aside), the share each metric orders as the voter did, on the very images they "
                  "saw (a metric's tie counts half), with a 95% Wilson interval and the number of pairs; over all "
                  "cultures and per culture.")
AGREEMENT_NONE = "Agreement with the arena's votes: not measured yet (no decided vote in the arena)."
RANKING_COLUMNS = ["ranking", "rank", "leaderboard rank", "model", "Elo", "Elo 95% interval", "votes", "wins", "ties",
                   "both wrong"]


def _rank_text(rank, low, high) -> str:
    """A rank with its 95% range when the range holds more than it: '3 (2-4)', '1'."""
    return f"{int(rank)}" + (f" ({int(low)}-{int(high)})" if low != high else "")


def _ranks(frame: pd.DataFrame) -> dict[str, str]:
    """Each scored model's rank in a ranked table (``rank``, ``rank_low``, ``rank_high``), as ``_rank_text`` writes
    it; a model the table does not rank is left out (shown as '–')."""
    ranked = frame[frame["provenance"].eq("scored") & frame["rank"].notna()] if len(frame) else frame
    return {row.model: _rank_text(row.rank, row.rank_low, row.rank_high) for row in ranked.itertuples()}


class ArenaTab(Tab):
    """The Arena tab's views over ``site``; ``build`` makes its components. The arena (``Arena``) is made on first
    use, its candidates gathered again whenever the scored results change."""

    def __init__(self, site: Site, settings: ArenaSettings | None = None):
        super().__init__(site)
        self.settings = settings
        self._arena: Arena | None = None
        self._gold: served.Gold | None = None
        self._version: str | None = None
        self._lock = threading.Lock()

    @property
    def arena(self) -> Arena:
        """The arena over the store's queue database, its candidates those of the results now scored, its gold items
        those the server holds when the arena is first used (``served.gold``: the iconic references the store
        serves; the knowledge base the served suite or the worker's settings name, where the operator gives its
        images)."""
        with self._lock:
            version = self.site.results_version()
            if self._arena is None:
                settings = self.settings or ArenaSettings.resolve()
                kb_folder = {**self.site.metric_settings, **self.site.suite.settings()}.get("relevance_kb")
                self._gold = served.gold(self.store, kb_folder, settings.kb_images)
                self._arena = Arena(self.store.queue, self.store.results_folders.keys,
                                    served.candidates(self.catalog, self.store), self._gold.items, settings=settings)
                self._version = version
            elif version != self._version:
                self._arena.candidates = served.candidates(self.catalog, self.store)
                self._version = version
            return self._arena

    # --- the page ------------------------------------------------------------------------------------------------
    def opened(self, profile: gr.OAuthProfile | None = None) -> dict:
        """The tab as it opens for the visitor ``profile`` signs in (or not): the sign-in sentence, or their
        cultures and their open (or next) battle; the rankings for everyone."""
        user = self.site.who(profile)
        shown = self.rankings()
        if user is None:
            return {**shown, "signin": gr.update(value=SIGN_IN, visible=True), "voting": gr.update(visible=False)}
        arena = self.arena
        offered, mine = arena.offered(), arena.cultures(user) or []
        shown.update({"signin": gr.update(visible=False), "voting": gr.update(visible=True),
                      "cultures": gr.update(choices=offered, value=[c for c in mine if c in offered])})
        if not offered:
            return {**shown, **self._no_battle("No scored model has answered a prompt naming a culture yet: the "
                                               "arena opens when two have.")}
        if not mine:
            return {**shown, **self._no_battle("Choose the cultures you know well, then save them.")}
        return {**shown, **self.battle(user)}

    def save_cultures(self, cultures: list[str] | None, profile: gr.OAuthProfile | None = None) -> dict:
        """Record the visitor's cultures and show them a battle."""
        user = self.site.who(profile)
        if user is None:
            return {"signin": gr.update(value=SIGN_IN, visible=True), "voting": gr.update(visible=False)}
        try:
            kept = self.arena.set_cultures(user, list(cultures or []))
        except VoteRefused as refused:
            return self._no_battle(str(refused))
        return {"cultures": gr.update(value=kept), **self.battle(user)}

    def battle(self, user: str) -> dict:
        """``user``'s open battle, or a new one: the prompt, both images, the vote buttons; or why there is none."""
        arena = self.arena
        try:
            shown = arena.next_battle(user)
        except VoteRefused as refused:
            return self._no_battle(str(refused))
        images = self.serve(arena, shown)
        if images is None:  # the images went (a submission deleted): close it and draw again, once
            arena.skip(user, shown.token)
            try:
                shown = arena.next_battle(user)
            except VoteRefused as refused:
                return self._no_battle(str(refused))
            images = self.serve(arena, shown)
            if images is None:
                arena.skip(user, shown.token)
                return self._no_battle("The images of this battle are no longer kept: ask for another battle.")
        left, right = images
        prompt = (f"**Culture: {render.plain(shown.culture)}**\n\n**Prompt:** {render.plain(shown.prompt)}\n\n"
                  "Which image answers the prompt better for this culture? The models are named after your vote.")
        return {"prompt": gr.update(value=prompt, visible=True), "left": gr.update(value=left, visible=True),
                "right": gr.update(value=right, visible=True), "token": shown.token,
                "reasons": gr.update(value=[], visible=True), "buttons": gr.update(visible=True),
                "next": gr.update(visible=False), "reveal": gr.update(value="", visible=False), "said": ""}

    def serve(self, arena: Arena, shown: Shown) -> tuple[str, str] | None:
        """Both images of ``shown`` re-encoded under their battle's names in a fresh download folder (paths), or
        None when either is no longer the store's."""
        known = set(arena.candidates["image"])
        sides = {side: served.owned_bytes(self.store, known, ref) if served.split_reference(ref)
                 else self._gold.bytes_of(ref) for side, ref in (("a", shown.image_a), ("b", shown.image_b))}
        if any(data is None for data in sides.values()):
            return None
        paths = served.write_served(self.site.downloads.fresh(), arena.keys, shown.battle, sides)
        return paths["a"], paths["b"]

    def _no_battle(self, why: str) -> dict:
        return {"prompt": gr.update(value="", visible=False), "left": gr.update(value=None, visible=False),
                "right": gr.update(value=None, visible=False), "token": "", "reasons": gr.update(visible=False),
                "buttons": gr.update(visible=False), "next": gr.update(visible=False),
                "reveal": gr.update(visible=False), "said": render.plain(why)}

    def vote(self, outcome: str, token: str, reasons: list[str] | None,
             profile: gr.OAuthProfile | None = None) -> dict:
        """The visitor's vote on the battle they were shown, then the models revealed and the next button."""
        user = self.site.who(profile)
        if user is None:
            return {"signin": gr.update(value=SIGN_IN, visible=True), "voting": gr.update(visible=False)}
        try:
            reveal = self.arena.vote(user, token, outcome, list(reasons or []))
        except (VoteRefused, TokenRefused) as refused:
            return {"said": render.plain(str(refused)), "buttons": gr.update(visible=False),
                    "next": gr.update(visible=True)}
        text = (f"You voted: {SAID.get(reveal.outcome, reveal.outcome)}"
                + (f" ({render.plain(', '.join(reveal.reasons))})" if reveal.reasons else "") + ".\n\n"
                f"**Left:** {render.plain(reveal.model_a)} · **Right:** {render.plain(reveal.model_b)}")
        if reveal.gold_answer is not None:
            text += (f"\n\nThis was a check battle of two real images from the reference datasets: the "
                     f"{'left' if reveal.gold_answer == 'a' else 'right'} one shows what the prompt names. Check "
                     "battles measure how carefully votes are cast; they count in no model's ranking.")
        return {**self.rankings(), "reveal": gr.update(value=text, visible=True), "buttons": gr.update(visible=False),
                "reasons": gr.update(visible=False), "next": gr.update(visible=True), "token": "", "said": ""}

    def next_battle(self, profile: gr.OAuthProfile | None = None) -> dict:
        user = self.site.who(profile)
        if user is None:
            return {"signin": gr.update(value=SIGN_IN, visible=True), "voting": gr.update(visible=False)}
        return {**self.rankings(), **self.battle(user)}

    def withdraw(self, profile: gr.OAuthProfile | None = None) -> dict:
        """Withdraw every vote of the visitor's for good, and show the rankings without them."""
        user = self.site.who(profile)
        if user is None:
            return {"signin": gr.update(value=SIGN_IN, visible=True), "voting": gr.update(visible=False)}
        count = self.arena.withdraw(user)
        return {**self.rankings(), "said": f"Withdrawn for good: {count} vote{'s' * (count != 1)} of yours. They "
                                           "count in no ranking, and the published votes drop them at the next push."}

    def wired(self, page):
        """``page`` (-> updates by output name) as an event function whose signature stays ``page``'s: Gradio reads
        it to hand the signed-in profile (``Parts.wire``'s ``*values`` would hide it)."""
        @functools.wraps(page)
        def event(*args, **kwargs):
            return self.parts.updates(page(*args, **kwargs))
        return event

    # --- the rankings --------------------------------------------------------------------------------------------
    def rankings(self) -> dict:
        """The arena's rankings, overall and per culture, as one table, and what they rest on (votes, voters, the
        votes set aside and why)."""
        standings = self.arena.standings(max_age=STANDINGS_SECONDS)
        rows, notes = [], []
        beside, measured = self.leaderboard_ranks()
        for name, found in standings.rankings.items():
            notes.append(f"- **{render.plain(name)}**: {render.plain(found.note)}")
            for submission, row in found.rows.iterrows():
                ranked = not found.not_ranked
                rows.append({
                    "ranking": name,
                    "rank": _rank_text(row["rank"], row["rank_low"], row["rank_high"]) if ranked else "not ranked",
                    "leaderboard rank": beside.get(name, {}).get(row["model"], "–"),
                    "model": row["model"],
                    "Elo": round(float(row["elo"])) if ranked else None,
                    "Elo 95% interval": f"{row['elo_low']:.0f}-{row['elo_high']:.0f}"
                    if ranked and pd.notna(row.get("elo_low")) else "",
                    "votes": int(row["votes"]), "wins": int(row["wins"]), "ties": int(row["ties"]),
                    "both wrong": f"{row['both_wrong_share']:.0%}"})
        votes = standings.votes
        aside = votes[votes["set_aside"]] if len(votes) else votes
        if len(votes) == 0:
            summary = "No votes in the rankings yet: they are recomputed at most a minute after a vote."
        else:
            summary = (f"{len(votes):,} votes by {votes['voter'].nunique():,} voters; "
                       f"{len(aside):,} set aside (shown here, counted in no ranking).")
            for reason, part in aside.groupby("reason"):
                summary += (f"\n- {len(part):,} vote{'s' * (len(part) != 1)} of {part['voter'].nunique():,} "
                            f"voter{'s' * (part['voter'].nunique() != 1)} set aside: "
                            f"{render.plain(str(reason).removeprefix('set aside: '))}")
        summary += ("\n\nRankings as of at most a minute ago (Bradley-Terry strengths on the Elo scale, 95% "
                    "bootstrap intervals; a rank range is every rank the model takes within its interval). Beside "
                    f"each, the model's rank on the leaderboard's automatic ranking: {measured}.\n"
                    + "\n".join(notes))
        table = pd.DataFrame(rows, columns=RANKING_COLUMNS)
        return {"standing": summary, "rankings": gr.update(value=table, visible=not table.empty)}

    def leaderboard_ranks(self) -> tuple[dict[str, dict[str, str]], str]:
        """The automatic ranks shown beside the votes' (ranking -> model -> its rank with its 95% range, as the
        Overview shows it), and what they are, in words: the overall ranking's (mean win rate over tracks) beside
        all cultures; beside a culture, the ranking on that country of the first track whose headline metric is
        scored by country (the Map's and the Slices table's numbers)."""
        cat = self.catalog
        out = {rating.OVERALL: _ranks(tables.overall(cat)[0])}
        said = "the overall ranking's (mean win rate over tracks) beside all cultures"
        for track in tables.tracks(cat):
            metric = track_registry.get(track).headline
            if metric and world_map.COUNTRY in tables.slice_names(cat, track, metric):
                rows = world_map.country_rows(cat, track, metric)
                out |= {country: _ranks(part) for country, part in rows.groupby("country", sort=False)}
                return out, (f"{said}; beside a culture, {track_registry.get(track).title}'s ranking on its headline "
                             f"metric on that country")
        return out, said

    # --- every metric against the votes (shown on the Metrics tab) ----------------------------------------------
    def agreement(self) -> pd.DataFrame:
        """Each automatic metric's agreement with the arena's decided votes (``agreement.pair_agreement``: the share
        of decided pairs it orders as the voter did, ties half, with a 95% interval and the number of pairs), over
        all cultures and per culture, on the images the voters saw; empty without a decided vote."""
        standings = self.arena.standings(max_age=STANDINGS_SECONDS)
        votes = standings.votes
        if votes.empty:
            return pd.DataFrame(columns=AGREEMENT_COLUMNS)
        decided = votes[(votes["kind"] == "model") & ~votes["set_aside"] & votes["outcome"].isin(("a", "b"))]
        if decided.empty:
            return pd.DataFrame(columns=AGREEMENT_COLUMNS)
        submissions = sorted(set(decided["submission_a"].dropna()) | set(decided["submission_b"].dropna()))
        values = self.catalog.image_values(submissions)
        labels, directions = tables.metric_labels(self.catalog, submissions), \
            tables.metric_directions(self.catalog, submissions)
        rows = []
        for metric, part in values.groupby("metric", sort=True):
            if metric not in directions:
                continue
            by_image = part.groupby([served.reference(s, p) for s, p in zip(part["submission_id"],
                                                                              part["image_path"])])["value"].mean()
            pairs = pd.DataFrame({"culture": decided["culture"], "outcome": decided["outcome"],
                                  "value_a": decided["image_a"].map(by_image),
                                  "value_b": decided["image_b"].map(by_image)})
            found = agreement.pair_agreement(pairs, higher_is_better=directions[metric])
            for culture, row in found.iterrows():
                if row["pairs"]:
                    rows.append({"metric": labels.get(metric, metric), "culture": culture,
                                 "agreement": f"{row['agreement']:.1%} [{row['ci_low']:.1%}, {row['ci_high']:.1%}]",
                                 "pairs": int(row["pairs"]), "agreed": row["agreed"]})
        return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)

    def build(self) -> Parts:
        """The tab's components and events (called inside a ``gr.Tab``)."""
        signin = text_markdown(value=SIGN_IN, visible=False)
        if signs_in():  # a Space with Hugging Face sign-in (``Site.who``)
            gr.LoginButton()
        with gr.Column(visible=False) as voting:
            gr.Markdown(HOW)
            with gr.Row():
                cultures = gr.Dropdown(label="Cultures you know well", multiselect=True, choices=[],
                                       interactive=True, scale=4)
                save = gr.Button("Save my cultures", scale=1)
            said = text_markdown()
            prompt = text_markdown(visible=False)
            with gr.Row(equal_height=True):  # full screen only: a battle's image is for judging here, not sharing
                left = gr.Image(label="Left", type="filepath", interactive=False, visible=False, height=420,
                                buttons=["fullscreen"], min_width=280)
                right = gr.Image(label="Right", type="filepath", interactive=False, visible=False, height=420,
                                 buttons=["fullscreen"], min_width=280)
            reasons = gr.CheckboxGroup(list(REASONS), label="Why (optional): what is wrong with the image you voted "
                                       "against, or with both", visible=False)
            with gr.Row(visible=False) as buttons:
                choices = {outcome: gr.Button(label, variant="primary" if outcome in ("a", "b") else "secondary")
                           for outcome, label in OUTCOMES.items()}
            reveal = text_markdown(visible=False)
            following = gr.Button("Next battle", visible=False)
            withdraw = gr.Button("Withdraw my votes", variant="stop", size="sm")
        token = gr.State("")
        standing = text_markdown()
        table = gr.Dataframe(label="Arena rankings", interactive=False, wrap=True, elem_classes=["cl-table"],
                             visible=False)
        self.parts = Parts(inputs={"cultures": cultures, "token": token, "reasons": reasons},
                           outputs={"signin": signin, "voting": voting, "cultures": cultures, "said": said,
                                    "prompt": prompt, "left": left, "right": right, "reasons": reasons,
                                    "buttons": buttons, "reveal": reveal, "next": following, "token": token,
                                    "standing": standing, "rankings": table})
        every = list(self.parts.outputs.values())
        save.click(self.wired(self.save_cultures), cultures, every, api_name=False)
        for outcome, button in choices.items():
            button.click(self.wired(_voting(self.vote, outcome)), [token, reasons], every, api_name=False)
        following.click(self.wired(self.next_battle), None, every, api_name=False)
        withdraw.click(self.wired(self.withdraw), None, every, api_name=False)
        return self.parts


def _voting(vote, outcome: str):
    """The click of one vote button: ``vote`` with its outcome (the page sends the token and the reasons; Gradio
    adds the signed-in profile)."""
    def voted(token: str, reasons: list[str] | None, profile: gr.OAuthProfile | None = None) -> dict:
        return vote(outcome, token, reasons, profile)
    return voted
