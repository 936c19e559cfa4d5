"""The Phone (ToolSandbox) kit: ToolSandbox (apple/ToolSandbox) tool interface over a synthetic state."""

from pathlib import Path

from ...toolkit import Toolkit
from .tools import IMPLEMENTATIONS

TOOLKIT = Toolkit.from_json(Path(__file__).with_name("kit.json"), IMPLEMENTATIONS)
run = TOOLKIT.run
fails = TOOLKIT.fails

__all__ = ["TOOLKIT", "fails", "run"]
