"""The settings of `factory analyze`, declared once: the CLI's options and `trace
run`'s `analyze` section derive from these fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from factory.settings import setting


class AnalysisSettings(BaseModel):
    """The knobs of `factory analyze`, with the paper's defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: int = setting(
        10, "labelling runs N (bootstrap resamples offline)", ge=1, le=1000
    )
    min_runs: int = setting(
        8, "keep a capability selected in at least this many runs", ge=1, le=1000
    )
    rho: float = setting(
        0.10, "minimum coverage: share of failures lacking it", ge=0, le=1
    )
    delta: float = setting(0.20, "minimum contrastive gap ER- - ER+", ge=-1, le=1)
    seed: int = setting(0, "bootstrap seed (offline runs)", ge=0, le=2**31 - 1)
    threshold: float = setting(
        1.0, "ToolSandbox: similarity a run needs to count as a success", ge=0, le=1
    )
    llm_model: str | None = setting(
        None,
        "label with this model at OPENAI_BASE_URL instead of the offline detectors",
    )

    @model_validator(mode="after")
    def _runs(self) -> AnalysisSettings:
        if self.min_runs > self.runs:
            raise ValueError(
                f"min_runs ({self.min_runs}) must not exceed runs ({self.runs})"
            )
        return self
