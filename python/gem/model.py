"""The Gemma 4 model harness from Python: a GGUF file loaded and validated (gem/model.h), its
tokenizer, sessions that evaluate one token at a time on the CPU, greedy generation, and seeded
random-weight files (gem synth). The same code as `gem generate`: the same logits bit for bit."""

import array
import codecs
import ctypes
import os
import weakref

from . import _capi
from ._capi import GemError, check

try:
    import numpy as _np
except ImportError:  # pragma: no cover - exercised where numpy is absent
    _np = None

_ERR_BYTES = 512


class _Hparams(ctypes.Structure):  # gem_hparams
    _fields_ = [("name", ctypes.c_char * 64), ("n_layers", ctypes.c_int64),
                ("n_embd", ctypes.c_int64), ("n_vocab", ctypes.c_int64),
                ("context_length", ctypes.c_int64), ("window", ctypes.c_int64),
                ("head_dim_full", ctypes.c_int64), ("head_dim_swa", ctypes.c_int64),
                ("n_rot_full", ctypes.c_int64), ("n_rot_swa", ctypes.c_int64),
                ("rope_base_full", ctypes.c_double), ("rope_base_swa", ctypes.c_double),
                ("eps", ctypes.c_double), ("softcap", ctypes.c_double),
                ("n_full_layers", ctypes.c_int64)]


# gem_session_greedy's on_token: int (*)(void *user, int32_t token)
_ON_TOKEN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32)


class _SessionOpts(ctypes.Structure):  # gem_session_opts
    _fields_ = [("threads", ctypes.c_int64), ("max_tokens", ctypes.c_int64),
                ("full_route", ctypes.c_int), ("full_partitions", ctypes.c_int64),
                ("full_tile", ctypes.c_int64), ("kv_dtype", ctypes.c_int),
                ("k_from_v", ctypes.c_int), ("backend", ctypes.c_int)]


class _SynthSpec(ctypes.Structure):  # gem_synth_spec
    _fields_ = [("seed", ctypes.c_uint64), ("n_layers", ctypes.c_int64),
                ("n_embd", ctypes.c_int64), ("n_ff", ctypes.c_int64), ("n_vocab", ctypes.c_int64),
                ("n_head", ctypes.c_int64), ("n_head_kv_swa", ctypes.c_int64),
                ("n_head_kv_full", ctypes.c_int64), ("head_dim_swa", ctypes.c_int64),
                ("head_dim_full", ctypes.c_int64), ("window", ctypes.c_int64),
                ("context_length", ctypes.c_int64), ("full_every", ctypes.c_int64),
                ("rope_base_full", ctypes.c_double), ("rope_base_swa", ctypes.c_double),
                ("partial_rotary_full", ctypes.c_double), ("softcap", ctypes.c_double),
                ("eps", ctypes.c_double), ("type", ctypes.c_int32), ("name", ctypes.c_char_p),
                ("no_matrices", ctypes.c_int)]


