"""Semantic segmentation trained with accelerate; evaluation lives in its own module and runs
after every epoch."""

import torch
import torch.nn.functional as F
from accelerate import Accelerator

from evaluate import evaluate


def main(model, train_loader, val_loader, epochs=100):
    accelerator = Accelerator()
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-5)
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)
    for epoch in range(epochs):
        model.train()
        for batch in train_loader:
            logits = model(batch["pixel_values"])
            loss = F.cross_entropy(logits, batch["labels"], ignore_index=255)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        miou = evaluate(model, val_loader, accelerator)
        accelerator.print(f"epoch {epoch}: mIoU {miou:.3f}")
