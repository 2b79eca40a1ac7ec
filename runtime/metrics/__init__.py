"""Scoring: diarization error rate (``der``), source separation SDR and SI-SDR (``sdr``)."""
