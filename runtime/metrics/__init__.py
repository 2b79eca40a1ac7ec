"""Scoring: diarization error rate (``der``)."""
