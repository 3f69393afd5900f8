"""The Cultural Arena's service (issue 53), below the tab: ``service.Arena`` is what the app calls; ``ballots`` keeps
voters, battles, votes and withdrawals in the queue's database; ``tokens`` signs voters' hashes and battle tokens
with the seal keys; ``publish`` writes the ``votes`` config of the requests repo and restores it under the seal. The
rules themselves (ratings, reliability, agreement, matchmaking) are pure functions in ``benchmark.arena``."""