def _lib():
    m = _capi.model_lib()
    if not getattr(m, "_gem_declared", False):
        P, vp = ctypes.POINTER, ctypes.c_void_p
        err = [ctypes.c_char_p, ctypes.c_size_t]
        sigs = {
            "gem_model_load": (ctypes.c_int, [ctypes.c_char_p, P(vp)] + err),
            "gem_model_free": (None, [vp]),
            "gem_model_hparams": (P(_Hparams), [vp]),
            "gem_model_tokenizer": (vp, [vp]),
            "gem_model_weight_bytes_per_token": (ctypes.c_size_t, [vp]),
            "gem_model_upload": (ctypes.c_int, [vp, ctypes.c_uint64] + err),
            "gem_model_device_bytes": (ctypes.c_size_t, [vp]),
            "gem_tokenizer_n_vocab": (ctypes.c_int64, [vp]),
            "gem_tokenizer_bos": (ctypes.c_int32, [vp]),
            "gem_tokenizer_eos": (ctypes.c_int32, [vp]),
            "gem_tokenizer_is_eog": (ctypes.c_int, [vp, ctypes.c_int32]),
            "gem_tokenize": (ctypes.c_int, [vp, ctypes.c_char_p, ctypes.c_int,
                                            P(ctypes.c_int32), ctypes.c_int64,
                                            P(ctypes.c_int64)]),
            "gem_token_piece": (ctypes.c_int, [vp, ctypes.c_int32, ctypes.c_char_p,
                                               ctypes.c_size_t, P(ctypes.c_size_t)]),
            "gem_session_create": (ctypes.c_int, [vp, P(_SessionOpts), P(vp)] + err),
            "gem_session_free": (None, [vp]),
            "gem_session_eval": (ctypes.c_int, [vp, ctypes.c_int32, vp]),
            "gem_session_eval_argmax": (ctypes.c_int, [vp, ctypes.c_int32, P(ctypes.c_int32)]),
            "gem_session_greedy": (ctypes.c_int, [vp, ctypes.c_int32, ctypes.c_int64,
                                                  P(ctypes.c_int32), P(ctypes.c_int64),
                                                  _ON_TOKEN, vp]),
            "gem_session_describe": (ctypes.c_char_p, [vp]),
            "gem_session_pos": (ctypes.c_int64, [vp]),
            "gem_session_reset": (None, [vp]),
            "gem_session_copy": (ctypes.c_int, [vp, vp]),
            "gem_session_set_route": (ctypes.c_int, [vp, ctypes.c_int]),
            "gem_synth_preset": (ctypes.c_int, [ctypes.c_char_p, P(_SynthSpec)]),
            "gem_synth_write": (ctypes.c_int, [P(_SynthSpec), ctypes.c_char_p] + err),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(m, name)
            fn.restype, fn.argtypes = res, args
        m._gem_declared = True
    return m


def synth(path, preset="tiny", *, seed=None):
    """Writes a seeded random-weight Gemma 4 GGUF (`gem synth --preset`): "tiny" (the test
    model: 6 layers, hidden 64, the real full-layer attention shape), "diff" (60 layers in
    Gemma 4 31B's pattern), "2gb" or "31b". Returns path."""
    spec = _SynthSpec()
    check("gem_synth_preset", _lib().gem_synth_preset(str(preset).encode(), ctypes.byref(spec)),
          f"unknown preset {preset!r}: tiny, diff, 2gb or 31b")
    if seed is not None:
        spec.seed = int(seed)
    err = ctypes.create_string_buffer(_ERR_BYTES)
    st = _lib().gem_synth_write(ctypes.byref(spec), os.fsencode(path), err, _ERR_BYTES)
    check("gem_synth_write", st,
          f"{path}: {err.value.decode(errors='replace') or _capi.status_text(st)}")
    return path


class Model(_capi.Closable):
    """A Gemma 4 GGUF file, mapped and validated (every hyperparameter from its metadata). A
    malformed file, a missing tensor or a variant gem does not run raises GemError with the
    loader's one line."""

    def __init__(self, path):
        self._h = None
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        st = _lib().gem_model_load(os.fsencode(path), ctypes.byref(handle), err, _ERR_BYTES)
        check("gem_model_load", st,
              f"{path}: {err.value.decode(errors='replace') or _capi.status_text(st)}")
        self._h = handle
        self.path = path
        self._tok = _lib().gem_model_tokenizer(handle)
        self._sessions = weakref.WeakSet()
        hp = _lib().gem_model_hparams(handle).contents
        self.hparams = {name: (getattr(hp, name).decode(errors="replace") if name == "name"
                               else getattr(hp, name)) for name, _ in _Hparams._fields_}

    def _tokenizer(self):
        self._handle()
        return self._tok

    @property
    def n_vocab(self):
        return int(_lib().gem_tokenizer_n_vocab(self._tokenizer()))

    @property
    def bos(self):
        """The BOS token, or -1."""
        return int(_lib().gem_tokenizer_bos(self._tokenizer()))

    @property
    def eos(self):
        """The EOS token, or -1."""
        return int(_lib().gem_tokenizer_eos(self._tokenizer()))

    def is_eog(self, token):
        """True when `token` ends a generation (EOS or an end-of-turn control token)."""
        return bool(_lib().gem_tokenizer_is_eog(self._tokenizer(), int(token)))

    def tokenize(self, text, add_bos=True):
        """Token ids of `text` (llama.cpp's gemma4 tokenizer: BPE with byte fallback), BOS
        first when add_bos and the vocabulary asks for it."""
        tok = self._tokenizer()
        raw = text.encode() if isinstance(text, str) else bytes(text)
        if b"\0" in raw:
            raise ValueError("text holds a NUL character")
        n = ctypes.c_int64()
        cap = len(raw) + 2
        while True:
            ids = (ctypes.c_int32 * cap)()
            st = _lib().gem_tokenize(tok, raw, 1 if add_bos else 0, ids, cap, ctypes.byref(n))
            if _capi.lib.gem_status_name(st).decode() == "range" and n.value > cap:
                cap = n.value
                continue
            check("gem_tokenize", st)
            return list(ids[:n.value])

    def piece(self, token):
        """The bytes token `token` stands for (control tokens: none)."""
        tok = self._tokenizer()
        n = ctypes.c_size_t()
        buf = ctypes.create_string_buffer(64)
        st = _lib().gem_token_piece(tok, int(token), buf, 64, ctypes.byref(n))
        if st != _capi.GEM_OK and n.value > 64:
            buf = ctypes.create_string_buffer(n.value)
            st = _lib().gem_token_piece(tok, int(token), buf, n.value, ctypes.byref(n))
        check("gem_token_piece", st, f"token {token} outside the vocabulary of {self.n_vocab}"
              if not 0 <= int(token) < self.n_vocab else None)
        return buf.raw[:n.value]

    def detokenize(self, tokens):
        """The text of `tokens` (UTF-8; a broken sequence becomes U+FFFD)."""
        return b"".join(self.piece(t) for t in tokens).decode(errors="replace")

    def upload(self, random_seed=0):
        """Puts the weights on the current CUDA device for sessions with backend="cuda"
        (once per model): the file's weights, or with a seed other than 0 seeded random
        matrices of the file's types and shapes (for timing the real dimensions from a file
        written without its matrices). Returns the device bytes they hold."""
        err = ctypes.create_string_buffer(_ERR_BYTES)
        st = _lib().gem_model_upload(self._handle(), int(random_seed), err, _ERR_BYTES)
        check("gem_model_upload", st, err.value.decode(errors="replace") or None)
        return int(_lib().gem_model_device_bytes(self._handle()))

    def session(self, max_tokens=4096, *, threads=0, route="fused", kv_dtype="f32",
                k_from_v=False, backend="cpu"):
        """A sequence's KV caches and scratch: max_tokens positions, `threads` (CPU; 0: one per
        core), the full layers' route ("fused", the production route, or "baseline"), the
        caches' element type ("f32", "bf16" or "f16"), k_from_v (the full K = V layers store V
        alone and rebuild K), and the backend ("cpu", or "cuda": the whole token on the
        current GPU after upload(), threads 0)."""
        return Session(self, max_tokens, threads, route, kv_dtype, k_from_v, backend)

    def generate(self, prompt=None, n=32, *, prompt_tokens=None, session=None,
                 stop_at_eog=True):
        """Greedy generation: yields (token, text) for up to n new tokens after the prompt
        (text, tokenized with BOS, or prompt_tokens); the text pieces are UTF-8 decoded as
        they complete. A new session sized for the prompt and n unless one is given (it then
        continues from where it stands)."""
        if (prompt is None) == (prompt_tokens is None):
            raise ValueError("generate takes a prompt or prompt_tokens, one of the two")
        toks = self.tokenize(prompt) if prompt is not None else [int(t) for t in prompt_tokens]
        if not toks:
            raise ValueError("the prompt holds no tokens")
        own = session is None
        s = self.session(max_tokens=len(toks) + n) if own else session
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            for t in toks[:-1]:
                s.eval(t, logits=False)
            nxt = s.next_token(toks[-1])
            for i in range(n):
                yield nxt, text.decode(self.piece(nxt))
                if (stop_at_eog and self.is_eog(nxt)) or i + 1 == n:
                    break
                nxt = s.next_token(nxt)
        finally:
            if own:
                s.close()

    def close(self):
        """Frees the model; its sessions are closed first."""
        if self._h:
            for s in list(self._sessions):
                s.close()
            _lib().gem_model_free(self._h)
            self._h = None

    def __repr__(self):
        if not self._h:
            return "Model(closed)"
        hp = self.hparams
        return (f"Model({self.path!r}: {hp['n_layers']} layers, hidden {hp['n_embd']}, "
                f"vocabulary {hp['n_vocab']})")


_ROUTES = {"fused": _capi.ROUTES["fused"], "baseline": _capi.ROUTES["baseline"]}


class Session(_capi.Closable):
    """One sequence on a Model (Model.session): eval one token at the next position."""

    def __init__(self, model, max_tokens, threads, route, kv_dtype, k_from_v, backend):
        self._h = None
        if backend not in _capi.BACKENDS:
            raise ValueError(f"backend={backend!r}: 'cpu' or 'cuda'")
        if route not in _ROUTES:
            raise ValueError(f"route={route!r}: 'fused' or 'baseline'")
        if kv_dtype not in ("f32", "bf16", "f16"):
            raise ValueError(f"kv_dtype={kv_dtype!r}: 'f32', 'bf16' or 'f16'")
        opts = _SessionOpts(threads=int(threads), max_tokens=int(max_tokens),
                            full_route=_ROUTES[route], kv_dtype=_capi.DTYPES[kv_dtype],
                            k_from_v=1 if k_from_v else 0, backend=_capi.BACKENDS[backend])
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        st = _lib().gem_session_create(model._handle(), ctypes.byref(opts), ctypes.byref(handle),
                                       err, _ERR_BYTES)
        check("gem_session_create", st, err.value.decode(errors="replace") or None)
        self._h = handle
        self.model = model
        self.max_tokens = int(max_tokens)
        model._sessions.add(self)

    @property
    def pos(self):
        """Positions evaluated so far."""
        return int(_lib().gem_session_pos(self._handle()))

    @property
    def description(self):
        return _lib().gem_session_describe(self._handle()).decode()

    def eval(self, token, logits=True):
        """Runs `token` at the next position. logits=True: returns the final soft-capped logits
        (n_vocab float32: a numpy array, array.array('f') without numpy); False: none (faster
        for prompt tokens); or a writable float32 array of n_vocab to fill. GemError "range"
        when the session is full or the token is outside the vocabulary."""
        h = self._handle()
        n = self.model.n_vocab
        out = None
        if logits is True:
            out = (_np.empty(n, dtype=_np.float32) if _np is not None
                   else array.array("f", bytes(4 * n)))
        elif logits is not False:
            out = logits
        ptr = None
        if out is not None:
            m = memoryview(out)
            if m.readonly or m.format.lstrip("<=@") != "f" or m.nbytes != 4 * n or \
                    not m.c_contiguous:
                raise ValueError(f"logits must be a writable contiguous float32 array of {n}")
            ptr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        st = _lib().gem_session_eval(h, int(token), ptr)
        check("gem_session_eval", st, self._why(st, token))
        return out

    def next_token(self, token):
        """Runs `token` at the next position and returns the greedy next token (the largest
        logit, the lowest index among equal ones)."""
        nxt = ctypes.c_int32()
        st = _lib().gem_session_eval_argmax(self._handle(), int(token), ctypes.byref(nxt))
        check("gem_session_eval_argmax", st, self._why(st, token))
        return int(nxt.value)

    def greedy(self, token, n, stop=None):
        """Greedy decoding in one call (gem_session_greedy): runs `token`, then each greedy
        next token, n evaluations at most, and returns the list of greedy tokens (the same as
        n calls of next_token, with the loop in C; on the GPU a CUDA graph a token). stop
        (optional) is called with each new token; when it returns true the loop ends before
        that token is evaluated. An exception in stop ends the loop too and is raised once the
        call has returned."""
        n = int(n)
        if n < 1:
            raise ValueError(f"n={n}: at least 1")
        out = (ctypes.c_int32 * n)()
        made = ctypes.c_int64()
        raised = []

        def on_token(_user, tok):
            try:
                return 1 if stop(int(tok)) else 0
            except BaseException as e:  # kept for after the call: C frames are in between
                raised.append(e)
                return 1

        cb = _ON_TOKEN(on_token) if stop is not None else _ON_TOKEN()
        st = _lib().gem_session_greedy(self._handle(), int(token), n, out, ctypes.byref(made),
                                       cb, None)
        if raised:
            raise raised[0]
        check("gem_session_greedy", st, self._why(st, token))
        return [int(out[i]) for i in range(made.value)]

    def _why(self, st, token):
        if _capi.lib.gem_status_name(st).decode() != "range":
            return None
        if not 0 <= int(token) < self.model.n_vocab:
            return f"token {token} outside the vocabulary of {self.model.n_vocab}"
        return f"the session is full ({self.max_tokens} positions)"

    def set_route(self, route):
        """The full layers' route for the next evaluations ("fused" or "baseline")."""
        if route not in _ROUTES:
            raise ValueError(f"route={route!r}: 'fused' or 'baseline'")
        check("gem_session_set_route", _lib().gem_session_set_route(self._handle(),
                                                                    _ROUTES[route]))

    def copy_from(self, other):
        """Continues exactly where `other` stands (same model, max_tokens and cache type)."""
        check("gem_session_copy", _lib().gem_session_copy(self._handle(), other._handle()))

    def reset(self):
        """Forgets every position."""
        _lib().gem_session_reset(self._handle())

    def close(self):
        """Frees the session's caches."""
        if self._h:
            _lib().gem_session_free(self._h)
            self._h = None


__all__ = ["Model", "Session", "synth", "GemError"]
