"""When a majority vote is settled before every subsample has answered (consensus exit).

A vote (:class:`~sampling_core.strategies.MajorityVote`) counts the normalised answers of
the passing attempts (of every completed attempt while none passes); a tie goes to the
answer whose first vote comes first in (subsample_index, attempt) order. A subsample that
has not ended yet may still add one vote: it stops at its first pass. So while ``open``
subsamples may still answer, the leader is

* **settled exactly** (:func:`settled`) when no way those ``open`` votes can fall makes
  another answer the pick: every rival, even given all of them, stays behind the leader
  (or ties it and loses the tie, because its first vote would still come later). No vote
  has passed yet: never settled (a first pass would replace the whole pool);
* **settled with probability** :func:`leader_stays` otherwise: the posterior probability
  that the leader is still the pick once the ``open`` votes are in, under a Beta-binomial
  model of the leader against the runner-up. With ``a`` votes for the leader and ``b`` for
  the runner-up, each open vote goes to the leader with probability ``theta``, to the
  runner-up otherwise, ``theta ~ Beta(1 + a, 1 + b)`` (a uniform prior updated by the
  votes so far). The number ``X`` of the ``m`` open votes that go to the leader is then
  Beta-binomial, ``P(X = x) = C(m, x) B(x + 1 + a, m - x + 1 + b) / B(1 + a, 1 + b)``, and
  the leader stays the pick when ``a + X > b + m - X`` (or equal, and it wins the tie).
  Giving every open vote to one of the two is the worst case for the leader's margin;
  answers further behind are not modelled.

For example, 1 vote against 0 with 1 open vote: the rival ties 1-1 when ``X = 0``, and
``P(X = 0) = B(2, 2) / B(2, 1) = (1/6) / (1/2) = 1/3``: the leader stays with probability
2/3 when the rival would win that tie, 1 when it would lose it. 2 against 0 with 2 open
votes: ``P(X = 0) = B(3, 3) / B(3, 1) = (1/30) / (1/3) = 1/10`` (a 2-2 tie), so 9/10 or 1.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

__all__ = ["Standing", "leader_stays", "settled", "standing"]


class Standing:
    """The votes so far: each answer's count and the position of its first vote.

    ``order`` lists the answers by their first vote (the tie-break order).
    """

    __slots__ = ("counts", "first", "order")

    def __init__(self) -> None:
        self.counts: dict[Hashable, float] = {}
        self.first: dict[Hashable, int] = {}
        self.order: list[Hashable] = []

    def add(self, answer: Hashable, position: int, weight: float = 1.0) -> None:
        """One vote for ``answer`` from subsample ``position``."""
        if answer not in self.counts:
            self.counts[answer] = 0.0
            self.first[answer] = position
            self.order.append(answer)
        elif position < self.first[answer]:
            self.first[answer] = position
        self.counts[answer] += weight

    def leader(self) -> Hashable | None:
        """The answer with the most votes (ties: the first voted for), or ``None``."""
        best, best_count = None, -1.0
        for answer in sorted(self.order, key=self.first.__getitem__):
            if self.counts[answer] > best_count:
                best, best_count = answer, self.counts[answer]
        return best


def standing(votes: Sequence[tuple[Hashable, int]]) -> Standing:
    """The standing of ``(answer, subsample_index)`` votes."""
    out = Standing()
    for answer, position in votes:
        out.add(answer, position)
    return out


def settled(votes: Standing, open_positions: Sequence[int], max_weight: float = 1.0) -> bool:
    """Whether no way the open subsamples (at ``open_positions``, each adding at most one
    vote of at most ``max_weight``) can vote makes another answer the pick."""
    leader = votes.leader()
    if leader is None:
        return False
    if not open_positions:
        return True
    lead = votes.counts[leader]
    most = len(open_positions) * max_weight
    earliest_open = min(open_positions)
    leader_first = votes.first[leader]
    rivals = [a for a in votes.order if a != leader]
    # A new answer, voted only by the open subsamples, is a rival too (count 0).
    candidates = [(votes.counts[a], votes.first[a]) for a in rivals] + [(0.0, earliest_open)]
    for count, first in candidates:
        reach = count + most
        if reach > lead:
            return False
        if reach == lead and min(first, earliest_open) < leader_first:
            return False  # it would tie, and win the tie by its earlier first vote
    return True


def leader_stays(lead: int, runner_up: int, open_votes: int, leader_wins_tie: bool) -> float:
    """The posterior probability that the leader (``lead`` votes) is still ahead of the
    runner-up (``runner_up`` votes) once ``open_votes`` more are in (see the module)."""
    if open_votes <= 0:
        return 1.0 if lead > runner_up or (lead == runner_up and leader_wins_tie) else 0.0
    a, b, m = 1.0 + lead, 1.0 + runner_up, open_votes
    log_norm = _log_beta(a, b)
    total = 0.0
    for x in range(m + 1):
        mine, theirs = lead + x, runner_up + m - x
        if mine > theirs or (mine == theirs and leader_wins_tie):
            log_p = _log_choose(m, x) + _log_beta(x + a, m - x + b) - log_norm
            total += math.exp(log_p)
    return min(1.0, total)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
