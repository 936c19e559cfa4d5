"""The router's vLLM paths against fakes of vLLM's documented APIs (no GPU here).

The fake offline engine computes prompt log-probs with the tiny transformers
model, so routing through it must agree with the transformers scorer; the fake
server speaks vLLM's OpenAI API on loopback to the real `openai` client.
"""

from __future__ import annotations

import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import openai
import pytest
import torch

from router.capabilities import load_capabilities
from router.cli import main
from router.prompt import BASE, RoutingPrompt
from router.routed import first_observation
from router.scorer import CONTENT_FREE, LabelScorer
from router.serve import RoutedChat, make_server
from router.text import TEXT_FILE
from router.vllm import VLLMScorer, server_label_logprobs
from tests.conftest import BASE_ENV, ENVS
from trainer.envs import resolve_env
from trainer.models import load_base
from trainer.vllm_adapter import legal_rank


class FakeLLM:
    """`vllm.LLM`: prompt log-probs from the tiny model; sampling answers a fixed reply."""

    instances: list[FakeLLM] = []

    def __init__(self, model: str, **options: object) -> None:
        self.model, self.tokenizer = load_base(model)
        self.options = options
        self.lora_requests: list[object] = []
        FakeLLM.instances.append(self)

    @torch.no_grad()
    def generate(self, prompts, params, lora_request=None, use_tqdm=False):
        outputs = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            if getattr(params, "prompt_logprobs", None) is not None:
                logits = self.model(input_ids=torch.tensor([ids])).logits[0].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                per_token = [None] + [
                    {ids[t]: SimpleNamespace(logprob=float(logprobs[t - 1, ids[t]]))}
                    for t in range(1, len(ids))
                ]
                outputs.append(SimpleNamespace(prompt_logprobs=per_token))
            else:
                self.lora_requests.append(lora_request)
                tokens = self.tokenizer("Done.", add_special_tokens=False)["input_ids"]
                tokens.append(self.tokenizer.eos_token_id)
                completion = SimpleNamespace(
                    token_ids=tokens,
                    logprobs=[{t: SimpleNamespace(logprob=-0.5)} for t in tokens],
                )
                outputs.append(SimpleNamespace(outputs=[completion]))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.LLM = FakeLLM
    vllm.SamplingParams = lambda **kw: SimpleNamespace(**kw)
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = lambda name, number, path: SimpleNamespace(
        lora_name=name, lora_int_id=number, lora_path=path
    )
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", types.ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    FakeLLM.instances.clear()
    return vllm


