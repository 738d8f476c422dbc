#!/usr/bin/env python3
"""Reference outputs of a Gemma 4 GGUF from transformers' own Gemma 4 model.

Loads a GGUF file in the layout llama.cpp's converter writes for `gemma4`
(as `gem synth` writes it) into transformers' Gemma4ForCausalLM, with every
weight dequantized by the `gguf` package (an implementation independent of
gem's), and records greedy tokens and logits for a fixed prompt in float32 and
in float64, and the token ids of a few texts from the `tokenizers` package's BPE
(byte fallback) built on the file's vocabulary and merges. The expected-values file it writes is what tests/test_model_ref.c
holds gem to. Not run by CI; needs transformers, torch and gguf from PyPI:

    python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install torch transformers gguf
    build/gem synth --preset tiny --out /tmp/tiny.gguf
    /tmp/venv-ref/bin/python scripts/reference/gemma4_reference.py /tmp/tiny.gguf \
        --out scripts/reference/gemma4-tiny.expected

float64 here means float64 throughout: transformers computes its RMSNorm, its
rotary angles and (in eager attention) its softmax in float32 even when the
model is float64, so for the float64 run this script computes those three in
the model's dtype (see `make_float64_faithful`). The float32 run is
transformers unchanged (SDPA attention).
"""
import argparse
import hashlib
import math
import sys

import numpy as np
import torch

import gguf
from transformers import Gemma4ForCausalLM, Gemma4TextConfig
from transformers.models.gemma4 import modeling_gemma4 as mg

# The fixed prompt: BOS and 23 tokens of the tiny vocabulary (longer than its
# sliding window of 8, so the window is exercised). gem tokenizes
# "The quick brown fox jumps over the lazy dog while the cat sleeps" to a
# prefix of this; the ids are fixed here so the reference needs no tokenizer.
DEFAULT_PROMPT = None  # filled from --prompt-tokens or the file (see main)


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def load(path):
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    if arch != "gemma4":
        sys.exit(f"{path}: architecture {arch!r}, not gemma4")
    A = "gemma4."
    n_layers = int(field(r, A + "block_count"))
    swa = [bool(x) for x in field(r, A + "attention.sliding_window_pattern")]
    kvh = field(r, A + "attention.head_count_kv")
    kvh = [int(x) for x in kvh] if isinstance(kvh, list) else [int(kvh)] * n_layers
    kv_swa = {kvh[i] for i in range(n_layers) if swa[i]}
    kv_full = {kvh[i] for i in range(n_layers) if not swa[i]}
    assert len(kv_swa) == 1 and len(kv_full) == 1, "per-layer KV head counts vary within a kind"
    tensors = {t.name: t for t in r.tensors}
    rope_freqs = gguf.quants.dequantize(tensors["rope_freqs.weight"].data,
                                        tensors["rope_freqs.weight"].tensor_type).reshape(-1)
    head_dim_full = int(field(r, A + "attention.key_length"))
    rotated = int((rope_freqs < 1e29).sum())
    partial = 2.0 * rotated / head_dim_full
    full_has_v = any(f"blk.{i}.attn_v.weight" in tensors for i in range(n_layers) if not swa[i])
    tok = field(r, "tokenizer.ggml.tokens")
    cfg = Gemma4TextConfig(
        vocab_size=len(tok),
        hidden_size=int(field(r, A + "embedding_length")),
        intermediate_size=int(field(r, A + "feed_forward_length")),
        num_hidden_layers=n_layers,
        num_attention_heads=int(field(r, A + "attention.head_count")),
        num_key_value_heads=kv_swa.pop(),
        num_global_key_value_heads=kv_full.pop(),
        head_dim=int(field(r, A + "attention.key_length_swa")),
        global_head_dim=head_dim_full,
        attention_k_eq_v=not full_has_v,
        hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=int(field(r, A + "context_length")),
        rms_norm_eps=float(field(r, A + "attention.layer_norm_rms_epsilon")),
        sliding_window=int(field(r, A + "attention.sliding_window")),
        layer_types=["sliding_attention" if s else "full_attention" for s in swa],
        rope_parameters={
            "sliding_attention": {"rope_type": "default",
                                  "rope_theta": float(field(r, A + "rope.freq_base_swa"))},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": partial,
                               "rope_theta": float(field(r, A + "rope.freq_base"))},
        },
        final_logit_softcapping=float(field(r, A + "final_logit_softcapping")),
        hidden_size_per_layer_input=0,
        num_kv_shared_layers=int(field(r, A + "attention.shared_kv_layers", 0)),
        tie_word_embeddings=True,
        pad_token_id=int(field(r, "tokenizer.ggml.padding_token_id", 0)),
        bos_token_id=int(field(r, "tokenizer.ggml.bos_token_id", 2)),
        eos_token_id=int(field(r, "tokenizer.ggml.eos_token_id", 1)),
    )
    names = {
        "attn_q": "self_attn.q_proj.weight", "attn_k": "self_attn.k_proj.weight",
        "attn_v": "self_attn.v_proj.weight", "attn_output": "self_attn.o_proj.weight",
        "attn_q_norm": "self_attn.q_norm.weight", "attn_k_norm": "self_attn.k_norm.weight",
        "attn_norm": "input_layernorm.weight",
        "post_attention_norm": "post_attention_layernorm.weight",
        "ffn_norm": "pre_feedforward_layernorm.weight",
        "post_ffw_norm": "post_feedforward_layernorm.weight",
        "ffn_gate": "mlp.gate_proj.weight", "ffn_up": "mlp.up_proj.weight",
        "ffn_down": "mlp.down_proj.weight", "layer_output_scale": "layer_scalar",
    }
    state = {}
    for name, t in tensors.items():
        w = gguf.quants.dequantize(t.data, t.tensor_type)
        w = np.asarray(w, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
        if name == "token_embd.weight":
            state["model.embed_tokens.weight"] = w
        elif name == "output_norm.weight":
            state["model.norm.weight"] = w
        elif name == "rope_freqs.weight":
            continue
        else:
            _, i, role, _ = name.split(".") if name.count(".") == 3 else (None, None, None, None)
            if role not in names:
                sys.exit(f"{path}: unexpected tensor {name}")
            state[f"model.layers.{i}.{names[role]}"] = w.reshape(-1) if role == "layer_output_scale" else w
    return r, cfg, state


# Texts the tokenizer check covers: merges, spaces, digits and punctuation, byte
# fallback (UTF-8 outside the vocabulary), control tokens, a single newline.
# (Runs of several newlines are left out: llama.cpp looks such a run up as one
# token, a plain BPE does not.)
TOKENIZER_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore",
    "Numbers 12345, punctuation: commas; colons!",
    "caf\u00e9 \u20ac 100",
    "<|turn>user text<turn|>",
    "  two  spaces",
    "line one\nline two",
]


