"""The runtime checker on architectures that are in neither zoo: does a correct model pass?

Builds ~40 more Hugging Face architectures from tiny configs (random weights, nothing
downloaded), trains each as its model card does (its own ``labels=`` loss; AdamW with no-decay
groups, SGD with momentum, or a ``step_fn`` that clips), and runs ``check_step`` on the CPU in
bfloat16 and float16 (+GradScaler) for each seed. Prints one row per model and seed:
parameters, each mode's status and ``E / limit`` (``q`` = within the quick bound), and the
first error finding of a failing report. A correct model must pass every row; a failure here
is a checker bug to fix in devlint/runtime (the regression model then goes to
fixtures/runtime/zoo_wide.py). One thread, one check at a time.

    python benchmarks/runtime_sweep.py [--seeds 1,2] [--cpu-kernels auto|emulated|native] [--out DIR] [NAME ...]

``--out DIR`` writes the full report of every failing check to DIR/NAME-SEED.txt.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
import traceback
from pathlib import Path

import torch

from devlint.runtime import TrainingStep, check_step

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "runtime"
_spec = importlib.util.spec_from_file_location("devlint_sweep_zoo_wide", HERE / "zoo_wide.py")
zw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zw)

V = zw.VOCAB
_LL = zw._LLAMA_LIKE
_BL = zw._BERT_LIKE


def _sgd(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def _clipped_step(model, batch, optimizer, scaler):
    """A hand-written AMP step that clips the unscaled gradients (as most training loops do)."""
    optimizer.zero_grad()
    loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    return loss


def _model(cls, config, **cfg):
    tf = zw._tf()
    return getattr(tf, cls)(getattr(tf, config)(**cfg))


def _lm(cls, config, name, **cfg):
    return zw._causal(cls, config, name, **cfg)


def _s2s(cls, config, name, opt=zw._adamw_no_decay, **cfg):
    ids, mask, _ = zw._padded(zw._tokens())
    labels = zw._tokens(seq=10)
    labels[-1, 7:] = -100
    return TrainingStep(_model(cls, config, vocab_size=V, **cfg),
                        {"input_ids": ids, "attention_mask": mask, "labels": labels},
                        zw._hf_loss, opt, name=name)


def _cls(cls, config, name, seq=None, opt=zw._adamw_no_decay, **cfg):
    ids, mask, _ = zw._padded(zw._tokens(seq=seq))
    return TrainingStep(_model(cls, config, vocab_size=V, num_labels=3, **cfg),
                        {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 2])},
                        zw._hf_loss, opt, name=name)


def _tok_cls(cls, config, name, **cfg):
    ids, mask, _ = zw._padded(zw._tokens())
    labels = torch.randint(0, 4, ids.shape).masked_fill(mask == 0, -100)
    return TrainingStep(_model(cls, config, vocab_size=V, num_labels=4, **cfg),
                        {"input_ids": ids, "attention_mask": mask, "labels": labels},
                        zw._hf_loss, zw._adamw, name=name)


_S2S = dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
            max_position_embeddings=64, pad_token_id=1, decoder_start_token_id=2, eos_token_id=2)
_T5 = dict(d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
           decoder_start_token_id=0, relative_attention_num_buckets=8)


def _audio(cls, config, name, **cfg):
    labels = torch.randint(1, 32, (2, 8))
    labels[-1, 6:] = -100
    cfg = {**dict(vocab_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                  num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, pad_token_id=0,
                  ctc_loss_reduction="mean", mask_time_prob=0.05, mask_time_length=2), **cfg}
    return TrainingStep(_model(cls, config, **cfg),
                        {"input_values": torch.randn(2, 1600) * 0.1, "labels": labels}, zw._hf_loss,
                        zw._adamw, name=name)


def _ts(cls, config, name, **cfg):
    tf = zw._tf()
    c = getattr(tf, config)(prediction_length=4, context_length=8, lags_sequence=[1, 2], input_size=1,
                            num_time_features=1, d_model=16, encoder_layers=1, decoder_layers=1,
                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                            decoder_ffn_dim=32, **cfg)
    past = 8 + 2
    b = {"past_values": torch.randn(4, past).abs() + 1, "past_time_features": torch.randn(4, past, 1),
         "past_observed_mask": torch.ones(4, past), "future_values": torch.randn(4, 4).abs() + 1,
         "future_time_features": torch.randn(4, 4, 1)}
    return TrainingStep(getattr(tf, cls)(c), b, zw._hf_loss, zw._adamw, name=name)


MODELS = {
    # --- decoders: MoE routers, parallel blocks, multi-query, soft-capping, hybrids
    "mixtral_jitter": lambda: _lm("MixtralForCausalLM", "MixtralConfig", "mixtral_jitter", num_local_experts=4,
                                  num_experts_per_tok=2, router_jitter_noise=0.1, output_router_logits=True,
                                  **_LL),
    "qwen2_moe": lambda: _lm("Qwen2MoeForCausalLM", "Qwen2MoeConfig", "qwen2_moe", num_experts=4,
                             num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
                             output_router_logits=True, **_LL),
    "olmoe": lambda: _lm("OlmoeForCausalLM", "OlmoeConfig", "olmoe", num_experts=4, num_experts_per_tok=2,
                         output_router_logits=True, **_LL),
    "gptj": lambda: _lm("GPTJForCausalLM", "GPTJConfig", "gptj", n_layer=2, n_embd=32, n_head=2, rotary_dim=8,
                        n_positions=64),
    "codegen": lambda: _lm("CodeGenForCausalLM", "CodeGenConfig", "codegen", n_layer=2, n_embd=32, n_head=4,
                           rotary_dim=4, n_positions=64, n_ctx=64),
    "gpt_bigcode_mqa": lambda: _lm("GPTBigCodeForCausalLM", "GPTBigCodeConfig", "gpt_bigcode_mqa", n_layer=2,
                                   n_embd=32, n_head=2, n_positions=64, multi_query=True),
    "gpt_neo": lambda: _lm("GPTNeoForCausalLM", "GPTNeoConfig", "gpt_neo", num_layers=2, hidden_size=32,
                           num_heads=2, attention_types=[[["global", "local"], 1]], window_size=8,
                           max_position_embeddings=64),
    "stablelm": lambda: _lm("StableLmForCausalLM", "StableLmConfig", "stablelm", **_LL),
    "olmo": lambda: _lm("OlmoForCausalLM", "OlmoConfig", "olmo", clip_qkv=8.0, **_LL),
    "olmo2": lambda: _lm("Olmo2ForCausalLM", "Olmo2Config", "olmo2", **_LL),
    "cohere": lambda: _lm("CohereForCausalLM", "CohereConfig", "cohere", logit_scale=0.5, **_LL),
    "gemma2_softcap": lambda: _lm("Gemma2ForCausalLM", "Gemma2Config", "gemma2_softcap", head_dim=16,
                                  sliding_window=8, **_LL),
    "phi3": lambda: _lm("Phi3ForCausalLM", "Phi3Config", "phi3", pad_token_id=0, **_LL),
    "starcoder2": lambda: _lm("Starcoder2ForCausalLM", "Starcoder2Config", "starcoder2", **_LL),
    "granite": lambda: _lm("GraniteForCausalLM", "GraniteConfig", "granite", embedding_multiplier=12.0,
                           logits_scaling=8.0, residual_multiplier=0.22, attention_multiplier=0.015625, **_LL),
    "mpt_alibi": lambda: _lm("MptForCausalLM", "MptConfig", "mpt_alibi", n_layers=2, d_model=32, n_heads=2,
                             max_seq_len=64),
    "xglm": lambda: _lm("XGLMForCausalLM", "XGLMConfig", "xglm", num_layers=2, d_model=32, attention_heads=2,
                        ffn_dim=64, max_position_embeddings=64),
    "jamba": lambda: _lm("JambaForCausalLM", "JambaConfig", "jamba", num_hidden_layers=2, hidden_size=32,
                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, num_experts=2,
                         num_experts_per_tok=1, expert_layer_period=2, expert_layer_offset=1,
                         attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_expand=2,
                         mamba_dt_rank=4, use_mamba_kernels=False),
    # --- encoders and their heads
    "longformer": lambda: _tok_cls("LongformerForTokenClassification", "LongformerConfig", "longformer",
                                   attention_window=[4, 4], pad_token_id=1, **_BL),
    "bigbird_sparse": lambda: _cls("BigBirdForSequenceClassification", "BigBirdConfig", "bigbird_sparse", seq=64,
                                   attention_type="block_sparse", block_size=4, num_random_blocks=2, **_BL),
    "xlnet": lambda: _cls("XLNetForSequenceClassification", "XLNetConfig", "xlnet", d_model=32, n_layer=2,
                          n_head=2, d_inner=64),
    "funnel": lambda: _cls("FunnelForSequenceClassification", "FunnelConfig", "funnel", block_sizes=[1, 1],
                           d_model=32, n_head=2, d_head=16, d_inner=64),
    "mpnet": lambda: _masked("MPNetForMaskedLM", "MPNetConfig", "mpnet", **_BL),
    "convbert": lambda: _cls("ConvBertForSequenceClassification", "ConvBertConfig", "convbert",
                             embedding_size=32, **_BL),
    "layoutlm": lambda: _layoutlm(),
    "roformer": lambda: _tok_cls("RoFormerForTokenClassification", "RoFormerConfig", "roformer", **_BL),
    "squeezebert_sgd": lambda: _cls("SqueezeBertForSequenceClassification", "SqueezeBertConfig",
                                    "squeezebert_sgd", embedding_size=32, opt=_sgd, **_BL),
    "deberta_v2_regression": lambda: _regression(),
    "canine": lambda: _canine(),
    # --- sequence to sequence
    "mt5": lambda: _s2s("MT5ForConditionalGeneration", "MT5Config", "mt5", **_T5),
    "umt5": lambda: _s2s("UMT5ForConditionalGeneration", "UMT5Config", "umt5", **_T5),
    "longt5_tglobal": lambda: _s2s("LongT5ForConditionalGeneration", "LongT5Config", "longt5_tglobal",
                                   encoder_attention_type="transient-global", local_radius=4, global_block_size=4,
                                   **_T5),
    "switch_transformers": lambda: _s2s("SwitchTransformersForConditionalGeneration", "SwitchTransformersConfig",
                                        "switch_transformers", num_experts=4, expert_capacity=8,
                                        encoder_sparse_step=1, decoder_sparse_step=1, router_jitter_noise=0.01,
                                        **_T5),
    "pegasus": lambda: _s2s("PegasusForConditionalGeneration", "PegasusConfig", "pegasus", **_S2S),
    "mbart_clipped": lambda: _clip(_s2s("MBartForConditionalGeneration", "MBartConfig", "mbart_clipped", **_S2S)),
    "led": lambda: _s2s("LEDForConditionalGeneration", "LEDConfig", "led", attention_window=[4],
                        max_encoder_position_embeddings=64, max_decoder_position_embeddings=64,
                        **{k: v for k, v in _S2S.items() if k != "max_position_embeddings"}),
    "blenderbot": lambda: _s2s("BlenderbotForConditionalGeneration", "BlenderbotConfig", "blenderbot", **_S2S),
    "prophetnet": lambda: _s2s("ProphetNetForConditionalGeneration", "ProphetNetConfig", "prophetnet",
                               hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_encoder_layers=1,
                               num_decoder_layers=1, num_encoder_attention_heads=2, num_decoder_attention_heads=2,
                               ngram=2, num_buckets=8, relative_max_distance=16, max_position_embeddings=64,
                               pad_token_id=1, decoder_start_token_id=2),
    # --- vision
    "beit": lambda: zw._image("BeitForImageClassification", "BeitConfig", "beit", image_size=32, patch_size=8,
                              use_relative_position_bias=True, layer_scale_init_value=0.1, drop_path_rate=0.1,
                              **_VIT),
    "deit_distilled": lambda: _deit(),
    "data2vec_vision": lambda: zw._image("Data2VecVisionForImageClassification", "Data2VecVisionConfig",
                                         "data2vec_vision", image_size=32, patch_size=8, **_VIT),
    "levit": lambda: zw._image("LevitForImageClassification", "LevitConfig", "levit", size=64, image_size=64,
                               hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3], depths=[1, 1, 1],
                               key_dim=[8, 8, 8], drop_path_rate=0, down_ops=[["Subsample", 8, 16 // 8, 4, 2, 2],
                                                                                ["Subsample", 8, 32 // 8, 4, 2, 2]]),
    "poolformer_sgd": lambda: zw._image("PoolFormerForImageClassification", "PoolFormerConfig", "poolformer_sgd",
                                        num_encoder_blocks=2, depths=[1, 1], hidden_sizes=[8, 16],
                                        patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1], pool_size=3,
                                        optimizer=_sgd),
    "mobilevit": lambda: zw._image("MobileViTForImageClassification", "MobileViTConfig", "mobilevit", size=64,
                                   image_size=64, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32,
                                                                                                  64],
                                   num_attention_heads=2),
    "convnextv2": lambda: zw._image("ConvNextV2ForImageClassification", "ConvNextV2Config", "convnextv2",
                                    num_stages=2, hidden_sizes=[8, 16], depths=[1, 1]),
    "hubert": lambda: _audio("HubertForCTC", "HubertConfig", "hubert"),
    "wavlm": lambda: _audio("WavLMForCTC", "WavLMConfig", "wavlm", num_buckets=16, max_bucket_distance=32),
    "data2vec_audio": lambda: _audio("Data2VecAudioForCTC", "Data2VecAudioConfig", "data2vec_audio",
                                     num_conv_pos_embeddings=2, conv_pos_kernel_size=5),
    "wav2vec2_conformer": lambda: _audio("Wav2Vec2ConformerForCTC", "Wav2Vec2ConformerConfig",
                                         "wav2vec2_conformer", position_embeddings_type="rotary",
                                         conformer_conv_depthwise_kernel_size=7),
    "speecht5_asr": lambda: _speecht5(),
    "encodec": lambda: _encodec(),
    "patchtst": lambda: _patchtst(),
    "time_series_transformer": lambda: _ts("TimeSeriesTransformerForPrediction", "TimeSeriesTransformerConfig",
                                           "time_series_transformer"),
    "informer": lambda: _ts("InformerForPrediction", "InformerConfig", "informer", attention_type="prob",
                            sampling_factor=2),
    "vilt": lambda: _vilt(),
    "blip_caption": lambda: _blip(),
    "perceiver_mlm": lambda: _perceiver(),
}

MODELS.update({
    # --- heads and training options the first batch does not cover
    "llama_seq_cls": lambda: _cls("LlamaForSequenceClassification", "LlamaConfig", "llama_seq_cls", pad_token_id=0,
                                  **_LL),
    "gpt2_seq_cls": lambda: _cls("GPT2ForSequenceClassification", "GPT2Config", "gpt2_seq_cls", pad_token_id=0,
                                 n_layer=2, n_embd=32, n_head=2, n_positions=64),
    "bart_seq_cls": lambda: _bart_cls(),
    "bert_qa": lambda: _qa(),
    "gpt2_double_heads": lambda: _double_heads(),
    "gpt_neo_clip_onecycle": lambda: _clip_sched(),
    "xlm": lambda: _cls("XLMForSequenceClassification", "XLMConfig", "xlm", emb_dim=32, n_layers=2, n_heads=2,
                        max_position_embeddings=64),
    "ctrl": lambda: _lm("CTRLLMHeadModel", "CTRLConfig", "ctrl", n_layer=2, n_embd=32, n_head=2, dff=64,
                        n_positions=64),
    "rembert": lambda: _masked("RemBertForMaskedLM", "RemBertConfig", "rembert", input_embedding_size=16,
                               output_embedding_size=16, **_BL),
    "reformer_lsh": lambda: _reformer(),
    "vit_mae": lambda: _pixels("ViTMAEForPreTraining", "ViTMAEConfig", "vit_mae", image_size=32, patch_size=8,
                               decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
                               decoder_intermediate_size=32, mask_ratio=0.5, **_VIT),
    "dinov2_registers": lambda: zw._image("Dinov2WithRegistersForImageClassification", "Dinov2WithRegistersConfig",
                                          "dinov2_registers", image_size=32, patch_size=8, num_register_tokens=2,
                                          **_VIT),
    "videomae": lambda: _videomae(),
    "ast_audio": lambda: _ast(),
    "sew_d": lambda: _audio("SEWDForCTC", "SEWDConfig", "sew_d", squeeze_factor=2, position_buckets=16,
                            max_position_embeddings=64),
    "unispeech_sat": lambda: _audio("UniSpeechSatForCTC", "UniSpeechSatConfig", "unispeech_sat"),
    "siglip": lambda: _siglip(),
    "groupvit": lambda: _groupvit(),
    "git_caption": lambda: _git(),
})


def _bart_cls():
    ids, mask, _ = zw._padded(zw._tokens())
    ids[:, -1] = 2  # one eos per sequence, as the classification head requires
    ids[-1, 10] = 2
    ids[-1, -1] = 1
    return TrainingStep(_model("BartForSequenceClassification", "BartConfig", vocab_size=V, num_labels=3, **_S2S),
                        {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 2])},
                        zw._hf_loss, zw._adamw_no_decay, name="bart_seq_cls")


def _qa():
    ids, mask, _ = zw._padded(zw._tokens())
    return TrainingStep(_model("BertForQuestionAnswering", "BertConfig", vocab_size=V, **_BL),
                        {"input_ids": ids, "attention_mask": mask, "start_positions": torch.tensor([3, 5]),
                         "end_positions": torch.tensor([6, 7])}, zw._hf_loss, zw._adamw, name="bert_qa")


def _double_heads():
    ids = zw._tokens(batch=2 * 2, seq=12).view(2, 2, 12)
    return TrainingStep(_model("GPT2DoubleHeadsModel", "GPT2Config", vocab_size=V, n_layer=2, n_embd=32, n_head=2,
                               n_positions=64),
                        {"input_ids": ids, "mc_token_ids": torch.tensor([[11, 8], [11, 11]]), "labels": ids,
                         "mc_labels": torch.tensor([1, 0])},
                        lambda m, b: (lambda o: o.loss + o.mc_loss)(m(**b)), zw._adamw, name="gpt2_double_heads")


def _clip_sched():
    step = _lm("GPTNeoForCausalLM", "GPTNeoConfig", "gpt_neo_clip_onecycle", num_layers=2, hidden_size=32,
               num_heads=2, attention_types=[[["global", "local"], 1]], window_size=8, max_position_embeddings=64)
    step.clip_grad_norm = 0.5
    step.scheduler = lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=100)
    return step


def _reformer():
    ids = zw._tokens(seq=32)
    m = _model("ReformerModelWithLMHead", "ReformerConfig", vocab_size=V, hidden_size=32, num_attention_heads=2,
               attention_head_size=16, feed_forward_size=64, attn_layers=["lsh", "local"], axial_pos_embds=False,
               max_position_embeddings=32, lsh_attn_chunk_length=8, local_attn_chunk_length=8, num_buckets=4,
               num_hashes=2, is_decoder=True, hidden_dropout_prob=0.0)
    return TrainingStep(m, {"input_ids": ids, "labels": ids}, zw._hf_loss, zw._adamw, name="reformer_lsh")


def _pixels(cls, config, name, **cfg):
    return TrainingStep(_model(cls, config, **cfg), {"pixel_values": torch.randn(2, 3, 32, 32)}, zw._hf_loss,
                        zw._adamw_no_decay, name=name)


def _videomae():
    m = _model("VideoMAEForPreTraining", "VideoMAEConfig", image_size=32, patch_size=8, num_frames=4, tubelet_size=2,
               decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
               decoder_intermediate_size=32, **_VIT)
    n = (4 // 2) * (32 // 8) ** 2
    masked = torch.zeros(2, n, dtype=torch.bool)
    masked[:, ::2] = True
    return TrainingStep(m, {"pixel_values": torch.randn(2, 4, 3, 32, 32), "bool_masked_pos": masked}, zw._hf_loss,
                        zw._adamw, name="videomae")


def _ast():
    m = _model("ASTForAudioClassification", "ASTConfig", num_mel_bins=16, max_length=32, patch_size=8,
               frequency_stride=8, time_stride=8, num_labels=4, **_VIT)
    return TrainingStep(m, {"input_values": torch.randn(2, 32, 16), "labels": torch.tensor([1, 3])}, zw._hf_loss,
                        zw._adamw, name="ast_audio")


def _towers(cls, config, name, text=None, vision=None, **cfg):
    tf = zw._tf()
    c = getattr(tf, config)(text_config=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=2, max_position_embeddings=32, **(text or {})),
                            vision_config={**dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                  num_attention_heads=2, image_size=16, patch_size=4), **(vision or {})},
                            **cfg)
    ids = zw._tokens(batch=4, seq=8)
    return TrainingStep(getattr(tf, cls)(c), {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                              "pixel_values": torch.randn(4, 3, 16, 16), "return_loss": True},
                        zw._hf_loss, zw._adamw, name=name)


def _siglip():
    return _towers("SiglipModel", "SiglipConfig", "siglip")


def _groupvit():
    return _towers("GroupViTModel", "GroupViTConfig", "groupvit",
                   vision={"depths": [1, 1], "num_group_tokens": [8, 0], "num_output_groups": [4, 4]},
                   projection_dim=16, projection_intermediate_dim=32)


def _git():
    tf = zw._tf()
    c = tf.GitConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=64, vision_config=dict(hidden_size=32, intermediate_size=64,
                                                                    num_hidden_layers=1, num_attention_heads=2,
                                                                    image_size=16, patch_size=4))
    ids = zw._tokens(seq=8)
    return TrainingStep(tf.GitForCausalLM(c), {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                               "pixel_values": torch.randn(2, 3, 16, 16), "labels": ids},
                        zw._hf_loss, zw._adamw, name="git_caption")


_VIT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def _masked(cls, config, name, **cfg):
    return zw._masked(cls, config, name, **cfg)


def _clip(step):
    step.step_fn = _clipped_step
    return step


def _layoutlm():
    ids, mask, _ = zw._padded(zw._tokens())
    x0 = torch.randint(0, 500, ids.shape)
    y0 = torch.randint(0, 500, ids.shape)
    bbox = torch.stack([x0, y0, x0 + torch.randint(1, 400, ids.shape), y0 + torch.randint(1, 400, ids.shape)], -1)
    labels = torch.randint(0, 4, ids.shape).masked_fill(mask == 0, -100)
    return TrainingStep(_model("LayoutLMForTokenClassification", "LayoutLMConfig", vocab_size=V, num_labels=4, **_BL),
                        {"input_ids": ids, "bbox": bbox, "attention_mask": mask, "labels": labels},
                        zw._hf_loss, zw._adamw_no_decay, name="layoutlm")


def _regression():
    ids, mask, _ = zw._padded(zw._tokens())
    return TrainingStep(_model("DebertaV2ForSequenceClassification", "DebertaV2Config", vocab_size=V, num_labels=1,
                               relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8,
                               max_relative_positions=16, **_BL),
                        {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0.3, -1.2])},
                        zw._hf_loss, zw._adamw_no_decay, name="deberta_v2_regression")


def _canine():
    ids = torch.randint(32, 1000, (2, 32))
    mask = torch.ones_like(ids)
    mask[-1, 20:] = 0
    return TrainingStep(_model("CanineForSequenceClassification", "CanineConfig", num_labels=3,
                               hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                               downsampling_rate=4, num_hash_buckets=64, num_hash_functions=2,
                               max_position_embeddings=64, local_transformer_stride=8),
                        {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([1, 2])},
                        zw._hf_loss, zw._adamw, name="canine")


def _deit():
    return zw._image("DeiTForImageClassification", "DeiTConfig", "deit_distilled", image_size=32, patch_size=8,
                     **_VIT)


def _speecht5():
    tf = zw._tf()
    cfg = tf.SpeechT5Config(vocab_size=32, hidden_size=32, encoder_layers=1, decoder_layers=1,
                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                            decoder_ffn_dim=64, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, speech_decoder_prenet_units=32,
                            mask_time_prob=0.0, max_text_positions=64, max_speech_positions=512)
    labels = torch.randint(3, 32, (2, 8))
    return TrainingStep(tf.SpeechT5ForSpeechToText(cfg), {"input_values": torch.randn(2, 1600) * 0.1, "labels": labels},
                        zw._hf_loss, zw._adamw, name="speecht5_asr")


def _encodec_loss(model, batch):
    out = model(batch)
    return torch.nn.functional.l1_loss(out.audio_values[..., : batch.shape[-1]], batch)


def _encodec():
    m = _model("EncodecModel", "EncodecConfig", num_filters=4, hidden_size=16, upsampling_ratios=[4, 2],
               codebook_size=32, num_lstm_layers=1, target_bandwidths=[24.0], sampling_rate=8000)
    return TrainingStep(m, torch.randn(2, 1, 800) * 0.1, _encodec_loss, zw._adamw, name="encodec")


def _patchtst():
    m = _model("PatchTSTForPrediction", "PatchTSTConfig", num_input_channels=3, context_length=32, patch_length=8,
               patch_stride=8, prediction_length=8, d_model=16, num_attention_heads=2, num_hidden_layers=2,
               ffn_dim=32)
    return TrainingStep(m, {"past_values": torch.randn(4, 32, 3), "future_values": torch.randn(4, 8, 3)},
                        zw._hf_loss, zw._adamw, name="patchtst")


def _vilt():
    ids = zw._tokens(seq=8)
    m = _model("ViltForQuestionAnswering", "ViltConfig", vocab_size=V, image_size=32, patch_size=8,
               max_image_length=-1, num_labels=6, max_position_embeddings=16, **_VIT)
    return TrainingStep(m, {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                            "pixel_values": torch.randn(2, 3, 32, 32), "pixel_mask": torch.ones(2, 32, 32).long(),
                            "labels": torch.rand(2, 6)}, zw._hf_loss, zw._adamw, name="vilt")


def _blip():
    tf = zw._tf()
    cfg = tf.BlipConfig(text_config=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=2, max_position_embeddings=32, encoder_hidden_size=32),
                        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                           num_attention_heads=2, image_size=16, patch_size=4),
                        projection_dim=16)
    ids = zw._tokens(seq=8)
    return TrainingStep(tf.BlipForConditionalGeneration(cfg),
                        {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                         "pixel_values": torch.randn(2, 3, 16, 16), "labels": ids},
                        zw._hf_loss, zw._adamw, name="blip_caption")


def _perceiver():
    tf = zw._tf()
    cfg = tf.PerceiverConfig(vocab_size=V, num_latents=8, d_latents=32, d_model=32, num_blocks=1,
                             num_self_attends_per_block=1, num_self_attention_heads=2,
                             num_cross_attention_heads=1, max_position_embeddings=16)
    ids, mask, _ = zw._padded(zw._tokens())
    labels = torch.full_like(ids, -100)
    labels[:, 1::4] = ids[:, 1::4]
    return TrainingStep(tf.PerceiverForMaskedLM(cfg), {"inputs": ids, "attention_mask": mask, "labels": labels},
                        zw._hf_loss, zw._adamw, name="perceiver_mlm")


def _limit(how):
    kf = re.search(r"limit ([\d.e+-]+)\)", how or "")
    wide = re.search(r"perturbation \(([\d.e+-]+)\)", how or "")
    return max([float(m.group(1)) for m in (kf, wide) if m] or [0.0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--out")
    ap.add_argument("--cpu-kernels", default="auto", choices=("auto", "emulated", "native"))
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    names = args.names or list(MODELS)
    print(f"{'model':24s} {'seed':>4s} {'params':>8s} {'bf16':>12s} {'fp16':>12s} {'s':>5s}  first error")
    bad = 0
    for name in names:
        for seed in (int(s) for s in args.seeds.split(",")):
            torch.manual_seed(seed)
            t = time.process_time()
            try:
                step = MODELS[name]()
            except Exception as e:  # a config this transformers does not take: not the checker's
                print(f"{name:24s} {seed:4d} build failed: {type(e).__name__}: {str(e)[:120]}", flush=True)
                break
            n = sum(p.numel() for p in step.model.parameters())
            try:
                r = check_step(step, devices=["cpu"], seed=seed, cpu_kernels=args.cpu_kernels)
            except Exception:
                print(f"{name:24s} {seed:4d} {n:8d} CHECK RAISED", flush=True)
                traceback.print_exc()
                bad += 1
                continue
            cells = {}
            for run in r.runs:
                if run.device == "cpu" and run.mode in ("bfloat16", "float16"):
                    lim = _limit(run.how)
                    m = "q" if not lim else f"{run.grad_err / lim:.2f}" if run.grad_err is not None else "-"
                    cells[run.mode] = f"{run.status[:7]} {m}"
            err = next((f"{f.kind} {f.mode or ''} {f.module or ''} {f.name or ''}" for f in r.errors), "")
            bad += not r.ok
            print(f"{name:24s} {seed:4d} {n:8d} {cells.get('bfloat16', '-'):>12s} {cells.get('float16', '-'):>12s} "
                  f"{time.process_time() - t:5.1f}  {err[:90]}", flush=True)
            if out and not r.ok:
                (out / f"{name}-{seed}.txt").write_text(str(r))
    print(f"failing checks: {bad}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
