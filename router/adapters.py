"""One base model with every capability adapter loaded (peft multi-adapter).

Activating a single adapter is a pointer change (`set_adapter`); the base label
turns the adapter layers off. A weighted mix (top-p routing, the uniform merge)
is built once with peft's `add_weighted_adapter(..., combination_type="cat")`:
one LoRA of rank sum r_c whose update is exactly sum_c alpha_c s_c B_c A_c, so
the same mix saved with `export` is a plain adapter vLLM can serve. Rows of
different configurations can also share one batch (`configure_rows`), each
row's update that same sum with its own weights.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from router.capabilities import CapabilitySet, load_capabilities
from router.errors import RouterError
from router.modes import Route
from router.prompt import BASE
from trainer.errors import first_line
from trainer.models import peft_quietly
from trainer.settings import PRECISION, Precision

MAX_MIXES = 8  # weighted mixes kept loaded (least recently used ones are deleted)

RowConfig = tuple[tuple[str, float], ...]  # a configuration's weights, sorted by name


def row_config(weights: dict[str, float]) -> RowConfig:
    """The hashable form of a configuration's weights that `configure_rows` takes."""
    return tuple(sorted(weights.items()))


class AdapterBank:
    """The routed model: base weights once, adapters by name, mixes on demand."""

    def __init__(self, base: Any, capabilities: CapabilitySet) -> None:
        from peft import PeftModel

        self.capabilities = capabilities
        self.model = base
        for number, capability in enumerate(capabilities.capabilities):
            try:
                with peft_quietly():
                    if number == 0:
                        self.model = PeftModel.from_pretrained(
                            base, capability.path, adapter_name=capability.name
                        )
                    else:
                        self.model.load_adapter(
                            capability.path, adapter_name=capability.name
                        )
            except Exception as exc:  # noqa: BLE001 - peft and safetensors raise many kinds
                raise RouterError(
                    f"the adapter {capability.path} is damaged or does not fit this base "
                    f"model ({first_line(exc)}); retrain it on the model given to --model"
                ) from None
        self.model.eval()
        self.model.requires_grad_(False)
        from peft.tuners.tuners_utils import BaseTunerLayer

        self.layers = [m for m in self.model.modules() if isinstance(m, BaseTunerLayer)]
        self.baselines: list[
            str
        ] = []  # adapters played by name only (see add_baseline)
        self.mixes: OrderedDict[str, str] = OrderedDict()  # route key -> adapter name
        # each layer's own scaling of the adapters `configure_rows` scaled per row
        self.scalings: list[dict[str, float]] = [{} for _ in self.layers]
        self.rows: list[RowConfig | None] | None = None  # what configure_rows set
        self.row_names: list[str] = []  # the adapters those rows use
        self.built = 0
        self.active = BASE
        self.active_weights: dict[str, float] = {}
        self.activate_weights({})

    @classmethod
    def load(
        cls, folder: str | Path, model: str, precision: Precision = PRECISION
    ) -> tuple[AdapterBank, Any]:
        """The base model `model` (its weights in `precision`, with the adapters'
        chat template) carrying every adapter in `folder`, and its tokenizer."""
        from trainer.models import load_base

        capabilities = load_capabilities(folder, model)
        base, tokenizer = load_base(
            model, chat_template=capabilities.chat_template, precision=precision
        )
        return cls(base, capabilities), tokenizer

    def generator(self, tokenizer: Any, **options: Any) -> Any:
        """A `TransformersGenerator` whose rows each decode under their own
        configuration (`configure_rows`); `options` as the generator takes them."""
        from trainer.generation import TransformersGenerator

        return TransformersGenerator(
            self.model, tokenizer, configure=self.configure_rows, **options
        )

    def _mix(self, weights: dict[str, float]) -> str:
        key = Route("mix", BASE, weights).key
        if key in self.mixes:
            self.mixes.move_to_end(key)
            return self.mixes[key]
        self.built += 1
        name = f"mix{self.built}"
        names = sorted(weights)
        self._own_scalings()  # peft builds the mix from each layer's scaling
        self.model.add_weighted_adapter(
            names, [weights[n] for n in names], name, combination_type="cat"
        )
        self.mixes[key] = name
        if len(self.mixes) > MAX_MIXES:
            _, oldest = self.mixes.popitem(last=False)
            if oldest != self.active:
                self.model.delete_adapter(oldest)
        return name

    def add_baseline(
        self, name: str, path: Path | None = None, combination: str = "ties_svd"
    ) -> None:
        """Load another adapter from `path` (one trained on a mixture of the environments),
        or merge the capability adapters into one (`combination`: a peft weighted-adapter
        type; TIES by default, density 0.5, each adapter at weight 1). The baseline is
        then played with `activate_weights({name: 1.0})`, never routed to."""
        if name in self.capabilities.names or name in self.baselines:
            raise RouterError(f"an adapter named {name} is already loaded")
        names = self.capabilities.names
        self._own_scalings()  # a merge is built from each layer's scaling
        with peft_quietly():
            if path is not None:
                self.model.load_adapter(str(path), adapter_name=name)
            else:
                self.model.add_weighted_adapter(
                    names, [1.0] * len(names), name,
                    combination_type=combination, density=0.5,
                )  # fmt: skip
        self.model.requires_grad_(False)
        self.baselines.append(name)
        self._point(self.active)

    def adapter_for(self, weights: dict[str, float]) -> str:
        """The loaded adapter that applies `weights` (built when first asked for)."""
        self._known(weights)
        if len(weights) == 1 and abs(next(iter(weights.values())) - 1) < 1e-9:
            return next(iter(weights))
        return self._mix(weights)

    def _known(self, names: Any) -> None:
        """Refuse adapter names that are neither a capability nor a baseline."""
        unknown = set(names) - set(self.capabilities.names) - set(self.baselines)
        if unknown:
            raise RouterError(
                f"no adapters named {sorted(unknown)}; have {self.capabilities.names}"
            )

    def activate_weights(self, weights: dict[str, float]) -> str:
        """Make `weights` the live configuration ({}: the base model); returns its name."""
        name = self.adapter_for(weights) if weights else BASE
        self._point(name)
        self.active, self.active_weights = name, dict(weights)
        return name

    def configure_rows(self, configs: Sequence[RowConfig | None] | None) -> None:
        """Set the next forward pass's rows each to its own configuration (`row_config`
        of its weights, () the base model; a row of None, or `configs` None: the
        configuration last activated). `TransformersGenerator(configure=...)` calls it
        before every pass, so rows of different adapters and mixes decode in one
        batch (multi-LoRA batching, as S-LoRA and vLLM serve many adapters at once).

        Every adapter some row uses is active, its update scaled per row: peft's
        layer adds B_c(A_c(x)) * scaling_c for each active adapter c, and a scaling
        of shape [rows, 1, 1] holding w_row,c * s_c gives each row
        sum_c w_row,c s_c B_c A_c x, the update `_mix` builds as one adapter.
        """
        if configs is None:
            self._point(self.active)
            return
        configs = list(configs)
        if configs != self.rows:
            self._scale_rows(configs)
        # set on every pass: peft's disable_adapter() (the router's scoring) re-enables
        # every layer when it exits
        for layer in self.layers:
            layer._disable_adapters = not self.row_names
            if self.row_names:
                layer._active_adapter = self.row_names

    def _scale_rows(self, configs: list[RowConfig | None]) -> None:
        """Each layer's scaling of every adapter the rows use, as [rows, 1, 1]."""
        import torch

        weights = [
            self.active_weights if config is None else dict(config)
            for config in configs
        ]
        names = sorted({name for row in weights for name in row})
        self._known(names)
        columns = torch.tensor(
            [[row.get(name, 0.0) for name in names] for row in weights]
        )[:, :, None, None]  # [rows, adapters, 1, 1]
        for layer, own in zip(self.layers, self.scalings, strict=True):
            for index, name in enumerate(names):
                if name not in layer.scaling:  # an adapter may leave some layers alone
                    continue
                if name in getattr(layer, "lora_variant", {}):
                    raise RouterError(
                        f"the adapter {name} is a LoRA variant (DoRA), whose update "
                        "is not linear in its scaling; play it on its own"
                    )
                scale = own.setdefault(name, layer.scaling[name])
                weight = layer.lora_B[name].weight  # the update's dtype and device
                layer.scaling[name] = (columns[:, index] * scale).to(weight)
        self.rows, self.row_names = configs, names

    def _own_scalings(self) -> None:
        """Give back every layer its own scalings, where `configure_rows` set them per
        row, and point the layers at the configuration last activated."""
        if self.rows is not None:
            for layer, own in zip(self.layers, self.scalings, strict=True):
                layer.scaling.update(own)
            self.rows, self.row_names = None, []
            self._point(self.active)

    def _point(self, name: str) -> None:
        """Point every LoRA layer at adapter `name` (BASE: adapters off).

        peft's `set_adapter` and `enable_adapter_layers` also walk all modules and
        reset requires_grad on every adapter weight (for training); serving needs
        only the two attributes each layer's forward reads, so this sets just
        those: a pointer change per layer (about 15 ms -> well under 1 ms for
        Gemma 3 270M with seven target modules). Scalings `configure_rows` set per
        row go back to each layer's own.
        """
        self._own_scalings()
        for layer in self.layers:
            layer._disable_adapters = name == BASE
            if name != BASE:
                layer._active_adapter = [name]
        if name != BASE:
            self.model.base_model.active_adapter = name

    def activate(self, route: Route) -> str:
        """Make the route's configuration live (held until the next activation)."""
        return self.activate_weights(route.weights)

    def export(self, weights: dict[str, float], folder: Path) -> Path:
        """Save the configuration `weights` as one PEFT adapter (for vLLM `--lora-modules`)."""
        name = self.adapter_for(weights)
        self.model.save_pretrained(str(folder), selected_adapters=[name])
        saved = folder / name if (folder / name).is_dir() else folder
        return saved
