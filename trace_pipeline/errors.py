"""The one error every `trace` command turns into exit 2 with its message."""


class PipelineError(Exception):
    """A bad config, run folder or stage input; the message names it and the fix."""
