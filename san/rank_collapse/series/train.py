"""The offline training series: a small GPT-NeoX (Pythia's architecture: rotary attention, parallel residual) trained
on the pinned text on the CPU, its checkpoints saved on Pythia's schedule as model folders (revisions ``step<n>`` of
one local model), so that rank collapse can be followed along training without a hub.

The vocabulary is the words and punctuation runs of the pinned text, the most frequent first (:func:`vocabulary`),
a word-level tokenizer of the tokenizers library (:func:`make_tokenizer`); batches are windows of the text's token
stream drawn from a CPU generator seeded by the run's seed; the weights are drawn with the same seed. Each checkpoint
goes through the one door into a model folder (:func:`san.models.store.store`: the sha256 of every file in its
manifest, with the seed, step, tokens seen and loss). Training is resumable: the model, optimiser and generator
states of the last checkpoint are kept beside the checkpoints (``state.pt``), and a restarted run continues from
there with the same numbers. What the model learns is recorded against the unigram baseline (the entropy of the
text's token frequencies, the loss of a model that ignores the context).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from san.core.rng import cpu_generator
from san.models.revisions import revision_name
from san.models.sources.fetched import Fetched
from san.models.store import staged, store
from san.rank_collapse.series.spec import schedule

#: the end-of-text token (between documents) and the unknown word, the vocabulary's first ids
SPECIAL_TOKENS = ("<|endoftext|>", "<unk>")
#: what a word is, for the vocabulary and the tokenizer's pre-tokenisation (tokenizers' ``Whitespace``)
WORD = re.compile(r"\w+|[^\w\s]+")
STATE = "state.pt"
LOSS = "loss.json"


def vocabulary(documents: Sequence[Sequence[str]], size: int) -> dict[str, int]:
    """The ``size`` ids of the word-level vocabulary: :data:`SPECIAL_TOKENS`, then the lower-cased words of the
    documents' paragraphs by decreasing count (ties in alphabetical order, so the vocabulary is the same on every
    machine)."""
    counts = Counter(w for doc in documents for para in doc for w in WORD.findall(para.lower()))
    words = sorted(counts, key=lambda w: (-counts[w], w))[: size - len(SPECIAL_TOKENS)]
    return {w: i for i, w in enumerate((*SPECIAL_TOKENS, *words))}


def make_tokenizer(vocab: dict[str, int]):
    """A word-level fast tokenizer of ``vocab`` (lower-cased, split as :data:`WORD`; unknown words to ``<unk>``)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", unk_token="<unk>")


def token_stream(tokenizer, documents: Sequence[Sequence[str]]) -> torch.Tensor:
    """The documents' token ids in one stream (paragraphs joined by a space, documents ended by end-of-text)."""
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    ids: list[int] = []
    for doc in documents:
        ids += tokenizer(" ".join(doc), add_special_tokens=False)["input_ids"] + [eos]
    return torch.tensor(ids, dtype=torch.long)


def unigram_loss(stream: torch.Tensor, vocab_size: int) -> float:
    """Cross-entropy (nats per token) of the stream under its own token frequencies: the loss of the best model that
    ignores the context, the baseline a trained model must beat."""
    counts = torch.bincount(stream, minlength=vocab_size).double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


def model_config(settings: dict[str, Any], vocab_size: int):
    """The GPT-NeoX config of ``settings['model']`` (layers, width, heads, intermediate, context): Pythia's structure
    (parallel residual, rotary attention on a quarter of each head), no dropout, eager attention."""
    from transformers import GPTNeoXConfig

    m = settings["model"]
    return GPTNeoXConfig(
        vocab_size=vocab_size,
        hidden_size=m["width"],
        num_hidden_layers=m["layers"],
        num_attention_heads=m["heads"],
        intermediate_size=m["intermediate"],
        max_position_embeddings=m["context"],
        rotary_pct=0.25,
        use_parallel_residual=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,
    )


def _save_checkpoint(out: Path, step: int, model, tokenizer, record: dict[str, Any]) -> dict[str, Any]:
    """Save ``model`` and ``tokenizer`` as the model folder ``out/step<n>`` through the one door
    (:func:`san.models.store.store`), built beside it and moved into place when complete."""
    folder = out / revision_name(step)

    def derive(dest: Path) -> tuple[dict[str, Any], None]:
        model.save_pretrained(dest, safe_serialization=True)
        tokenizer.save_pretrained(dest)
        return {}, None

    # the family recognised from the saved config.json (GPT-NeoX's), as for any acquired folder
    fetched = Fetched("series", f"series checkpoint {folder}", record, None, derive=derive)
    with staged(folder) as staging:
        return store(staging, fetched)


