"""Demucs v4 (HTDemucs, the hybrid transformer): layers, the cross-domain transformer, STFT framing
and the network, kept under demucs' own module names so a converted state dict maps one to one."""
