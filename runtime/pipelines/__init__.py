"""Task logic without CLI policy, one package or module per task.

``transcribe/`` (``oasr.transcribe``: the shared entry, one engine per decoding family, long-form
chunking for encoder-only families), ``diarize/`` (``oasr.diarize``: timeline, clustering,
speaker embeddings, speaker attribution of transcripts), ``vad/`` (energy and Silero VAD),
``pitch`` (``oasr.pitch``), ``common`` (audio input every task takes), ``file_tasks`` (an audio
task's work on one file, for the CLI's input runner and ``oasr batch``).
"""
