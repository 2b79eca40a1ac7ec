"""Voice activity: the energy detector and the speech-only map back to the original clock
(energy.py), Silero VAD (silero.py)."""
