"""Evaluation over the validation split: every batch's logits are gathered from all processes
and kept for the epoch's mIoU. Nothing turns autograd off, so each kept tensor holds its graph
(every activation of the forward pass) and the evaluation runs out of GPU memory part way.

Source: mit-han-lab/spvnas issue #108, "evaluate.py running out of memory because there is no
no_grad modifier" (CUDA out of memory; fixed by a `torch.no_grad()` around the inference), the
shape many evaluation loops fixed the same way (ludwig-ai/ludwig pull request #1739). Fix:
`@torch.no_grad()` on `evaluate`.
"""

import torch


def evaluate(model, val_loader, accelerator, num_classes=19):
    model.eval()
    all_preds = []
    all_labels = []
    for batch in val_loader:  # expect: LS009
        logits = model(batch["pixel_values"])
        logits, labels = accelerator.gather_for_metrics((logits, batch["labels"]))
        all_preds.append(logits)
        all_labels.append(labels)
    preds = torch.cat(all_preds).argmax(1)
    labels = torch.cat(all_labels)
    ious = []
    for c in range(num_classes):
        inter = ((preds == c) & (labels == c)).sum().item()
        union = ((preds == c) | (labels == c)).sum().item()
        if union:
            ious.append(inter / union)
    return sum(ious) / max(len(ious), 1)
