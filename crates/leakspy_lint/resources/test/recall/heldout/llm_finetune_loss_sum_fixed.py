"""Fine-tuning a causal language model with accelerate (DeepSpeed underneath): the epoch's loss
is summed as a tensor for the end-of-epoch log, so the sum links every step's graph.

Source: ray-project/ray pull request #40940, "Make sure that loss can be freed after every
iteration" (the fine-tuning template's `loss_sum += loss` leaked memory over a run, closes
ray#40714). Fix: `loss_sum += loss.item()`.
"""

import math
import time

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, get_linear_schedule_with_warmup


def training_function(config, train_ds, eval_ds):
    accelerator = Accelerator(gradient_accumulation_steps=config["grad_accum"])
    model = AutoModelForCausalLM.from_pretrained(config["model_name"], torch_dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    train_loader = DataLoader(train_ds, batch_size=config["batch_size"], shuffle=True)
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, 100, len(train_loader) * config["epochs"])
    model, optimizer, train_loader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_loader, lr_scheduler)

    for epoch in range(config["epochs"]):
        model.train()
        loss_sum = torch.tensor(0.0, device=accelerator.device)
        s_epoch = time.time()
        for step, batch in enumerate(train_loader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                loss_sum += loss.item()
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.is_main_process and step % 50 == 0:
                accelerator.print(f"[epoch {epoch} step {step}] loss: {loss.item():.4f}")
        aggregated = accelerator.gather(loss_sum).sum() / (len(train_loader) * accelerator.num_processes)
        accelerator.print(f"epoch {epoch}: loss {aggregated.item():.4f}, "
                          f"ppl {math.exp(aggregated.item()):.2f}, {time.time() - s_epoch:.0f} s")
