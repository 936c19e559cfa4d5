"""The router with a tiny random model: labels, cached scoring, top-p mixes, probe, eval, serve."""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import replace

import numpy as np
import pytest
import torch

from router.adapters import AdapterBank, row_config
from router.capabilities import load_capabilities
from router.cli import main
from router.errors import RouterError
from router.modes import argmax_route, top_p_route
from router.probe import PROBE_FILE, fit_probe, load_probe, save_probe
from router.prompt import BASE, RoutingPrompt
from router.routed import Router, Task, first_observation, play
from router.scorer import LabelScorer
from router.serve import RoutedChat, make_server
from router.text import TEXT_FILE, fit_text, load_text, save_text
from router.vllm import write_mix
from tests.conftest import BASE_ENV, ENVS
from trainer.envs import resolve_env
from trainer.generation import TransformersGenerator
from trainer.models import load_base
from trainer.settings import EVAL_SEED_BASE, RolloutLimits


def _each(option: str, values) -> list[str]:
    """A repeated option once per value: `--env A --env B`."""
    return [item for value in values for item in (option, value)]


def _loaded(tiny_model_dir, adapters):
    """The capability set, adapter bank, tokenizer and a small routing prompt."""
    capabilities = load_capabilities(adapters, str(tiny_model_dir))
    base, tokenizer = load_base(str(tiny_model_dir))
    bank = AdapterBank(base, capabilities)
    prompt = RoutingPrompt(capabilities, tokenizer, example_tokens=60, task_tokens=120)
    return capabilities, bank, tokenizer, prompt


def test_labels_are_single_tokens_in_context(tiny_model_dir, adapters) -> None:
    _, _, tokenizer, prompt = _loaded(tiny_model_dir, adapters)
    assert prompt.targets == [*sorted(ENVS), BASE]
    task = prompt.task_text(
        first_observation(resolve_env(ENVS["date_time_recovery"]), 2**30)
    )
    before = tokenizer(task, add_special_tokens=False)["input_ids"]
    for label in prompt.labels:
        ids = tokenizer(task + label.text, add_special_tokens=False)["input_ids"]
        assert ids[:-1] == before and ids[-1] == label.token_id
    assert len(set(prompt.label_ids)) == len(prompt.labels)
    assert "Specialist A" in prompt.static and "date_time_recovery" in prompt.static


