"""vLLM on CPU at tensor-parallel size 2 with and without the symmar plugin: greedy token ids of a
tiny random Llama-style model made here (no hub, no tokenizer), as JSON on the last line of stdout.

    python vllm_tp2.py MODEL_DIR [--eager] [--dtype bfloat16|float32] [--tokens N] [--ab]

The caller sets SYMMAR_VLLM (0 or 1) and runs it once each way; with the plugin on, the JSON also
holds the plugin's record from each worker (which path served the tensor-parallel group, and the
calls each path took). --ab (plugin on, eager only) runs the prompts twice in one engine: first on
vLLM's own path (the plugin's switch_path(False) on every worker), its ids as "tokens_off" and each
worker's calls by path as "calls_off", then on symmar's, its ids as "tokens" and the calls counted
from the switch. Makes the
model at MODEL_DIR first when it is not there. vLLM must be importable, and symmar's entry point
registered (pip install of the wheel, or tests/engines/run_vllm_check.sh's dist-info).
"""
import argparse
import json
import os
import sys


def make_model(path):
    """A Llama-style model with random weights (seeded): hidden 512, 4 layers, vocabulary 1024."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)


def plugin_record(_self=None):
    """Runs in a worker (collective_rpc): what the plugin did there."""
    from symmar.integrations import fusion, vllm as plugin
    return {"served": dict(plugin.served), "calls": dict(plugin.calls), "fused": fusion.fused_calls[0]}


def gather_everything(_self=None):
    """Runs in a worker: the plugin's gathers take every size (this model's logits are 2-8 KiB a
    rank), whatever gather_min_bytes a deployment set, so the check covers them."""
    from symmar.integrations import vllm as plugin
    plugin.gather_min_bytes = 0


def take_path(_self=None, take_symmar=True):
    """Runs in a worker: sends its allreduces to symmar or to vLLM's own path; returns the calls
    each path served since the last switch, and resets them."""
    from symmar.integrations import vllm as plugin
    plugin.switch_path(take_symmar)
    served = dict(plugin.calls)
    for who in plugin.calls:
        plugin.calls[who] = 0
    return served


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--eager", action="store_true")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--ab", action="store_true")
    args = parser.parse_args()
    if args.ab and (os.environ.get("SYMMAR_VLLM") != "1" or not args.eager):
        raise SystemExit("--ab needs SYMMAR_VLLM=1 and --eager (a compiled graph keeps the path it traced)")
    if not os.path.exists(os.path.join(args.model, "config.json")):
        make_model(args.model)
    # collective_rpc below sends a function to the workers (this script's own, run locally).
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    llm = LLM(model=args.model, tensor_parallel_size=2, dtype=args.dtype, enforce_eager=args.eager,
              skip_tokenizer_init=True, max_model_len=256, max_num_seqs=4, seed=0)
    prompts = [TokensPrompt(prompt_token_ids=[(7 * i + 3 * j) % 1000 + 1 for j in range(8 + i)]) for i in range(4)]
    params = SamplingParams(temperature=0.0, max_tokens=args.tokens, detokenize=False)
    if os.environ.get("SYMMAR_VLLM") == "1":
        llm.collective_rpc(gather_everything)
    tokens_off = None
    if args.ab:
        llm.collective_rpc(take_path, kwargs={"take_symmar": False})
        tokens_off = [list(o.outputs[0].token_ids) for o in llm.generate(prompts, params)]
        calls_off = llm.collective_rpc(take_path, kwargs={"take_symmar": True})
    outputs = llm.generate(prompts, params)
    result = {"tokens": [list(o.outputs[0].token_ids) for o in outputs]}  # first: the caller finds the line by it
    if tokens_off is not None:
        result["tokens_off"], result["calls_off"] = tokens_off, calls_off
    if os.environ.get("SYMMAR_VLLM") == "1":
        result["plugin"] = llm.collective_rpc(plugin_record)
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # vLLM's worker processes are torn down with this one


if __name__ == "__main__":
    main()
