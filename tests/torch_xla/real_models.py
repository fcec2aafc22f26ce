"""Real models from transformers and timm, built from tiny configs with random weights (no
downloads), as data: what each model is, its inputs, and what x64guard must do with it.

Every model runs through the backend (inference, and two training steps where the model
trains), through `narrow_exported`, and under torch-xla's own `XLA_USE_32BIT_LONG=1` (in a
child process): tests/torch_xla/test_real_models.py. Dropout probabilities are 0, so that
training compares exactly with eager PyTorch; dropout itself is tested in test_training.py.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

VOCAB = 500


@dataclasses.dataclass(frozen=True)
class RealModel:
    name: str
    build: Callable[[], torch.nn.Module]      # on the CPU, in its own dtype, train() mode
    inputs: Callable[[int], dict]             # keyword inputs for seed k (host tensors)
    output: str                               # the output compared: "logits"
    labels: Callable[[dict], dict]            # what training adds to the inputs (the model computes its loss)
    export: str = "ok"                        # narrow_exported: "ok", or "torch-xla-failure" (wrapped, with workaround)
    rtol: float = 1e-4
    atol: float = 1e-4
    train_atol: float = 1e-5                  # updated parameters after two SGD steps
    loss_rtol: float = 1e-4                   # training losses
    running_var_rtol: float = 1e-5            # batch norm's running variance after two steps
    family: str = "transformers"
    note: str = ""


def _ids(seed: int, batch: int = 2, length: int = 12, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))   # int64


def _image(seed: int, dtype=torch.float32, size: int = 32, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _batch_norm_images(seed: int, dtype=torch.float32) -> dict:
    """Large enough that batch norm's last layers normalize over 16 values (2x2 x 4), not 2:
    eager's and torch-xla's variances then agree within float32 noise."""
    return {"x": _image(seed, dtype, size=64, batch=4)}


def _four_labels(inputs: dict) -> dict:
    return {"labels": torch.tensor([0, 2, 5, 9])}


def _tiny_decoder(**extra) -> dict:
    base = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    base.update(extra)
    return base


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=64,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2))


def bert():
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, type_vocab_size=2, num_labels=3, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0))


def bert_inputs(seed: int) -> dict:
    ids = _ids(seed)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0                                    # a padded second sequence
    types = torch.zeros_like(ids)
    types[:, 6:] = 1                                   # sentence pairs
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def distilbert():
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    torch.manual_seed(0)
    return DistilBertForMaskedLM(DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                                  max_position_embeddings=64, dropout=0.0, attention_dropout=0.0))


def t5():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                               num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                                               decoder_start_token_id=0, pad_token_id=0))


def seq2seq_inputs(seed: int) -> dict:
    return {"input_ids": _ids(seed), "decoder_input_ids": _ids(seed + 100, length=8), "use_cache": False}


def decoder_inputs(seed: int) -> dict:
    """As a tokenizer returns them (ids and an attention mask). Without the mask, Hugging
    Face decoders test for packed sequences with a data-dependent `.all()` that dynamo
    cannot compile: that test then runs eagerly on torch-xla, unnarrowed, between graphs."""
    return {"input_ids": _ids(seed), "attention_mask": torch.ones(2, 12, dtype=torch.int64), "use_cache": False}


def bart():
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(0)
    return BartForConditionalGeneration(BartConfig(
        vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=2))


def llama(dtype=torch.float32):
    def build():
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        return LlamaForCausalLM(LlamaConfig(**_tiny_decoder())).to(dtype)
    return build


def mistral():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    return MistralForCausalLM(MistralConfig(**_tiny_decoder(sliding_window=4)))


def bloom():
    from transformers import BloomConfig, BloomForCausalLM

    torch.manual_seed(0)
    return BloomForCausalLM(BloomConfig(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4,
                                        hidden_dropout=0.0, attention_dropout=0.0))


def vit():
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    return ViTForImageClassification(ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                                               num_attention_heads=4, intermediate_size=128, num_labels=10,
                                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


class Classifier(torch.nn.Module):
    """A timm image model with the training loss computed inside its forward, as Hugging
    Face models do: `{"logits": ..., "loss": cross-entropy}` (the labels converted to int64
    there, inside the compiled graph: cross_entropy takes int64 targets)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x, labels=None):
        logits = self.model(x)
        if labels is None:
            return {"logits": logits}
        return {"logits": logits, "loss": torch.nn.functional.cross_entropy(logits, labels.long())}