def test_the_chat_format_asks_through_the_models_chat_template(
    tiny_model_dir, adapters
) -> None:
    """Instructions as the system message, the task as the user's, and each label a
    single token at the start of the assistant's turn; scores cache as in text."""
    capabilities, bank, tokenizer, text = _loaded(tiny_model_dir, adapters)
    chat = RoutingPrompt(capabilities, tokenizer, 60, 120, prompt_format="chat")
    messages = first_observation(resolve_env(ENVS["date_time_recovery"]), 2**30)
    whole = chat.static + chat.task_text(messages)
    assert whole.startswith("<|im_start|>system\nYou are the dispatcher")
    assert whole.count("<|im_end|>\n<|im_start|>user\nTask policy:") == 1
    assert whole.endswith("):<|im_end|>\n<|im_start|>assistant\n")
    before = tokenizer(whole, add_special_tokens=False)["input_ids"]
    for label in chat.labels:
        ids = tokenizer(whole + label.text, add_special_tokens=False)["input_ids"]
        assert ids[:-1] == before and ids[-1] == label.token_id
    assert chat.prefix_ids + chat.task_ids(messages) == before
    assert (
        chat.fingerprint() != text.fingerprint()
    )  # a probe fitted on one is not the other's
    cached = LabelScorer(bank.model, chat).score(messages)
    uncached = LabelScorer(bank.model, chat, cached=False).score(messages)
    torch.testing.assert_close(cached.logprobs, uncached.logprobs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "template, message",
    [
        (None, "has none; use --prompt-format text"),
        ("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}"
         "{% endfor %}", "system message then a user message once each"),
    ],
)  # fmt: skip
def test_the_chat_format_needs_a_template_that_shows_both_messages(
    tiny_model_dir, adapters, template, message
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = template
    capabilities = load_capabilities(adapters, str(tiny_model_dir))
    with pytest.raises(RouterError, match=message):
        RoutingPrompt(capabilities, tokenizer, prompt_format="chat")


def test_cached_and_uncached_scores_agree(tiny_model_dir, adapters) -> None:
    _, bank, _, prompt = _loaded(tiny_model_dir, adapters)
    cached, uncached = (
        LabelScorer(bank.model, prompt),
        LabelScorer(bank.model, prompt, cached=False),
    )
    for env in ENVS.values():
        messages = first_observation(resolve_env(env), 2**30 + 3)
        a, b = cached.score(messages), uncached.score(messages)
        torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(a.features, b.features, atol=1e-4, rtol=1e-4)
        # Again from the policy's cache (both phone environments share one policy).
        again = cached.score(messages)
        torch.testing.assert_close(again.logprobs, b.logprobs, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(again.features, b.features, atol=1e-4, rtol=1e-4)
        # The scorer reads the frozen base model: the active adapter changes nothing.
        bank.activate_weights({"date_time_recovery": 1.0})
        torch.testing.assert_close(cached.score(messages).logprobs, a.logprobs)
        bank.activate_weights({})


def test_top_p_mix_is_w_plus_weighted_lora_deltas(
    tiny_model_dir, adapters, tmp_path
) -> None:
    capabilities, bank, _, _ = _loaded(tiny_model_dir, adapters)
    weights = {"date_time_recovery": 0.7, "permission_error_recovery": 0.3}
    bank.activate_weights(weights)
    layer = bank.model.base_model.model.model.layers[0].self_attn.q_proj
    x = torch.randn(3, layer.in_features)
    with torch.no_grad():
        expected = layer.base_layer(x)
        for name, alpha in weights.items():
            delta = (
                layer.lora_B[name].weight
                @ layer.lora_A[name].weight
                * layer.scaling[name]
            )
            expected = expected + alpha * x @ delta.T
        torch.testing.assert_close(layer(x), expected, atol=1e-5, rtol=1e-5)
    # Rank of the mix is the sum of the ranks, so one adapter file serves it.
    assert bank.model.peft_config[bank.active].r == 8
    # The file-level mix (vLLM path) holds the same tensors as peft's.
    folder = write_mix(capabilities, weights, tmp_path / "mix")
    from safetensors.torch import load_file

    mixed = load_file(str(folder / "adapter_model.safetensors"))
    key = next(k for k in mixed if "layers.0.self_attn.q_proj.lora_A" in k)
    a, b = mixed[key], mixed[key.replace("lora_A", "lora_B")]
    with torch.no_grad():
        peft_delta = layer.lora_B[bank.active].weight @ layer.lora_A[bank.active].weight
        torch.testing.assert_close(b @ a, peft_delta, atol=1e-6, rtol=1e-5)
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["r"] == config["lora_alpha"] == 8


def test_switching_and_base_route(tiny_model_dir, adapters) -> None:
    _, bank, tokenizer, _ = _loaded(tiny_model_dir, adapters)
    ids = torch.tensor([tokenizer("hello")["input_ids"]])
    outputs = {}
    for key, weights in {
        "base": {},
        "a": {"date_time_recovery": 1.0},
        "b": {"permission_error_recovery": 1.0},
    }.items():
        bank.activate_weights(weights)
        with torch.no_grad():
            outputs[key] = bank.model(input_ids=ids).logits
    with torch.no_grad(), bank.model.disable_adapter():
        plain = bank.model(input_ids=ids).logits
    torch.testing.assert_close(outputs["base"], plain)
    assert not torch.allclose(outputs["a"], outputs["b"])
    # The pointer switch gives what peft's own set_adapter gives.
    bank.model.base_model.enable_adapter_layers()
    bank.model.set_adapter("date_time_recovery")
    with torch.no_grad():
        torch.testing.assert_close(bank.model(input_ids=ids).logits, outputs["a"])


def test_rows_of_different_configurations_share_a_batch(
    tiny_model_dir, adapters
) -> None:
    """configure_rows: each row of one pass gets what its configuration alone gives,
    the base model, a single adapter, a mix (what `_mix` builds as one adapter)."""
    _, bank, tokenizer, _ = _loaded(tiny_model_dir, adapters)
    ids = torch.tensor([tokenizer("hello there")["input_ids"]])
    configurations = [
        {},
        {"date_time_recovery": 1.0},
        {"permission_error_recovery": 1.0},
        {"date_time_recovery": 0.6, "permission_error_recovery": 0.3},
    ]
    alone = []
    for weights in configurations:
        bank.activate_weights(weights)
        with torch.no_grad():
            alone.append(bank.model(input_ids=ids).logits[0])
    bank.configure_rows([row_config(w) for w in configurations])
    with torch.no_grad():
        together = bank.model(input_ids=ids.repeat(4, 1)).logits
    for row, expected in zip(together, alone, strict=True):
        torch.testing.assert_close(row, expected, atol=1e-5, rtol=1e-4)
    # the router scores with peft's disable_adapter(), which re-enables every layer
    # on exit; the next pass still gets the rows' configurations
    with torch.no_grad(), bank.model.disable_adapter():
        bank.model(input_ids=ids)
    bank.configure_rows([row_config({}), row_config(configurations[3])])
    with torch.no_grad():
        again = bank.model(input_ids=ids.repeat(2, 1)).logits
    torch.testing.assert_close(again[0], alone[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(again[1], alone[3], atol=1e-5, rtol=1e-4)
    # a mix built while rows are configured is built from each layer's own scaling
    fresh = {"date_time_recovery": 0.2, "permission_error_recovery": 0.7}
    bank.configure_rows([row_config(fresh)])
    with torch.no_grad():
        rows = bank.model(input_ids=ids).logits[0]
    bank.activate_weights(fresh)
    with torch.no_grad():
        torch.testing.assert_close(
            bank.model(input_ids=ids).logits[0], rows, atol=1e-5, rtol=1e-4
        )
    # a row of no configuration runs the one last activated
    bank.activate_weights(configurations[2])
    bank.configure_rows([row_config({}), None])
    with torch.no_grad():
        mixed = bank.model(input_ids=ids.repeat(2, 1)).logits
    torch.testing.assert_close(mixed[1], alone[2], atol=1e-5, rtol=1e-4)
    # back to the activated configuration, each layer's own scaling restored
    bank.configure_rows(None)
    bank.activate_weights(configurations[1])
    with torch.no_grad():
        torch.testing.assert_close(bank.model(input_ids=ids).logits[0], alone[1])
    with pytest.raises(RouterError, match="no adapters named"):
        bank.configure_rows([(("nonexistent", 1.0),)])


def test_every_configuration_plays_in_one_batch_as_it_plays_alone(
    tiny_model_dir, adapters
) -> None:
    """`play` with a generator that decodes rows under their own configurations
    writes, greedily, the episodes each configuration writes in a batch of its own."""
    _, bank, tokenizer, _ = _loaded(tiny_model_dir, adapters)
    handle = resolve_env(ENVS["permission_error_recovery"])
    configurations = [
        {},
        {"date_time_recovery": 1.0},
        {"date_time_recovery": 0.5, "permission_error_recovery": 0.4},
    ]
    tasks = [
        Task(handle, seed, BASE, first_observation(handle, seed))
        for seed in (EVAL_SEED_BASE, EVAL_SEED_BASE + 1)
    ]
    limits = RolloutLimits(
        max_turns=3, max_new_tokens=12, max_total_tokens=100_000, temperature=0.0
    )
    pairs = [(task, weights) for weights in configurations for task in tasks]
    plain = TransformersGenerator(bank.model, tokenizer, batch_size=2)
    alone = play(
        bank.activate_weights, plain, tokenizer,
        [t for t, _ in pairs], [w for _, w in pairs], limits, "json",
    )  # fmt: skip
    rows = bank.generator(tokenizer, batch_size=2)
    together = play(
        bank.activate_weights, rows, tokenizer, [t for t, _ in pairs],
        [w for _, w in pairs], limits, "json",
    )  # fmt: skip
    bank.configure_rows(None)
    assert [e.tokens for e in together] == [e.tokens for e in alone]
    # two rows at a time: a configuration's first row, joining alone, leaves the
    # system prompt it shares with the next queued row of its configuration to it
    assert rows.encoded <= plain.encoded
    assert len({tuple(e.tokens) for e in alone}) > len(tasks)  # configurations differ


def test_modes() -> None:
    targets = ["a", "b", BASE]
    assert argmax_route([0.2, 0.5, 0.3], targets).weights == {"b": 1.0}
    assert argmax_route([0.2, 0.1, 0.7], targets).weights == {}
    route = top_p_route([0.6, 0.2, 0.2], targets, 0.75)
    assert route.weights == {"a": 0.75, "b": 0.25} and route.target == "a"
    route = top_p_route([0.5, 0.1, 0.4], targets, 0.8)
    assert route.weights == {"a": 0.56}  # 0.5 / 0.9: base keeps its share


def test_probe_fits_and_predicts(tmp_path) -> None:
    rng = np.random.default_rng(0)
    targets = ["a", "b", BASE]
    centres = rng.normal(size=(3, 16)) * 3
    labels = [targets[i % 3] for i in range(90)]
    features = np.stack([centres[i % 3] + rng.normal(size=16) for i in range(90)])
    probe = fit_probe(features, labels, targets, "fp", "model")
    assert probe.train_accuracy == 1.0
    save_probe(probe, tmp_path, force=False)
    loaded = load_probe(tmp_path, "fp", targets)
    assert loaded is not None
    test = np.stack([centres[i] + rng.normal(size=16) for i in range(3)])
    assert loaded.probabilities(test).argmax(axis=1).tolist() == [0, 1, 2]
    from router.errors import RouterError

    with pytest.raises(RouterError, match="exists"):
        save_probe(probe, tmp_path, force=False)
    with pytest.raises(RouterError, match="another capability set"):
        load_probe(tmp_path, "other", targets)
    (tmp_path / "router_probe.json").write_text('{"targets": [1], "mean": "x"}')
    with pytest.raises(RouterError, match="not a router probe|inconsistent"):
        load_probe(tmp_path, "fp", targets)


def test_the_text_router_reads_the_request_words_and_refuses_a_bad_file(
    tmp_path,
) -> None:
    from router.errors import RouterError

    def opening(request: str) -> list[dict[str, str]]:
        # the policy is the same on every task: only the request may tell them apart
        return [
            {"role": "system", "content": "Be brief. The date is in the phone."},
            {"role": "user", "content": request},
        ]

    targets = ["date", "permission", BASE]
    requests = {
        "date": ["remind me tomorrow at noon", "text Ana next friday", "meet tomorrow"],
        "permission": ["turn on wifi and call Bo", "my cellular is off, text Al"],
        BASE: ["call Bo", "add a contact named Al", "search for Ana"],
    }
    examples = [(opening(r), label) for label, rs in requests.items() for r in rs]
    fitted = fit_text(examples, targets)
    assert fitted.linear.train_accuracy == 1.0
    save_text(fitted, tmp_path, force=False)
    loaded = load_text(tmp_path, targets)
    assert loaded is not None
    for request, label in (
        ("see you tomorrow", "date"),
        ("cellular off", "permission"),
    ):
        probabilities = loaded.probabilities(opening(request))
        assert targets[int(np.argmax(probabilities))] == label, request
        assert probabilities == fitted.probabilities(opening(request))
    with pytest.raises(RouterError, match="exists"):
        save_text(fitted, tmp_path, force=False)
    with pytest.raises(RouterError, match="other targets"):
        load_text(tmp_path, ["date", BASE])
    saved = json.loads((tmp_path / TEXT_FILE).read_text())
    saved["idf"] = saved["idf"][:-1]  # one weight short of the vocabulary
    (tmp_path / TEXT_FILE).write_text(json.dumps(saved))
    with pytest.raises(RouterError, match="not a text router.*do not fit"):
        load_text(tmp_path, targets)
    (tmp_path / TEXT_FILE).write_text("[" * 100_000)
    with pytest.raises(RouterError, match="cannot be read as JSON"):
        load_text(tmp_path, targets)
    assert load_text(tmp_path / "elsewhere", targets) is None


def test_fit_eval_and_route_commands(
    tiny_model_dir, adapters, tmp_path, capsys
) -> None:
    common = [
        "--adapters",
        str(adapters),
        "--model",
        str(tiny_model_dir),
        "--example-tokens",
        "40",
        "--task-tokens",
        "64",
    ]
    assert (
        main(
            [
                "fit",
                *common,
                *_each("--env", ENVS.values()),
                "--base-env",
                BASE_ENV,
                "--examples",
                "6",
            ]
        )
        == 0
    )
    assert "probe and text router fitted" in capsys.readouterr().out
    for mode in ("probe", "text"):
        task = ["--env", ENVS["date_time_recovery"], "--mode", mode]
        assert main(["route", *common, *task]) == 0
        route = json.loads(capsys.readouterr().out)
        assert route["mode"] == mode and set(route["probabilities"]) == {*ENVS, BASE}
    out = tmp_path / "eval"
    code = main(["eval", *common, *_each("--env", ENVS.values()), "--base-env", BASE_ENV, "--episodes", "2",
                 "--out", str(out), "--max-turns", "1", "--max-new-tokens", "4"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert set(report["routing"]) == {"argmax", "top-p", "probe", "text"}
    assert {
        "base model",
        "uniform merge",
        "oracle",
        "routed: argmax",
        "routed: probe",
        "routed: text",
    } <= set(report["success"])
    assert report["tasks"] == 6 and min(report["seeds"]) >= 2**30
    for row in report["success"].values():
        assert 0 <= row["ci95"][0] <= row["rate"] <= row["ci95"][1] <= 1
    assert (out / "confusion.png").stat().st_size > 0 and (
        out / "success.png"
    ).is_file()
    # The oracle plays each task with its true adapter: it matches the single adapter on its tasks.
    for task in report["per_task"]:
        if task["truth"] != BASE:
            assert (
                task["success"]["oracle"] == task["success"][f"single: {task['truth']}"]
            )
    # A second eval into the same folder needs --force; a folder it did not write is never replaced.
    assert main(["eval", *common, "--episodes", "1", "--out", str(out)]) == 2
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    assert (
        main(["eval", *common, "--episodes", "1", "--out", str(foreign), "--force"])
        == 2
    )
    assert (foreign / "notes.txt").read_text() == "keep"


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("empty", "holds no adapter folders"),
        ("no_trace", "has no trace.json"),
        ("duplicate", "both hold capability"),
        ("other_base", "the router needs one base model"),
        ("other_layers", "mixes and merges need one set of layers"),
        ("bad_layers", "'layers_to_transform' must be null or a list"),
        ("bad_json", "cannot be read as JSON"),
        ("not_a_folder", "is not a folder"),
        (
            "tool_format_xml",
            "'training.config.tool_format' must be one of json, compact",
        ),
        ("tool_format_number", "'training.config.tool_format' must be one of"),
        ("weights_truncated", "date_time_recovery is damaged or does not fit"),
        ("weights_empty", "date_time_recovery is damaged or does not fit"),
        ("weights_garbage", "date_time_recovery is damaged or does not fit"),
    ],
)
def test_bad_adapter_folders_exit_2(
    adapters, tiny_model_dir, tmp_path, capsys, breakage, message
) -> None:
    folder = tmp_path / "set"
    if breakage == "not_a_folder":
        folder.write_text("x")
    else:
        shutil.copytree(
            adapters, folder, ignore=shutil.ignore_patterns(PROBE_FILE, TEXT_FILE)
        )
    trace = folder / "date_time_recovery" / "trace.json"
    if breakage == "empty":
        for child in folder.iterdir():
            shutil.rmtree(child)
    elif breakage == "no_trace":
        trace.unlink()
    elif breakage == "duplicate":
        shutil.copytree(folder / "date_time_recovery", folder / "copy")
    elif breakage == "other_base":
        data = json.loads(trace.read_text())
        trace.write_text(json.dumps({**data, "base_model": "org/other-model"}))
    elif breakage == "bad_json":
        trace.write_text("[" * 100_000)
    elif breakage.endswith("_layers"):  # as --lora-layers 1 writes, or hostile
        config = folder / "date_time_recovery" / "adapter_config.json"
        data = json.loads(config.read_text())
        layers = [1] if breakage == "other_layers" else ["top"]
        config.write_text(json.dumps({**data, "layers_to_transform": layers}))
    elif breakage.startswith("tool_format"):
        data = json.loads(trace.read_text())
        data["training"]["config"]["tool_format"] = 5 if "number" in breakage else "xml"
        trace.write_text(json.dumps(data))
    elif breakage.startswith("weights"):
        weights = folder / "date_time_recovery" / "adapter_model.safetensors"
        whole = weights.read_bytes()
        damaged = {"truncated": whole[: len(whole) // 2], "empty": b"",
                   "garbage": b"\x00garbage" * 99}  # fmt: skip
        weights.write_bytes(damaged[breakage.split("_")[1]])
    code = main(
        [
            "route",
            "--adapters",
            str(folder),
            "--model",
            str(tiny_model_dir),
            "--env",
            ENVS["date_time_recovery"],
        ]
    )
    assert code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def test_adapters_of_other_tool_formats_agree_where_the_template_lists_tools(
    adapters, tiny_model_dir, tiny_tokenizer, tmp_path
) -> None:
    """--tool-format shapes the prompt only where the chat template has no tool role:
    there adapters trained with two formats are refused, elsewhere they load."""
    folder = tmp_path / "set"
    shutil.copytree(adapters, folder)
    trace = folder / "date_time_recovery" / "trace.json"
    data = json.loads(trace.read_text())
    data["training"]["config"]["tool_format"] = "compact"
    trace.write_text(json.dumps(data))
    capabilities = load_capabilities(folder, str(tiny_model_dir))
    assert sorted(capabilities.tool_formats) == ["compact", "json"]
    assert capabilities.tool_format(tiny_tokenizer) in {"compact", "json"}
    tiny_tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    )
    with pytest.raises(RouterError, match="different tool formats.*--tool-format"):
        capabilities.tool_format(tiny_tokenizer)
    same = load_capabilities(adapters, str(tiny_model_dir))
    assert same.tool_format(tiny_tokenizer) == "json"


def test_model_other_than_the_adapters_base_exits_2(adapters, capsys) -> None:
    assert (
        main(
            [
                "route",
                "--adapters",
                str(adapters),
                "--model",
                "org/another",
                "--env",
                ENVS["date_time_recovery"],
            ]
        )
        == 2
    )
    assert "not the base model" in capsys.readouterr().err


def test_serve_answers_the_openai_client_and_keeps_routes(
    tiny_model_dir, adapters
) -> None:
    import openai

    from router.backends import TransformersBackend

    capabilities, bank, tokenizer, prompt = _loaded(tiny_model_dir, adapters)
    router = Router(LabelScorer(bank.model, prompt))
    backend = TransformersBackend(
        bank,
        router,
        tokenizer,
        capabilities.tool_format(tokenizer),
        "argmax",
        batch_size=4,
    )
    script = iter(
        [
            '<tool_call>{"name": "get_current_timestamp", "arguments": {}}</tool_call>',
            "It is 5pm.",
        ]
    )
    real = backend.decoder.completion

    def completion(*arguments):  # the tiny model's text is random: script it
        return replace(real(*arguments), text=next(script))

    backend.decoder.completion = completion
    chat = RoutedChat(backend)
    server = make_server(chat, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
            api_key="x",
            max_retries=0,
        )
        assert {m.id for m in client.models.list()} == {"trace-router", BASE, *ENVS}
        messages = first_observation(resolve_env(ENVS["date_time_recovery"]), 2**30)
        tools = (
            resolve_env(ENVS["date_time_recovery"]).make().reset(seed=2**30)[1]["tools"]
        )
        first = client.chat.completions.create(
            model="trace-router", messages=messages, tools=tools, max_tokens=5
        )
        call = first.choices[0].message.tool_calls[0]
        assert (
            call.function.name == "get_current_timestamp"
            and json.loads(call.function.arguments) == {}
        )
        assert first.choices[0].finish_reason == "tool_calls"
        route = first.model_extra["route"]
        follow = [
            *messages,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "2025-01-01T17:00:00"},
        ]
        second = client.chat.completions.create(
            model="trace-router", messages=follow, tools=tools, max_tokens=5
        )
        assert second.choices[0].message.content == "It is 5pm."
        assert second.model_extra["route"] == route  # the conversation keeps its route
        assert len(chat.routes) == 1
        with pytest.raises(openai.BadRequestError, match="messages"):
            client.chat.completions.create(model="trace-router", messages=[])
        with pytest.raises(openai.BadRequestError, match="stream"):
            client.chat.completions.create(
                model="trace-router", messages=messages, stream=True
            )
        with pytest.raises(openai.BadRequestError, match="temperature"):
            client.chat.completions.create(
                model="trace-router", messages=messages, temperature=7
            )
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "command, message",
    [
        (["route", "--top-p", "nan"], "--top-p"),
        (["route", "--task-tokens", "3"], "--task-tokens"),
        (["serve", "--port", "70000"], "--port"),
        (["fit", "--examples", "1"], "--examples"),
        (["fit", "--regularisation", "inf"], "--regularisation"),
        (["eval", "--episodes", "0", "--out", "x"], "--episodes"),
        (["eval", "--temperature", "-1", "--out", "x"], "--temperature"),
        (["route"], "give the task"),
        (["route", "--env", "x", "--calibration", "batch"], "--calibration batch"),
    ],
)
def test_bad_settings_exit_2_before_loading(tmp_path, capsys, command, message) -> None:
    """A value out of range is refused while parsing (argparse exits 2), one that
    needs the rest by the command (main returns 2): the same for the user."""
    folder = tmp_path / "none"
    try:
        code = main([*command, "--adapters", str(folder), "--model", "org/model"])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_eval_out_inside_the_adapters_folder_exits_2(
    adapters, tmp_path, capsys
) -> None:
    before = sorted(p.name for p in adapters.iterdir())
    out = adapters / "new_report"
    code = main(["eval", "--adapters", str(adapters), "--model", "org/model",
                 "--episodes", "1", "--out", str(out)])  # fmt: skip
    assert code == 2 and "is inside --adapters" in capsys.readouterr().err
    assert sorted(p.name for p in adapters.iterdir()) == before


def test_eval_out_that_is_a_file_and_stale_staging(tmp_path, capsys) -> None:
    from router.build import prepare_out

    target = tmp_path / "report"
    target.write_text("mine")
    with pytest.raises(Exception, match="is a file"):
        prepare_out(target, force=True)
    assert target.read_text() == "mine"
    # a staging folder of a killed eval (999999999 is above any pid_max)
    dead = tmp_path / ".fresh.staging-999999999-abc"
    dead.mkdir()
    live = tmp_path / f".fresh.staging-{os.getpid()}-abc"
    live.mkdir()
    staging = prepare_out(tmp_path / "fresh", force=False)
    assert not dead.exists() and live.exists() and staging.is_dir()
    # A report.json that is a link to an eval's report makes no folder an eval's own.
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "report.json").write_text('{"written_by": "trace-router-eval"}')
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (foreign / "report.json").symlink_to(earlier / "report.json")
    with pytest.raises(Exception, match="is not empty"):
        prepare_out(foreign, force=True)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_router_help_needs_no_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, router.cli\n"
        "router.cli.build_parser().format_help()\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
