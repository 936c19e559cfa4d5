"""One vocabulary: every option of the four CLIs has help, and an option name means
one thing with one default wherever it appears."""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict

from factory.cli import build_parser as factory_parser
from router.cli import build_parser as router_parser
from tests.conftest import ROOT
from trace_pipeline.cli import build_parser as trace_parser
from trainer.cli import build_parser as trainer_parser

# An output folder's default is the command's own product (generated_envs, models).
PER_COMMAND_DEFAULT = {"--out"}


def _options() -> dict[str, list[tuple[str, argparse.Action]]]:
    """Each option name (every one an action answers to) -> every (command, action)
    declaring it."""
    found: dict[str, list[tuple[str, argparse.Action]]] = defaultdict(list)

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        for action in parser._actions:  # argparse has no public list of options
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{command} {name}")
            elif action.option_strings and action.dest not in ("help", "version"):
                for name in action.option_strings:
                    found[name].append((command, action))

    for build, command in (
        (factory_parser, "factory"),
        (trainer_parser, "trainer"),
        (router_parser, "router"),
        (trace_parser, "trace"),
    ):
        walk(build(), command)
    return found


def _kind(action: argparse.Action) -> str:
    """What an option's value is: text, a flag, or its type's name (a range-checked
    int is named int)."""
    if action.nargs == 0:
        return "flag"
    if action.type is None:
        return "text"
    return action.type.__name__


def test_every_option_of_every_cli_has_help() -> None:
    missing = [
        f"{command} {name}"
        for name, uses in _options().items()
        for command, action in uses
        if not (action.help and action.help.strip())
    ]
    assert missing == []


def test_an_option_has_one_default_wherever_it_appears() -> None:
    """None means "from the input" (the spec's seeds, the adapter's format) and is
    allowed beside a value; two different values are not."""
    options = _options()
    assert len(options) > 40  # the walk reached every subcommand
    clashes = {}
    for name, uses in options.items():
        defaults = {repr(a.default) for _, a in uses if a.default is not None}
        if len(defaults) > 1 and name not in PER_COMMAND_DEFAULT:
            clashes[name] = [(command, a.default) for command, a in uses]
    assert clashes == {}


def test_an_option_means_one_kind_of_value_wherever_it_appears() -> None:
    """Same name, same type and same choices: `--backend` is the rollout engine in
    every command (factory generate's code writer is `--codegen`)."""
    clashes = {}
    for name, uses in _options().items():
        kinds = {(_kind(a), tuple(a.choices or ()), a.nargs) for _, a in uses}
        if len(kinds) > 1:
            clashes[name] = sorted(map(str, kinds))
    assert clashes == {}


def test_trace_run_sections_are_the_commands_own_settings() -> None:
    """`trace run`'s analyze and route sections are the models the `factory analyze`
    and `router` options derive from, so a default or range is declared once."""
    from factory.analyze.settings import AnalysisSettings
    from router.settings import RoutingSettings
    from trace_pipeline.config import Analyze, Route

    assert issubclass(Analyze, AnalysisSettings) and issubclass(Route, RoutingSettings)
    assert set(Analyze.model_fields) == set(AnalysisSettings.model_fields)
    # the pipeline's own: how many probe examples to fit and from which of the run's
    # data (`router fit` draws them from environments), and where its re-routing
    # condition starts (no `router` command plays that condition)
    assert set(Route.model_fields) - set(RoutingSettings.model_fields) == {
        "probe_examples",
        "probe_data",
        "reroute_from",
    }
    for section, model in ((Analyze, AnalysisSettings), (Route, RoutingSettings)):
        for name, field in model.model_fields.items():
            assert section.model_fields[name].default == field.default, name


def test_trace_run_train_and_rollout_take_the_trainers_ranges_and_help() -> None:
    """`trace run`'s train and rollout sections set their own CPU-sized defaults,
    but every range and help of a trainer setting is the trainer's own."""
    from trace_pipeline.config import Rollout, Train
    from trainer.settings import TrainConfig

    shared = 0
    for section in (Train, Rollout):
        for name, field in section.model_fields.items():
            if name not in TrainConfig.model_fields:
                continue
            shared += 1
            own = TrainConfig.model_fields[name]
            assert set(map(repr, own.metadata)) <= set(map(repr, field.metadata)), name
            assert field.annotation == own.annotation, name
    assert shared >= 20


def test_an_option_has_one_name() -> None:
    """No aliases: a second name is one more thing to learn, and once meant another
    thing elsewhere (`factory generate --backend` was `--codegen`, `router route
    --seed` the task's seed); a `--no-` form of a switch is the same name. The names
    dropped in 0.2.0 (CHANGELOG.md) are refused."""
    aliased = {
        f"{command} {action.option_strings}"
        for uses in _options().values()
        for command, action in uses
        if len(action.option_strings) > 1
        and not isinstance(action, argparse.BooleanOptionalAction)
    }
    assert aliased == set()
    names = _options()
    for old in ("--output", "--samples", "--max-tokens", "--calibrate"):
        assert old not in names, old
    assert all(a.dest != "seed" for _, a in names.get("--seed", []) if "router" in _)


def test_several_values_are_given_by_repeating_the_option() -> None:
    """`--env A --env B` in `trainer` and `router` alike, never `--envs A B`; the
    names dropped for it (CHANGELOG.md 0.2.0) are gone."""
    options = _options()
    several = {
        f"{command} {name}"
        for name, uses in options.items()
        for command, action in uses
        if action.nargs in ("+", "*")
    }
    assert several == set()
    assert {"--envs", "--base-envs", "--batch-size"}.isdisjoint(options)
    kinds = {type(action).__name__ for command, action in options["--env"]
             if command.split()[1] in ("train", "fit", "eval")}  # fmt: skip
    assert kinds == {"_AppendAction"}


# Parameters whose defaults are declared settings: a literal default in a signature
# would be a second declaration that drifts (512 tokens in one place, 256 in another).
DECLARED = {
    "precision",
    "max_new_tokens",
    "max_tokens",
    "temperature",
    "batch_size",
    "generation_batch_size",
    "concurrent_episodes",
    "minibatch_size",
}


def test_no_declared_setting_has_a_literal_default_in_a_signature() -> None:
    literals = []
    for package in ("factory", "trainer", "router", "trace_pipeline"):
        for module in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(module.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                args = node.args
                positional = args.posonlyargs + args.args
                pairs = list(zip(positional[::-1], args.defaults[::-1], strict=False))
                pairs += [
                    (a, d)
                    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                ]
                for arg, default in pairs:
                    if (
                        arg.arg in DECLARED
                        and isinstance(default, ast.Constant)
                        and default.value is not None
                    ):
                        where = f"{module.relative_to(ROOT)}:{node.lineno}"
                        literals.append(f"{where} {arg.arg}={default.value!r}")
    assert literals == []


def test_tokens_per_turn_has_one_default_everywhere() -> None:
    """trainer, factory calibrate and trace run's rollout section: one declaration."""
    from factory.settings import MAX_NEW_TOKENS
    from factory.validate.calibrate import CalibrationSettings
    from trace_pipeline.config import Rollout
    from trainer.settings import TrainConfig

    for model in (TrainConfig, CalibrationSettings, Rollout):
        assert model.model_fields["max_new_tokens"].default == MAX_NEW_TOKENS, model