def timm_model(name: str, dtype=torch.float32, **kwargs):
    def build():
        import timm

        torch.manual_seed(0)
        return Classifier(timm.create_model(name, pretrained=False, num_classes=10, **kwargs)).to(dtype)
    return build


def _lm_labels(inputs: dict) -> dict:
    return {"labels": inputs["input_ids"]}


def _class_labels(inputs: dict) -> dict:
    return {"labels": torch.tensor([0, 2])}


def _seq2seq_labels(inputs: dict) -> dict:
    return {"labels": inputs["decoder_input_ids"]}


MODELS: list[RealModel] = [
    RealModel("gpt2", gpt2, decoder_inputs, "logits", _lm_labels, export="torch-xla-failure"),
    RealModel("bert", bert, bert_inputs, "logits", _class_labels),
    RealModel("distilbert", distilbert, lambda s: {"input_ids": _ids(s), "attention_mask": torch.ones(2, 12,
                                                                                                        dtype=torch.int64)},
              "logits", _lm_labels),
    RealModel("t5", t5, seq2seq_inputs, "logits", _seq2seq_labels),
    RealModel("bart", bart, seq2seq_inputs, "logits", _seq2seq_labels),
    RealModel("llama", llama(), decoder_inputs, "logits", _lm_labels),
    RealModel("llama_float64", llama(torch.float64), decoder_inputs, "logits", _lm_labels),
    RealModel("mistral_sliding_window", mistral, decoder_inputs, "logits", _lm_labels,
              note="sliding window 4 over 12 tokens"),
    RealModel("bloom_alibi", bloom, decoder_inputs, "logits", _lm_labels),
    RealModel("vit", vit, lambda s: {"pixel_values": _image(s)}, "logits", _class_labels),
    # Batch norm in training mode over a batch of 2 at 32x32 (1x1 in the last layers): torch-xla's own
    # variance (openxla gives the same numbers as x64guard, bit for bit) differed from eager's by ~1e-2
    # after two steps; over 16 values per channel it does not.
    # torch-xla updates running_var with the biased variance where eager uses the unbiased one
    # (n/(n-1) apart: 6.7% at n = 16 in layer4 here, 1.3% after two steps of momentum 0.1); openxla's
    # running variances differ from eager's as x64guard's do. Running means are compared as tightly
    # as parameters.
    RealModel("resnet18", timm_model("resnet18"), _batch_norm_images, "logits", _four_labels, family="timm",
              running_var_rtol=0.02, note="batch-norm statistics updated in place"),
    RealModel("resnet18_float64", timm_model("resnet18", torch.float64),
              lambda s: _batch_norm_images(s, torch.float64), "logits", _four_labels, family="timm",
              running_var_rtol=0.02),
    RealModel("convnext", timm_model("convnext_atto", depths=(1, 1, 1, 1), dims=(16, 32, 64, 128)),
              lambda s: {"x": _image(s)}, "logits", _class_labels, family="timm"),
    RealModel("beit", timm_model("beit_base_patch16_224", img_size=32, patch_size=8, embed_dim=64, depth=2,
                                 num_heads=4, head_init_scale=1.0), lambda s: {"x": _image(s)}, "logits",
              _class_labels, family="timm", note="int64 relative-position index buffer"),
]

BY_NAME = {m.name: m for m in MODELS}


def reference_inputs(inputs: dict) -> dict:
    """The inputs of the eager reference at 32 bits: float64 data as float32 (integer
    inputs stay int64: eager PyTorch takes them as they are)."""
    return {k: v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.float64 else v for k, v in inputs.items()}


def output_of(model: RealModel, result) -> torch.Tensor:
    """The tensor compared with eager: the model's logits (or hidden state, or its tensor)."""
    return result[model.output] if isinstance(result, dict) else getattr(result, model.output)


def loss_of(model: RealModel, result) -> torch.Tensor:
    """The training loss the model computes itself (labels given)."""
    return result["loss"] if isinstance(result, dict) else result.loss