def test_prompt_logprob_routing_equals_the_transformers_scorer(
    fake_vllm, tiny_model_dir, adapters
) -> None:
    capabilities = load_capabilities(adapters, str(tiny_model_dir))
    base, tokenizer = load_base(str(tiny_model_dir))
    prompt = RoutingPrompt(capabilities, tokenizer, example_tokens=40, task_tokens=64)
    engine = FakeLLM(str(tiny_model_dir))
    messages = first_observation(resolve_env(ENVS["date_time_recovery"]), 2**30)
    expected = LabelScorer(base, prompt).score(messages).logprobs
    got = VLLMScorer(engine, prompt).score(messages).logprobs
    # Prompt log-probs are full-vocabulary log-probs of each label token.
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_eval_on_the_vllm_backend_uses_lora_requests(
    fake_vllm, tiny_model_dir, adapters, tmp_path, capsys
) -> None:
    out = tmp_path / "eval"
    code = main(
        ["eval", "--adapters", str(adapters), "--model", str(tiny_model_dir), "--backend", "vllm",
         *(a for env in ENVS.values() for a in ("--env", env)), "--base-env", BASE_ENV, "--episodes", "1", "--out", str(out),
         "--max-turns", "1", "--example-tokens", "40", "--task-tokens", "64"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    # no probe (it reads hidden states); the text router where `router fit` saved one
    fitted = {"text"} if (adapters / TEXT_FILE).exists() else set()
    assert report["backend"] == "vllm"
    assert set(report["routing"]) == {"argmax", "top-p", *fitted}
    engine = FakeLLM.instances[-1]
    assert engine.options["max_lora_rank"] == 8 and engine.options["enable_lora"]
    names = {r.lora_name if r else BASE for r in engine.lora_requests}
    assert {BASE, *ENVS} <= names and any(n.startswith("mix") for n in names)
    # Mixes are written as adapter files (kept with the report) of rank sum r_c.
    mixes = {
        r.lora_name for r in engine.lora_requests if r and r.lora_name.startswith("mix")
    }
    for name in mixes:
        config = json.loads((out / "mixes" / name / "adapter_config.json").read_text())
        assert config["r"] == config["lora_alpha"] == 8


def test_legal_ranks() -> None:
    assert [legal_rank(r) for r in (1, 2, 8, 9, 24, 300, 512)] == [
        1,
        8,
        8,
        16,
        32,
        320,
        512,
    ]


class FakeVLLMServer(BaseHTTPRequestHandler):
    """vLLM's OpenAI API: completions with echo log-probs and adapter names, adapter loading."""

    favoured: int = -1
    seen: list[dict] = []

    def log_message(self, *args: object) -> None:
        return

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeVLLMServer.seen.append({"path": self.path, **body})
        if self.path.endswith("/load_lora_adapter"):
            answer: dict = {}
        elif body.get("echo"):
            prompt = body["prompt"]
            logprobs = [None] + [-1.0] * (len(prompt) - 2)
            logprobs.append(-0.1 if prompt[-1] == self.favoured else -4.0)
            answer = self._completion("x", {"token_logprobs": [*logprobs, -1.0]})
        else:
            call = '<tool_call>{"name": "get_current_timestamp", "arguments": {}}</tool_call>'
            answer = self._completion(call, None)
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def _completion(text: str, logprobs: dict | None) -> dict:
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "finish_reason": "stop",
                    "logprobs": logprobs,
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }


def test_serve_forwards_to_a_vllm_server_with_the_adapter_name(
    tiny_model_dir, adapters, tmp_path
) -> None:
    import openai

    from router.backends import VLLMServerBackend
    from router.vllm import AdapterFiles

    capabilities = load_capabilities(adapters, str(tiny_model_dir))
    _, tokenizer = load_base(str(tiny_model_dir))
    prompt = RoutingPrompt(capabilities, tokenizer, example_tokens=40, task_tokens=64)
    FakeVLLMServer.favoured = prompt.labels[1].token_id  # permission_error_recovery
    FakeVLLMServer.seen = []
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), FakeVLLMServer)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{upstream.server_address[1]}/v1", api_key="x"
    )
    backend = VLLMServerBackend(
        client, str(tiny_model_dir), prompt, capabilities,
        AdapterFiles(capabilities, tmp_path / "mixes"), tokenizer,
        capabilities.tool_format(tokenizer), "argmax", 0.9, "none",
    )  # fmt: skip
    server = make_server(RoutedChat(backend), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        routed = openai.OpenAI(
            base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="x"
        )
        env = resolve_env(ENVS["permission_error_recovery"])
        observation, info = env.make().reset(seed=2**30)
        answer = routed.chat.completions.create(
            model="trace-router", messages=json.loads(observation), tools=info["tools"]
        )
        assert answer.model_extra["route"]["target"] == "permission_error_recovery"
        call = answer.choices[0].message.tool_calls[0]
        assert call.function.name == "get_current_timestamp"
        generations = [s for s in FakeVLLMServer.seen if not s.get("echo")]
        assert generations[-1]["model"] == "permission_error_recovery"
        assert generations[-1]["stop_token_ids"] == [tokenizer.eos_token_id]
        scoring = [s for s in FakeVLLMServer.seen if s.get("echo")]
        assert sorted(s["prompt"][-1] for s in scoring) == sorted(prompt.label_ids)
        # A top-p mix is written as one adapter and loaded into the server once.
        backend.mode, backend.top_p = "top-p", 1.0
        messages = [{"role": "user", "content": "a new conversation"}]
        routed.chat.completions.create(model="trace-router", messages=messages)
        loads = [
            s for s in FakeVLLMServer.seen if s["path"].endswith("load_lora_adapter")
        ]
        assert len(loads) == 1 and loads[0]["lora_name"].startswith("mix")
        assert FakeVLLMServer.seen[-1]["model"] == loads[0]["lora_name"]
        # Content-free calibration asks the server for a content-free task's label
        # log-probs once, at the first route, and subtracts them from every route's.
        calibrated = VLLMServerBackend(
            client, str(tiny_model_dir), prompt, capabilities,
            AdapterFiles(capabilities, tmp_path / "mixes"), tokenizer,
            capabilities.tool_format(tokenizer), "argmax", 0.9, "content-free",
        )  # fmt: skip
        asked = len(FakeVLLMServer.seen)
        assert torch.equal(calibrated.prior, calibrated.logprobs(CONTENT_FREE))
        assert len(FakeVLLMServer.seen) == asked + 2 * len(prompt.label_ids)
        calibrated.route(json.loads(observation))
        assert len(FakeVLLMServer.seen) == asked + 3 * len(prompt.label_ids)
    finally:
        server.shutdown()
        upstream.shutdown()


def test_routing_through_the_projects_own_completions_endpoint(
    tiny_model_dir, adapters
) -> None:
    """`router serve` of the plain base model answers `/v1/completions` with echo and
    logprobs as vLLM does: the label log-probs routing reads through an endpoint
    equal the local scorer's."""
    from router.backends import BaseModelBackend

    capabilities = load_capabilities(adapters, str(tiny_model_dir))
    base, tokenizer = load_base(str(tiny_model_dir))
    prompt = RoutingPrompt(capabilities, tokenizer, example_tokens=40, task_tokens=64)
    messages = first_observation(resolve_env(ENVS["date_time_recovery"]), 2**30)
    expected = LabelScorer(base, prompt).score(messages).logprobs
    server = make_server(
        RoutedChat(BaseModelBackend(base, tokenizer, "json", 4)), "127.0.0.1", 0
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = openai.OpenAI(
            base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="x"
        )
        got = server_label_logprobs(client, BASE, prompt, messages)
        torch.testing.assert_close(torch.tensor(got), expected, atol=1e-4, rtol=1e-4)
        text = client.completions.create(
            model=BASE, prompt="hello there", max_tokens=3, temperature=0,
            logprobs=2, stop=["\n\n\n\n"],
        )  # fmt: skip
        choice = text.choices[0]
        assert len(choice.logprobs.tokens) == text.usage.completion_tokens <= 3
        assert all(len(top) == 2 for top in choice.logprobs.top_logprobs)
        assert choice.text == "".join(choice.logprobs.tokens)
        echoed = client.completions.create(
            model=BASE, prompt="hello there", max_tokens=0, echo=True, logprobs=0
        )
        assert echoed.choices[0].text == "hello there"
        assert echoed.choices[0].logprobs.token_logprobs[0] is None
        with pytest.raises(openai.BadRequestError, match="not served"):
            client.completions.create(model="nobody", prompt="hi")
        with pytest.raises(openai.BadRequestError, match="token ids"):
            client.completions.create(model=BASE, prompt=[10**9])
    finally:
        server.shutdown()
        server.server_close()
