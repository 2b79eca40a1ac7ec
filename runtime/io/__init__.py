"""Bytes on disk: the native bundle (format 1 and 2), checkpoint and TorchScript readers that
unpickle nothing beyond tensors, audio decoding, atomic files and hashes."""