def _resume(state_path: Path, key: str, model, optimizer, generator: torch.Generator) -> tuple[list[float], int]:
    """Restore the model, optimiser and generator of the last checkpoint from ``state_path`` when it was written by
    a training of the same settings and seed (``key``); the losses so far and the step to continue after."""
    if not state_path.is_file():
        return [], 0
    state = torch.load(state_path, weights_only=True)  # tensors and plain containers only
    if state["key"] != key:
        return [], 0
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    generator.set_state(state["generator"])
    return list(state["losses"]), int(state["step"])


def _update(model, optimizer, stream: torch.Tensor, seq_len: int, batch: int, generator: torch.Generator) -> float:
    """One training step on ``batch`` windows of ``seq_len`` tokens of ``stream`` drawn from ``generator``: the
    next-token loss (transformers shifts the labels) before the update."""
    starts = torch.randint(0, len(stream) - seq_len, (batch,), generator=generator)
    window = torch.stack([stream[s : s + seq_len] for s in starts.tolist()])
    loss = model(input_ids=window, labels=window).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()


def train(
    settings: dict[str, Any], seed: int, documents: Sequence[Sequence[str]], out_dir: str | Path, log: Any = None
) -> dict[str, Any]:
    """Train the series of ``seed`` and save its checkpoints under ``out_dir`` (``step<n>/``, one model folder per
    step of :func:`schedule`); ``settings`` is the ``series`` config slice (``model``, ``vocabulary``, ``seq_len``,
    ``batch_size``, ``learning_rate``, ``steps``, ``every``, ``log_until``). A run that finds ``state.pt`` of the same
    settings continues after its step. Returns the loss record written to ``loss.json``: the loss of every update, the
    unigram baseline (:func:`unigram_loss`), the mean loss over the last tenth of the steps and the checkpoints."""
    from transformers import GPTNeoXForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary(documents, settings["vocabulary"])
    tokenizer = make_tokenizer(vocab)
    stream = token_stream(tokenizer, documents)
    seq_len, batch = settings["seq_len"], settings["batch_size"]
    if len(stream) <= seq_len:
        raise ValueError(f"series.seq_len = {seq_len} exceeds the text's {len(stream)} tokens")
    steps = schedule(settings)
    config = model_config(settings, len(vocab))
    torch.manual_seed(seed)
    model = GPTNeoXForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["learning_rate"], weight_decay=0.0)
    generator = cpu_generator(seed)
    key = json.dumps({"settings": settings, "seed": seed}, sort_keys=True)
    losses, start = _resume(out / STATE, key, model, optimizer, generator)
    if start and log is not None:
        log.info("seed %d: resumed after step %d", seed, start)
    record = {"seed": seed, "architecture": config.to_diff_dict(), "tokens_per_step": batch * seq_len}

    def checkpoint(step: int) -> None:
        loss = losses[step - 1] if step else None
        _save_checkpoint(out, step, model, tokenizer, {**record, "step": step, "tokens_seen": step * batch * seq_len,
                                                         "loss": loss})  # fmt: skip
        torch.save(
            {"key": key, "step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "generator": generator.get_state(), "losses": losses}, out / STATE,
        )  # fmt: skip
        if log is not None:
            log.info("seed %d: checkpoint at step %d, loss %s", seed, step, loss)

    if start == 0:
        checkpoint(0)
    model.train()
    for step in range(start + 1, steps[-1] + 1):
        losses.append(_update(model, optimizer, stream, seq_len, batch, generator))
        if step in steps:
            checkpoint(step)
    tail = losses[-max(1, len(losses) // 10) :]
    result = {
        "seed": seed, "steps": steps, "revisions": [revision_name(s) for s in steps], "loss": losses,
        "unigram_loss": unigram_loss(stream, len(vocab)), "final_loss": float(np.mean(tail)) if tail else math.nan,
        "tokens": int(len(stream)), "vocabulary": len(vocab),
    }  # fmt: skip
    (out / LOSS).write_text(json.dumps(result, indent=2))
    return result
