"""Tests of features together (the response cache, early stop, confidence, scorers, votes, rescore,
retries, cancelled calls): the numbers each gives are right with the others."""
