"""The TRL bridge: kit tools as typed methods, the verifier's reward, a real GRPO step."""

from __future__ import annotations

import importlib
import json
import sys

import pytest
from transformers.utils import get_json_schema

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "generated_envs" / "precondition_verification"))
package = importlib.import_module("trace_env_precondition_verification")
integrations = importlib.import_module(
    "trace_env_precondition_verification.integrations"
)


def test_every_kit_tool_is_a_method_with_the_schemas_parameters() -> None:
    environment_class = integrations.trl_environment_factory()
    for schema in package.FAMILY.toolkit.schemas:
        function = schema["function"]
        derived = get_json_schema(getattr(environment_class, function["name"]))[
            "function"
        ]
        assert derived["name"] == function["name"]
        wanted = function["parameters"]
        assert set(derived["parameters"]["properties"]) == set(
            wanted.get("properties", {})
        )
        assert set(derived["parameters"].get("required", [])) == set(
            wanted.get("required", [])
        )
        for key, spec in wanted.get("properties", {}).items():
            if spec.get("type") == "array" and "type" in spec.get("items", {}):
                items = derived["parameters"]["properties"][key]["items"]
                assert items["type"] == spec["items"]["type"].replace(
                    "number", "number"
                )


def play(which: str, seed: int) -> float:
    """Play the scripted policy through the TRL methods, then score the final answer."""
    environment = integrations.trl_environment_factory()()
    rows = integrations.trl_bridge.trl_rows(
        package.PreconditionVerificationEnv, 1, seed
    )
    environment.reset(prompt=rows["prompt"][0], seed=seed)
    task = environment.env.task
    turns = task.gold_turns if which == "gold" else task.lacking_turns
    completion = []
    for turn in turns:
        for call in turn.tool_calls:
            result = getattr(environment, call.name)(**call.arguments)
            completion.append({"role": "tool", "content": result})
        if turn.content:
            completion.append({"role": "assistant", "content": turn.content})
    return integrations.trl_reward([environment], [completion])[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gold_earns_the_verifier_reward_and_lacking_does_not(seed: int) -> None:
    assert play("gold", seed) == 1.0
    assert play("lacking", seed) == 0.0


def test_the_dataset_rows_open_the_task() -> None:
    rows = integrations.trl_bridge.trl_rows(package.PreconditionVerificationEnv, 3, 10)
    assert rows["seed"] == [10, 11, 12]
    assert [m["role"] for m in rows["prompt"][0]] == ["system", "user"]
    assert rows["prompt"][0] != rows["prompt"][1]


def test_one_grpo_step_with_a_tiny_model(tiny_model_dir, tmp_path, monkeypatch) -> None:
    trl = pytest.importorskip("trl", reason="install the package's `trl` extra")
    pytest.importorskip("datasets")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import qwen3_template

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.response_template = qwen3_template  # TRL parses Qwen3-style tool calls
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=96,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        max_tool_calling_iterations=2,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=args,
        train_dataset=integrations.trl_dataset(2),
        environment_factory=integrations.trl_environment_factory(),
        reward_funcs=integrations.trl_reward,
    )
    user = package.PreconditionVerificationEnv().reset(seed=0)[1]
    user_id = (
        json.loads(json.dumps(user["messages"][1]["content"])).split()[5].rstrip(".")
    )
    call = {"name": "get_user_details", "arguments": {"user_id": user_id}}
    scripted = [
        tokenizer.encode(f"<tool_call>{json.dumps(call)}</tool_call><|im_end|>"),
        tokenizer.encode("I could not do it.<|im_end|>"),
    ]
    calls = {"n": 0}

    def generate(input_ids: torch.Tensor, **_: object) -> torch.Tensor:
        ids = scripted[min(calls["n"], 1)]
        calls["n"] += 1
        return torch.cat([input_ids, torch.tensor([ids] * input_ids.shape[0])], dim=-1)

    monkeypatch.setattr(trainer.model, "generate", generate)
    trainer.train()
    logged = trainer.state.log_history[0]
    assert "reward" in logged and logged["reward"] == 0.0
    assert all(environment.done for environment in trainer.environments)