def hf_tokenizer(r):
    """The vocabulary as a `tokenizers` BPE with byte fallback: spaces normalized to
    U+2581, control/user-defined/unknown tokens matched as added special tokens."""
    from tokenizers import AddedToken, Tokenizer, models, normalizers
    toks = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = field(r, "tokenizer.ggml.merges")
    bpe = models.BPE(vocab={t: i for i, t in enumerate(toks)},
                     merges=[tuple(m.split(" ", 1)) for m in merges],
                     byte_fallback=True, unk_token=None, fuse_unk=False)
    tk = Tokenizer(bpe)
    tk.normalizer = normalizers.Replace(" ", "\u2581")
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(toks, types) if ty in (2, 3, 4)])
    return tk


def make_float64_faithful():
    """Computes RMSNorm, the rotary angles and softmax in the model's dtype."""

    def norm_forward(self, x):
        ms = x.pow(2).mean(-1, keepdim=True) + self.eps
        out = x * torch.pow(ms, -0.5)
        return out * self.weight if self.with_scale else out

    mg.Gemma4RMSNorm.forward = norm_forward

    def rope_forward(self, x, position_ids, layer_type):
        cfg = self.config
        params = cfg.rope_parameters[layer_type]
        base = params["rope_theta"]
        dim = cfg.per_layer_config[layer_type].head_dim
        if params["rope_type"] == "proportional":
            angles = int(params.get("partial_rotary_factor", 1.0) * dim // 2)
        else:
            angles = dim // 2
        i = torch.arange(0, 2 * angles, 2, dtype=torch.float64)
        inv = 1.0 / (base ** (i / dim))
        inv = torch.cat([inv, torch.zeros(dim // 2 - angles, dtype=torch.float64)])
        freqs = position_ids[..., None].to(torch.float64) * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    mg.Gemma4TextRotaryEmbedding.forward = rope_forward


def build(cfg, state, dtype):
    cfg._attn_implementation = "sdpa"
    model = Gemma4ForCausalLM(cfg)
    sd = {k: torch.from_numpy(v.copy()) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        sys.exit(f"state dict mismatch: missing {missing} unexpected {unexpected}")
    model.tie_weights()
    return model.to(dtype).eval()


@torch.no_grad()
def greedy(model, prompt, steps):
    ids = list(prompt)
    out = []
    for s in range(steps):
        logits = model(torch.tensor([ids])).logits[0, -1].to(torch.float64).numpy()
        order = np.argsort(-logits, kind="stable")
        top = order[:10]
        tok = int(top[0])
        out.append({"token": tok, "top10": [(int(j), float(logits[j])) for j in top],
                    "logits": logits, "edge": float(logits[order[9]] - logits[order[10]])})
        ids.append(tok)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--prompt-tokens", default="2,317,362,346,350,338,332,340,265,331,347,447,343,265,335,344,353,265,339,413,448,446,366,384,355,394,333,344,336,463,332,380,374,341,334,334,448,372,366,352,398,342,374,454",
                    help="comma-separated prompt token ids")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    prompt = [int(x) for x in a.prompt_tokens.split(",")]
    with open(a.gguf, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    r, cfg, state = load(a.gguf)
    torch.manual_seed(0)
    m32 = build(cfg, state, torch.float32)
    run32 = greedy(m32, prompt, a.steps)
    make_float64_faithful()
    m64 = build(cfg, state, torch.float64)
    run64 = greedy(m64, prompt, a.steps)
    toks32 = [s["token"] for s in run32]
    toks64 = [s["token"] for s in run64]
    diff = np.abs(run32[0]["logits"] - run64[0]["logits"]).max()
    print(f"float32 tokens {toks32}\nfloat64 tokens {toks64}\n"
          f"step-0 logits: max |f32 - f64| = {diff:.3e}", file=sys.stderr)
    gaps = [s["top10"][0][1] - s["top10"][1][1] for s in run64]
    edges = [s["edge"] for s in run64]
    print(f"smallest top-1/top-2 gap over the float64 steps: {min(gaps):.3e}; "
          f"smallest 10th/11th gap: {min(edges):.3e}", file=sys.stderr)
    with open(a.out, "w") as f:
        f.write("gem.reference.v1\n")
        f.write(f"# transformers {__import__('transformers').__version__}, torch {torch.__version__}, "
                f"gguf {getattr(gguf, '__version__', 'unknown')}\n")
        f.write(f"model_sha256 {sha}\n")
        f.write(f"prompt {len(prompt)} {' '.join(map(str, prompt))}\n")
        f.write(f"steps {a.steps}\n")
        for tag, run in (("f64", run64), ("f32", run32)):
            f.write(f"{tag}.tokens {len(run)} {' '.join(str(s['token']) for s in run)}\n")
            for k, s in enumerate(run):
                pairs = " ".join(f"{j} {v:.17g}" for j, v in s["top10"])
                f.write(f"{tag}.top10 {k} {pairs}\n")
            lg = run[0]["logits"]
            f.write(f"{tag}.logits0 {len(lg)} {' '.join(f'{v:.17g}' for v in lg)}\n")
        tk = hf_tokenizer(r)
        bos = int(field(r, "tokenizer.ggml.bos_token_id", 2))
        for text in TOKENIZER_TEXTS:
            ids = [bos] + tk.encode(text).ids
            f.write(f"tokenize {text.encode().hex()} {len(ids)} {' '.join(map(str, ids))}\n")
        f.write(f"f32_vs_f64_logits0_max_abs {diff:.6e}\n")
        f.write(f"f64_min_top_gap {min(gaps):.6e}\n")
        f.write(f"f64_min_top10_edge {min(edges):.6e}\n")


if __name__ == "__main__":
    main()
