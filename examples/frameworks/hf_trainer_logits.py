"""A transformers `Trainer` subclass that keeps each batch's logits, in two
versions:

    python hf_trainer_logits.py leak|healthy [SECONDS]

`leak` overrides `compute_loss` to keep `outputs.logits` in
`self.kept_logits` for an end-of-run analysis: each one carries the
autograd graph of its forward pass. `healthy` keeps
`outputs.logits.detach().argmax(-1)`, predictions without a graph. A
tiny BERT built from a config (no download: offline), random token ids,
CPU; it trains for SECONDS of its own CPU time (default 25; a busy
machine stretches the run, it does not cut its work) and prints how many
optimizer steps the Trainer made. The Trainer's own `log_history` grows
by one entry every 20 steps in both: a record of the run, not a leak.
"""

import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


class RandomTokens(Dataset):
    def __init__(self, n=100000, length=32, vocab=1000):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (2048, length), generator=g)
        self.labels = torch.randint(0, 2, (2048,), generator=g)
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        j = i % len(self.ids)
        return {"input_ids": self.ids[j], "labels": self.labels[j]}


class KeepingTrainer(Trainer):
    def __init__(self, *args, keep_graphs=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.keep_graphs = keep_graphs
        self.kept_logits = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)  # FORWARD_LINE
        if self.keep_graphs:
            self.kept_logits.append(outputs.logits)  # LEAK_LINE
        else:
            self.kept_logits.append(outputs.logits.detach().argmax(-1))
            del self.kept_logits[:-20]
        return (outputs.loss, outputs) if return_outputs else outputs.loss


class StopAfter(TrainerCallback):
    def __init__(self, seconds):
        self.seconds = seconds
        self.t0 = None

    def on_step_end(self, args, state, control, **kwargs):
        if self.t0 is None:
            self.t0 = time.process_time()
        if time.process_time() - self.t0 >= self.seconds:
            control.should_training_stop = True


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "leak"
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 25.0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128,
                        max_position_embeddings=64, num_labels=2)
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=os.path.join(os.environ.get("TMPDIR", "/tmp"), "hf_trainer_logits"),
        per_device_train_batch_size=16, max_steps=1000000, learning_rate=1e-4,
        logging_steps=20, save_strategy="no", report_to=[], use_cpu=True,
        disable_tqdm=True, dataloader_num_workers=0,
    )
    trainer = KeepingTrainer(model=model, args=args, train_dataset=RandomTokens(),
                             keep_graphs=(mode == "leak"), callbacks=[StopAfter(seconds)])
    trainer.train()
    print("optimizer steps:", trainer.state.global_step, flush=True)


if __name__ == "__main__":
    main()
