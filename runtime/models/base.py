"""What every architecture provides: a config dataclass and an nn.Module that knows its buffers."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from .config import BaseModelConfig  # re-exported: where every architecture imports it from


class OasrModel(nn.Module):
    """Base of every runtime model.

    ``computed_buffers`` names tensors the model rebuilds from its config: they are never
    stored in a bundle, and a source that carries them must agree with the rebuilt values.
    """

    config_class: ClassVar[type[BaseModelConfig]]
    computed_buffers: ClassVar[tuple[str, ...]] = ()
    capabilities: ClassVar[frozenset[str]] = frozenset()
    display_name: ClassVar[str] = ""  # how messages name the architecture ("" : its entry-point name)
    # `oasr quantize`: why this architecture is refused; None once it declares rules it was validated with.
    quant_refusal: ClassVar[str | None] = "no weight-only quantization rules have been validated for it"
    # fnmatch patterns of weight names that stay in floating point when the architecture is quantized.
    quant_keep: ClassVar[tuple[str, ...]] = ()
    # (name prefix, rows): the quantized modules under the prefix take oneDNN's AMX int8 kernel
    # for inputs of at least that many rows where the CPU has AMX (oasr.quant.modules), fbgemm's
    # below; modules under no prefix keep fbgemm's.
    quant_amx_rows: ClassVar[tuple[tuple[str, int], ...]] = ()
    # CPU hooks: what the compute plan (oasr.precision) may ask of this family on a CPU.
    # dtype auto runs an int8 variant of the bundle: only where it was measured faster with the
    # accuracy held.
    auto_int8_on_cpu: ClassVar[bool] = False
    # ``attend_in`` runs the family's long attentions in another dtype: under dtype auto, bf16
    # beside int8 weights where the CPU multiplies bf16 natively.
    bf16_attention: ClassVar[bool] = False

    def __init__(self, config: BaseModelConfig):
        super().__init__()
        self.config = config

    def attend_in(self, dtype: torch.dtype | None, rows: int | None = None) -> None:
        """Run the long attentions in ``dtype`` (None: the model's), as explicit products over
        ``rows`` query rows at a time when given. A family that sets ``bf16_attention`` has them."""
        raise NotImplementedError(f"{type(self).__name__} declares no long attentions (bf16_attention)")

    def computed_buffer_values(self) -> dict[str, torch.Tensor]:
        """Fresh fp32 CPU values of every computed buffer."""
        return {}

    def expected_tensors(self) -> dict[str, tuple[torch.Size, torch.dtype]]:
        """Every stored tensor: name -> (shape, dtype), computed buffers excluded."""
        return {
            name: (t.shape, t.dtype)
            for name, t in self.state_dict(keep_vars=True).items()
            if name not in self.computed_buffers
        }
