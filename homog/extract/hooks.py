"""The per-batch ``Extractor``: forward hooks that reduce each layer on the device.

``Extractor`` loads nothing itself; it wraps a ``LoadedModel`` with forward hooks and maps one
batch of encoded texts to a ``BatchResult`` (per-text metrics per layer, attention statistics
per head, pooled vectors, sampled token vectors). Each layer's summaries are computed on the
device as soon as the layer's output exists, and only those small results go to the CPU;
hidden states and attention weights are never kept. ``compute_shard`` runs one shard in
batches; every engine calls it, so a shard holds the same batches wherever it runs.
A batch's padded inputs, the slots its hooks fill (``BatchState``) and the ``BatchResult``
assembled from them are ``homog.extract.batch_state``'s.

Conventions (recorded in every run's ``config_json``): hidden layer 0 is the embedding output
(as HF returns it, e.g. scaled by sqrt(d) in Gemma), layer l in 1..L-1 the output of block l,
and layer L the final-norm output, which is what HF returns as ``hidden_states[-1]``.
Attention layer l (1..L) is the attention inside block l. Texts are padded on the right so
real tokens keep positions 0..n-1; position ids are always passed explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from homog.config import ExtractConfig
from homog.errors import HomogError
from homog.extract.attn_summary import summarise_attention
from homog.extract.batch_state import POOLINGS, BatchInputs, BatchState, batch_result, pack_batch
from homog.extract.batches import PendingBatch
from homog.extract.edits import control_columns, edit_alone, edit_batch
from homog.extract.plan import EncodedText, SamplePlan
from homog.extract.result import BatchResult
from homog.extract.zero_shot import continuation, output_cache
from homog.metrics.sets import hidden_metric_names


class Extractor:
    """Maps a batch of encoded texts to a ``BatchResult`` with one forward pass.

    Forward hooks on the embedding, the decoder blocks, the final norm and (with attention)
    each block's self-attention compute that layer's summaries on the device while the
    forward pass runs; nothing of size (tokens x d) outlives its layer. The LM head is never
    run (the decoder is called, not the causal-LM wrapper). Reusable by any engine: it holds
    the model and the config, not the texts. ``vec_dtype`` is the dtype the pooled and sampled
    vectors are kept in: float32, as float16 overflows on massive activations (gemma3-270m
    exceeds 65,504 in layers 11-16).
    """

    vec_dtype = torch.float32

    def __init__(self, loaded: Any, config: ExtractConfig, host_spectra: str = "auto"):
        from homog.extract.host_spectra import (
            MODES,
            DeviceBatch,
            HostSpectra,
            LayerStack,
            host_mode,
            stack_bytes,
        )

        self.loaded = loaded
        self.config = config
        self.metric_names = hidden_metric_names(config.token_sets, config.peer_metrics)
        self._state: BatchState | None = None
        # where the spectra are finished (homog.extract.host_spectra): in the hooks
        # ("inline"), or on a host thread, waited for at once ("serial") or later
        mode = host_mode(loaded.input_device) if host_spectra == "auto" else host_spectra
        if mode not in MODES:
            raise ValueError(f"host_spectra={host_spectra!r}: use auto or one of {MODES}")
        self.host_spectra = mode
        host = mode in ("serial", "pipelined")
        self._host = HostSpectra(self.metric_names, mode != "serial") if host else None
        self._defer = DeviceBatch(self.metric_names) if mode == "deferred" else None
        # deferred: several layers' metrics computed at once (HOMOG_GPU_STACK_MIB; 0: none)
        cap = stack_bytes() if mode == "deferred" else 0
        self._stack = LayerStack(self._stacked_metrics, loaded.n_layers + 1, cap) if cap else None
        # the probe's text-first prompt, continued from each batch's pass (None: not asked for)
        self._zero_shot = continuation(loaded, config.zero_shot)
        # attention first: it may raise (a model loaded without attention), leaving no hooks
        self._handles: list[Any] = self._attach_attention(loaded) if config.attention else []
        L = loaded.n_layers
        self._handles.append(loaded.embed.register_forward_hook(self._hidden_hook(0)))
        for i, block in enumerate(loaded.layers[:-1]):
            self._handles.append(block.register_forward_hook(self._hidden_hook(i + 1)))
        # HF's hidden_states[-1] is the final-norm output, not the last block's output.
        self._handles.append(loaded.norm.register_forward_hook(self._hidden_hook(L)))

    def close(self) -> None:
        """Remove the hooks (the model behaves as before) and end the host thread."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        if self._host is not None:
            self._host.close()

    # -- hooks ------------------------------------------------------------------------------

    def _hidden_hook(self, layer: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            if self._state is not None:
                hidden = output[0] if isinstance(output, tuple) else output
                self._summarise_hidden(self._state, layer, hidden)

        return hook

    def _attach_attention(self, loaded: Any) -> list[Any]:
        """Hooks (eager: the weights each attention module returns) or sinks (blockwise:
        its q and k, ``homog.metrics.attn_blockwise``) for the attention statistics, by the
        implementation the modules run now. HomogError when they run neither."""
        from homog.metrics.attn_blockwise import ATTENTION_FUNCTION, SinkHandle

        modules = loaded.attn_modules
        impl = getattr(getattr(modules[0], "config", None), "_attn_implementation", None)
        if impl == ATTENTION_FUNCTION:
            return [SinkHandle(a, self._attention_sink(i)) for i, a in enumerate(modules)]
        if impl == "eager":
            return [a.register_forward_hook(self._attention_hook(i)) for i, a in enumerate(modules)]
        raise HomogError(
            f"attention statistics need the model loaded with attention=True (it runs {impl!r} "
            "attention, which gives neither weights nor q and k): use homog.models.load_for"
        )

    def _attention_sink(self, index: int) -> Callable[..., None]:
        def sink(query: Any, key: Any, **kw: Any) -> None:
            from homog.metrics.attention import check_lengths
            from homog.metrics.attn_blockwise import attention_sums, block_rows

            st = self._state
            if st is None:
                return
            b, _, n, _ = query.shape
            lengths = check_lengths(st.lengths, b, n, query.device)
            column, entropy = attention_sums(
                query,
                key,
                lengths,
                block=block_rows(self.config.attention_block, query.device),
                **kw,
            )
            summarise_attention(st, self.config, index, None, sums=(column, entropy))
            if st.sent_index is not None:
                from homog.extract.sentences import seen_by

                seen = seen_by(lengths, n, kw.get("sliding_window"))
                self._sentence_attention(st, index, column, seen)

        return sink

    def _attention_hook(self, index: int) -> Callable[..., None]:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            if self._state is None:
                return
            weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None:
                raise HomogError(
                    "attention statistics need attention weights but the model returned none: "
                    "load it with attention=True, attention_impl='eager'"
                )
            summarise_attention(self._state, self.config, index, weights)
            if self._state.sent_index is not None:
                # the queries that see each key: those the mask let through (head 0's)
                seen = (weights[:, 0] > 0).sum(-2).to(torch.float64)
                self._sentence_attention(self._state, index, weights.float().sum(-2), seen)

        return hook

    def _sentence_attention(self, st: BatchState, index: int, column: Any, seen: Any) -> None:
        from homog.extract.sentences import attention_sentence_metric

        assert st.sent_index is not None
        value = attention_sentence_metric(column, seen, *st.sent_index)
        st.sent_attn[index] = value.to(st.device)

    def _hidden_values(
        self, st: BatchState, layers: list[int], hidden: Any, mask: Any, **kw: Any
    ) -> tuple[Any, Any]:
        """``hidden_pending`` (or, solved in place, ``hidden_metrics``) of ``hidden``: one
        layer (B, n, d), or the stacked ``layers`` (k, B, n, d); its errors as HomogErrors
        naming the layer and texts."""
        from homog.metrics.sets import hidden_metrics, hidden_pending
        from homog.metrics.spectra import MetricInputError, NonFiniteError

        cfg = self.config
        stacked = hidden.dim() == 4
        try:
            pending = self._host is not None or self._defer is not None
            return (hidden_pending if pending else hidden_metrics)(
                hidden,
                mask,
                center=cfg.center,
                token_sets=cfg.token_sets,
                peers=cfg.peer_metrics,
                sink_norm_ratio=cfg.sink_norm_ratio,
                renyi_alpha=cfg.renyi_alpha,
                **kw,
            )
        except NonFiniteError as exc:
            # leading indices: (text,) per layer, (layer in the stack, text) stacked
            first = exc.indices[0]
            layer = layers[first[0]] if stacked else layers[0]
            at = [i[1:] if stacked else i for i in exc.indices if not stacked or i[0] == first[0]]
            names = sorted({st.names[i[0]] for i in at})
            raise HomogError(
                f"NaN/inf in hidden states at layer {layer} for text(s) {', '.join(names[:10])} "
                f"(dtype {self.loaded.dtype}; float16/bfloat16 overflow? use --dtype float32)"
            ) from exc
        except MetricInputError as exc:
            where = ", ".join(map(str, layers))
            raise HomogError(f"layer {where}: {exc} (texts {', '.join(st.names[:10])})") from exc

    def _stacked_metrics(self, hidden: Any, layers: list[int], extras: list[Any]) -> None:
        """``LayerStack``'s computation: the metrics of the stacked ``layers`` (k, B, n, d)
        in one ``hidden_pending``, their spectra queued with ``DeviceBatch``. The largest
        activations come from each layer's hook (the attention statistics need them there);
        the median activation is computed here, for the whole stack at once."""
        from homog.metrics.massive import activation_median, with_median

        st = self._state
        assert st is not None and self._defer is not None
        mask = st.mask.to(hidden.device)
        act = None
        if extras[0] is not None:
            top = {k: torch.stack([e[k] for e in extras]) for k in extras[0]}
            act = with_median(top, activation_median(hidden, mask))
        values, _ = self._hidden_values(st, layers, hidden, mask, activations=act)
        self._defer.add(st.metrics, layers, values)

    def _summarise_hidden(self, st: BatchState, layer: int, hidden: Any) -> None:
        from homog.metrics.massive import top_activations
        from homog.metrics.spectra import pool

        mask = st.mask.to(hidden.device)
        dev, vec = st.device, st.vec_dtype
        if self._stack is not None:  # computed with other layers' (by the end of the forward)
            act = top = None
            if self.config.peer_metrics:  # the attention statistics need ``top`` now
                act, top = top_activations(hidden, mask)
            self._stack.add(layer, hidden, act)
        else:
            values, top = self._hidden_values(st, [layer], hidden, mask)
            if self._host is not None:  # the host solves the spectra (a Future when pipelined)
                st.metrics[layer] = self._host.submit(values)
            elif self._defer is not None:  # solved with other layers' (by the forward's end)
                self._defer.add(st.metrics, layer, values)
            else:
                st.metrics[layer] = torch.stack([values[m] for m in self.metric_names], -1).to(dev)
        if top is not None:
            st.top[layer] = top.to(dev)
        if st.sent_index is not None:
            from homog.extract.sentences import hidden_sentence_metrics

            sent = hidden_sentence_metrics(hidden, mask, *st.sent_index)
            st.sent_hidden[layer] = sent.to(dev)
        # hidden_metrics has checked these tokens for NaN/inf (or will, stacked); what is kept
        # must stay finite in the stored dtype too (checked here, where it would arise)
        try:
            for how in POOLINGS:
                # the mean in float64: the same tokens in another order (the position family at
                # layer 0) give the same vector to ~1e-16 (the probe reuses these vectors)
                acc = torch.float64 if how == "mean" else torch.float32
                pooled = pool(hidden, mask, how, dtype=acc, check_finite=False).to(vec)
                self._check_stored(st, layer, f"{how}-pooled vectors", pooled)
                st.pooled[how][layer] = pooled.to(dev)
            b, p = st.sample_b, st.sample_p
            tokens = hidden[b.to(hidden.device), p.to(hidden.device)].to(vec)
            self._check_stored(st, layer, "sampled token vectors", tokens)
        except HomogError:
            if self._stack is not None:  # NaN/inf in the hidden states: that error first
                self._hidden_values(st, [layer], hidden, mask)
            raise
        st.tokens[layer] = tokens.to(dev)

    def _check_stored(self, st: BatchState, layer: int, what: str, values: Any) -> None:
        """HomogError naming the layer when ``values`` (B, ...) overflow the stored dtype."""
        finite = torch.isfinite(values)
        if not bool(finite.all()):
            raise HomogError(
                f"{what} at layer {layer} overflow {str(st.vec_dtype).removeprefix('torch.')} "
                f"(largest |value| above its range) in text(s) {', '.join(st.names[:10])}"
            )

    # -- one batch --------------------------------------------------------------------------

    def run_batch(
        self, texts: Sequence[EncodedText], intervention: str, plan: SamplePlan
    ) -> BatchResult:
        """One forward pass over ``texts`` (right-padded) under ``intervention``.

        Raises HomogError naming the text when hidden states hold NaN/inf.
        """
        return self.start_batch(texts, intervention, plan).result()

    def start_batch(
        self, texts: Sequence[EncodedText], intervention: str, plan: SamplePlan
    ) -> PendingBatch:
        """``run_batch`` up to the spectra the host may still be solving: the forward has
        run, ``.result()`` waits for them (``run_batches`` runs the next forward first)."""
        lm = self.loaded
        pad_id = lm.tokenizer.pad_token_id or 0
        inputs = pack_batch(texts, intervention, plan, pad_id, self.config.seed)
        st = self._batch_state(texts, inputs)
        columns = control_columns(texts, intervention, self.config.seed)
        if columns is not None:  # attn_ctrl_token: the control arm's x (docs/interventions.md)
            st.ctrl_columns = torch.tensor(columns, dtype=torch.long, device=st.lengths.device)
        follow = self.config.sentence_metrics and bool(inputs.sent_rows)
        if follow:
            from homog.extract.sentences import gather_index

            st.sent_index = gather_index(inputs.sent_rows, inputs.sent_bounds)
        self._state = st
        try:
            with edit_batch(self.loaded, self.config, intervention, texts, st.mask):
                cache = self._forward(st, inputs)
            result = batch_result(st, texts, inputs, self.metric_names, self.config, follow)
        finally:
            self._state = None
            if self._stack is not None:
                self._stack.clear()  # the buffer, and what a failed forward left
            if self._defer is not None:
                self._defer.clear()  # what a failed forward left
        if self._zero_shot is not None:
            # hooks idle, edit removed: a graded run's suffix reads the cache its edit shaped
            alone = edit_alone(self.loaded, self.config, intervention, texts, st.mask)
            result.log_odds, result.prompt_tokens = self._zero_shot.answer(
                cache, inputs.ids, inputs.attn, inputs.pos, intervention, alone
            )
        return PendingBatch(result, st.metrics)

    def _batch_state(self, texts: Sequence[EncodedText], inputs: BatchInputs) -> BatchState:
        """The hooks' ``BatchState`` for a batch: its metric-token mask and lengths on the
        input device, its sampled (row, position) pairs, empty per-layer slots."""
        from homog.metrics.spectra import token_mask

        dev = self.loaded.input_device
        attn_t = torch.from_numpy(inputs.attn)
        mask = token_mask(attn_t, torch.from_numpy(inputs.special), self.config.exclude_special)
        return BatchState(
            names=[t.name for t in texts],
            mask=mask.to(dev),
            lengths=attn_t.sum(1).to(dev),
            sample_b=torch.tensor(inputs.sample_b, dtype=torch.long),
            sample_p=torch.tensor(inputs.sample_p, dtype=torch.long),
            device=dev,
            n_layers=self.loaded.n_layers,
            vec_dtype=self.vec_dtype,
        )

    def _forward(self, st: BatchState, inputs: BatchInputs) -> Any:
        """The decoder's forward pass over ``inputs`` (the hooks fill ``st``), then the stacked
        or deferred layers' metrics; HomogError on out of memory or a layer not captured.
        Returns the pass's KV cache when the zero-shot prompt continues it, else None."""
        dev = self.loaded.input_device
        b, n_pad = inputs.ids.shape
        keep = self._zero_shot is not None
        try:
            with torch.inference_mode():
                out = self.loaded.decoder(
                    input_ids=torch.from_numpy(inputs.ids).to(dev),
                    attention_mask=torch.from_numpy(inputs.attn).to(dev),
                    position_ids=torch.from_numpy(inputs.pos).to(dev),
                    use_cache=keep,
                )
                if self._stack is not None:
                    self._stack.flush()
                if self._defer is not None:
                    self._defer.flush()
        except torch.OutOfMemoryError as exc:
            raise HomogError(
                f"out of memory on {dev} for a batch of {b} texts x {n_pad} tokens "
                f"({', '.join(st.names[:3])} ...): lower extract.batch_tokens "
                f"(now {self.config.batch_tokens}) or extract.max_tokens"
            ) from exc
        missing = [i for i, v in enumerate(st.metrics) if v is None]
        if missing:
            raise HomogError(f"no hidden states were captured for layer(s) {missing}")
        return output_cache(out) if keep else None
